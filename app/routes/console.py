"""/console: the operators' web console, static assets inside the package, served under a
strict Content-Security-Policy (this host only, no inline script or style: the page's code is
ES modules from /console/assets). The console talks to the REST API like any other client;
it keeps an API key in the page's memory only and sends it as `Authorization: Bearer`, never
in a cookie, so a page of another site cannot act through it (no ambient credential)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from starlette.exceptions import HTTPException

router = APIRouter(include_in_schema=False)

_ASSETS = Path(str(resources.files("app") / "static" / "console"))
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
ASSETS = frozenset(
    path.name for path in _ASSETS.iterdir() if path.suffix in MEDIA_TYPES and path.name != "index.html"
)
"""The files /console/assets serves, and nothing else (no path is ever joined from a request)."""
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@router.get("/console/")
async def console_slash() -> RedirectResponse:
    return RedirectResponse("/console", status_code=308)


@router.get("/console")
async def console() -> FileResponse:
    return FileResponse(_ASSETS / "index.html", media_type="text/html", headers=HEADERS)


@router.get("/console/assets/{name}")
async def console_asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise HTTPException(404, f"no console asset {name!r}")
    path = _ASSETS / name
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)
