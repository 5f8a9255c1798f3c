"""/docs and /redoc work in a closed network: the pages load nothing from other hosts, and
Swagger UI really renders the API's operations in a headless Chromium that can reach
loopback only."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from app.routes.docs_ui import ASSETS
from app.settings import Settings
from tests.browser import Chromium
from tests.conftest import repository_root
from tests.databases import SqliteDatabases
from tests.inprocess_gateway import InProcessGateway

PAGES = ("/docs", "/redoc")
SCREENSHOT = repository_root() / "docs" / "images" / "swagger-ui.png"
"""Written when UPDATE_SCREENSHOTS=1 (docs/rest-api.md shows it); else the test's own folder."""
_URL_IN_TEXT = re.compile(r"""(?:https?:)?//[^\s'"<>)]+""")


class _Links(HTMLParser):
    """Every URL a page names: in attributes (src, href, …) and in inline scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and name in ("src", "href", "spec-url", "action", "data", "srcset", "content"):
                self.urls.append(value)

    def handle_data(self, data: str) -> None:
        self.urls += _URL_IN_TEXT.findall(data)


def urls_of(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.urls


def foreign(page_url: str, urls: list[str]) -> list[str]:
    """The URLs that point at another host than the page's own."""
    own = urlsplit(page_url).netloc
    return [url for url in urls if urlsplit(urljoin(page_url, url)).netloc not in ("", own)]


@pytest.mark.anyio
@pytest.mark.parametrize("page", PAGES)
async def test_the_page_names_no_other_host_and_its_assets_are_served(
    client: httpx.AsyncClient, page: str
) -> None:
    answer = await client.get(page)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    urls = urls_of(answer.text)
    assert urls, "the page names no asset at all"
    assert not foreign(str(answer.url), urls), foreign(str(answer.url), urls)
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert not _URL_IN_TEXT.findall(policy), policy
    for url in urls:
        path = urlsplit(url).path
        if path.startswith("/docs/assets/"):
            asset = await client.get(path)
            assert asset.status_code == 200, path
            assert asset.headers["content-type"].startswith(ASSETS[path.rsplit("/", 1)[1]][1])
            assert len(asset.content) > 100


def test_the_check_finds_a_cdn_and_another_site() -> None:
    html = (
        '<link rel="stylesheet" href="https://cdn.example.net/ui.css"><script src="/docs/x.js"></script>'
        '<link rel="icon" href="//fonts.example.org/f.png"><script>load("http://cdn.example.net/a.js")</script>'
    )
    assert len(foreign("http://127.0.0.1:8080/docs", urls_of(html))) == 3


@pytest.mark.anyio
async def test_an_unknown_asset_is_a_problem_not_a_file(client: httpx.AsyncClient) -> None:
    for name in ("../schemas.py", "swagger-ui.css.map", "%2e%2e%2fmain.py"):
        answer = await client.get(f"/docs/assets/{name}")
        assert answer.status_code == 404
        assert answer.headers["content-type"] == "application/problem+json"


@pytest.fixture
def gateway(sqlite_databases: SqliteDatabases) -> Iterator[InProcessGateway]:
    with sqlite_databases.database() as database_url:
        server = InProcessGateway(Settings(database_url=database_url))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.mark.slow
def test_swagger_ui_renders_the_operations_with_no_network(
    gateway: InProcessGateway, chromium: Chromium, tmp_path: Path
) -> None:
    chromium.open(f"{gateway.base_url}/docs")
    shown = chromium.wait_for_text("#swagger-ui", "/api/queues/{path}/receive")
    for operation in ("/api/queues", "/api/cursors", "/api/locks/{tag}/commit", "Send a message"):
        assert operation in shown
    assert "Resolver error" not in shown
    assert "Failed to load API definition" not in shown
    chromium.screenshot(SCREENSHOT if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / "docs.png")
    assert chromium.hosts_requested() == {"127.0.0.1"}, chromium.requested_urls()
    assert not chromium.console_errors()


@pytest.mark.slow
def test_redoc_renders_the_operations_with_no_network(gateway: InProcessGateway, chromium: Chromium) -> None:
    chromium.open(f"{gateway.base_url}/redoc")
    chromium.wait_for_text("redoc", "Receive the first message")
    assert chromium.hosts_requested() == {"127.0.0.1"}, chromium.requested_urls()
    # ReDoc's bundle asks for its vendor's logo; the page's policy refuses it.
    assert set(chromium.blocked_urls().values()) <= {"csp"}, chromium.blocked_urls()
