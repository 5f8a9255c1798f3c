"""/docs (Swagger UI) and /redoc (ReDoc), with every asset served by the gateway itself.

The gateway runs in closed networks: pages that load their scripts from a CDN stay blank
there. Swagger UI's and ReDoc's bundles come from the `fastapi-offline` package (PyPI), which
ships them; the favicon is ours. Nothing on these pages names another host, and their
Content-Security-Policy lets the browser load nothing from one: ReDoc's bundle still asks for
its vendor's logo from that vendor's CDN, which the policy refuses (the page shows no logo).
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException

router = APIRouter(include_in_schema=False)

ASSETS_URL = "/docs/assets"
_BUNDLES = Path(str(resources.files("fastapi_offline") / "static"))
_OURS = Path(str(resources.files("app") / "static"))
ASSETS: dict[str, tuple[Path, str]] = {
    "swagger-ui-bundle.js": (_BUNDLES / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (_BUNDLES / "swagger-ui.css", "text/css"),
    "redoc.standalone.js": (_BUNDLES / "redoc.standalone.js", "text/javascript"),
    "favicon.svg": (_OURS / "favicon.svg", "image/svg+xml"),
}
"""The files /docs/assets serves, and nothing else: name -> (file, media type)."""
_CACHE = "public, max-age=86400"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
_POLICY = (
    "default-src 'none'; script-src 'self' {scripts}; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src blob:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _self_only(page: HTMLResponse) -> HTMLResponse:
    """Add the Content-Security-Policy: this host only, and the page's own inline scripts by hash."""
    html = bytes(page.body).decode()
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in _INLINE_SCRIPT.findall(html)
    )
    page.headers["Content-Security-Policy"] = _POLICY.format(scripts=hashes)
    return page


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.svg",
        oauth2_redirect_url=None,
        # Swagger UI would send the document to validator.swagger.io for its badge.
        swagger_ui_parameters={"validatorUrl": None},
    )
    return _self_only(page)


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    page = get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.svg",
        with_google_fonts=False,
    )
    return _self_only(page)


@router.get(ASSETS_URL + "/{name}")
async def asset(name: str) -> FileResponse:
    found = ASSETS.get(name)
    if found is None:
        raise HTTPException(404, f"no asset {name!r}")
    path, media_type = found
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": _CACHE})
