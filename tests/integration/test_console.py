"""/console: the page and its assets (strict Content-Security-Policy, nothing from another host),
and an operator's day in a real headless Chromium against a real gateway process on each
store: create a queue, send through REST and watch the count change, open a message and
decode its body, move it, export and import, purge with the confirmation, resend a dead letter.

The SQLite run saves screenshots in the test's folder (the PostgreSQL run shows the same screens
and saves none); with UPDATE_SCREENSHOTS=1 it writes them to docs/images/ (docs/console.md
shows them)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from app.routes.console import ASSETS, POLICY
from tests.browser import WAIT_S, Chromium
from tests.conftest import repository_root
from tests.gateway_process import GatewayProcess
from tests.integration.test_docs_pages import foreign, urls_of

IMAGES = repository_root() / "docs" / "images"
ORDERS = "private$/orders"
RETRY = "private$/retry"
DEADLETTER = "system$;deadletter"
FAR = "DIRECT=HTTP://127.0.0.2:9/msmq/private$/far"


# -- the page -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_console_page_is_self_contained_under_a_strict_policy(client: httpx.AsyncClient) -> None:
    page = await client.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert policy == POLICY
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline to allow
    urls = urls_of(page.text)
    assert urls and not foreign(str(page.url), urls)
    for name in ASSETS:
        asset = await client.get(f"/console/assets/{name}")
        assert asset.status_code == 200, name
        assert asset.headers["content-security-policy"] == POLICY
        assert "http://" not in asset.text and "https://" not in asset.text, name  # no CDN
        for kept in ("localStorage", "sessionStorage", "document.cookie", "indexedDB"):
            assert kept not in asset.text, (name, kept)  # the API key stays in memory
        assert ".innerHTML" not in asset.text, name  # senders' text is shown as text only
    for name in ("../main.py", "index.html", "nope.js", "%2e%2e%2fmain.py"):
        assert (await client.get(f"/console/assets/{name}")).status_code == 404, name


# -- an operator's day in a browser ---------------------------------------------------


@pytest.fixture
def gateway(database_url: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    settings = {
        "MSMQGW_SWEEP_INTERVAL_S": "0.2",
        "MSMQGW_TRIGGERS_ENABLED": "false",
        "MSMQGW_SRMP_OUTBOUND_HOSTS": "127.0.0.2:9",  # nothing listens there: its outgoing queue waits
    }
    server = GatewayProcess(database_url, settings, tmp_path / "gw.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class Operator:
    """The console as a person uses it: clicks, and waits for what the page shows."""

    def __init__(self, browser: Chromium, shots: Path | None, publish: bool) -> None:
        self.browser = browser
        self.driver = browser.driver
        self.shots = shots
        """Where screenshots go; None: none are taken (the same screens on the other store)."""
        self.publish = publish

    def wait(self, condition: Any) -> Any:
        return WebDriverWait(self.driver, WAIT_S).until(condition)

    def click(self, css: str) -> WebElement:
        """Click the element once it is there and clickable (found again if the page replaced it)."""

        def clicked(driver: Any) -> WebElement | bool:
            try:
                clickable = expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, css))
                element: WebElement | bool = clickable(driver)
                if not isinstance(element, WebElement):
                    return False
                element.click()
                return element
            except StaleElementReferenceException:
                return False

        found: WebElement = self.wait(clicked)
        return found

    def text(self, css: str, text: str) -> str:
        return self.browser.wait_for_text(css, text)

    def count(self, queue: str, text: str) -> None:
        """The queue tree's count for `queue` (refreshed every 2 s) reads `text` first."""
        read = "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.textContent)"
        selector = f'[data-count-of="{queue}"]'
        self.wait(lambda d: any(shown.startswith(text) for shown in d.execute_script(read, selector)))

    def confirm(self, question: str, shot: str | None = None) -> None:
        self.text("#confirm-text", question)
        if shot:
            self.shot(shot)
        self.click("#confirm-ok")
        self.wait(lambda driver: not driver.find_element(By.ID, "confirm").get_attribute("open"))

    def open_queue(self, queue: str) -> None:
        self.click(f'a[data-queue="{queue}"]')
        self.text("#queue-title", queue)

    def shot(self, name: str) -> None:
        if self.shots is None:
            return
        path = self.browser.screenshot(self.shots / f"console-{name}.png")
        if self.publish:
            shutil.copy(path, IMAGES / path.name)


def rest_send(gateway: GatewayProcess, queue: str, **message: Any) -> dict[str, Any]:
    safe = "$;=" if queue.startswith("DIRECT=") else "$/;"  # a format name's slashes are encoded
    answer = httpx.post(f"{gateway.base_url}/api/queues/{quote(queue, safe=safe)}/messages", json=message)
    assert answer.status_code == 201, answer.text
    sent: dict[str, Any] = answer.json()
    return sent


def test_an_operators_day_in_the_console(
    chromium: Chromium, gateway: GatewayProcess, database_url: str, tmp_path: Path
) -> None:
    sqlite = database_url.startswith("sqlite")
    publish = os.environ.get("UPDATE_SCREENSHOTS") == "1" and sqlite
    me = Operator(chromium, tmp_path / "screenshots" if sqlite else None, publish)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    me.driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    chromium.open(f"{gateway.base_url}/console")
    me.text("#tree", DEADLETTER)

    # Create a queue (and one more over REST), send through REST, watch the count change.
    me.click("#new-queue-link")
    me.click("#create-path").send_keys(ORDERS)
    me.click("#create")
    me.text("#queue-title", ORDERS)
    assert httpx.post(f"{gateway.base_url}/api/queues", json={"path": RETRY}).status_code == 201
    rest_send(gateway, ORDERS, body="Hello from VB6", format="dotnet-xml-string", label="greeting")
    rest_send(gateway, ORDERS, body='{"order": 2}', label="order 2")
    rest_send(gateway, ORDERS, body="order 3", label="order 3", priority=1)
    me.count(ORDERS, "3 ·")
    me.text("#queue-count", "3 messages")
    me.text("#message-table", "order 2")
    me.shot("queue")

    # Open a message and decode its body; raw and hex views.
    me.click("#message-table a.open")
    me.text("#decoded-format", "xml")
    me.text("#decoded-value", "Hello from VB6")
    me.shot("message")
    me.click("#tab-hex")
    me.text("#body-hex", "00000000  3c")
    me.click("#tab-text")
    me.text("#body-text", "<string>Hello from VB6</string>")

    # Move it to another queue (one transaction, with a confirmation).
    Select(me.wait(lambda d: d.find_element(By.ID, "viewer-move-target"))).select_by_value(RETRY)
    me.click("#viewer-move")
    me.confirm(f"Move 1 message from {ORDERS} to {RETRY}?")
    me.count(RETRY, "1 ·")
    me.count(ORDERS, "2 ·")

    # Export the queue to a file, and import the file into the other queue.
    me.text("#queue-title", ORDERS)
    me.click("#export")
    exported = me.wait(lambda driver: [path for path in downloads.glob("*.jsonl")])
    assert len(exported[0].read_text().splitlines()) == 2
    me.open_queue(RETRY)
    me.wait(lambda driver: driver.find_element(By.ID, "import-file")).send_keys(str(exported[0]))
    me.click("#import")
    me.confirm(f"Import 2 messages from {exported[0].name} into {RETRY}?")
    me.count(RETRY, "3 ·")

    # Purge, with the confirmation that says how many messages go.
    me.open_queue(ORDERS)
    me.click("#purge")
    me.confirm(f"Purge 2 messages from {ORDERS}?", shot="purge")
    me.count(ORDERS, "0 ·")

    # A dead letter, resent to the queue it was sent to.
    rest_send(gateway, ORDERS, body="late fish", time_to_be_received=1, journal=1)
    me.count(DEADLETTER, "1 ·")
    me.open_queue(DEADLETTER)
    me.text("#message-table", "MQMSG_CLASS_NACK_RECEIVE_TIMEOUT")
    me.text("#message-table", "private$\\orders")  # where it was sent
    me.shot("dead-letters")
    me.click("#resend-all")
    me.confirm(f"Resend 1 dead letter from {DEADLETTER} to the queues they were sent to?")
    me.count(DEADLETTER, "0 ·")
    me.count(ORDERS, "1 ·")

    # Edit a queue's properties; delete a queue.
    me.open_queue(ORDERS)
    me.click("#show-edit")
    me.click('#edit-form input[name="journal"]')
    me.click('#edit-form button[type="submit"]')
    me.confirm(f"Change the properties of {ORDERS}?")
    me.text("main", "journal on")
    me.open_queue(RETRY)
    me.click("#delete-queue")
    me.confirm(f"Delete queue {RETRY} and its 3 messages?")
    me.wait(lambda driver: not driver.find_elements(By.CSS_SELECTOR, f'a[data-queue="{RETRY}"]'))

    # Pause and resume an outgoing queue; a trigger and its (empty) invocation log.
    rest_send(gateway, FAR, body="far away")
    created = httpx.post(f"{gateway.base_url}/api/triggers", json={"name": "audit", "queue": ORDERS})
    assert created.status_code == 201, created.text
    me.text("#tree", "127.0.0.2:9")
    me.click('a[href="#/outgoing"]')
    me.click("#outgoing-table button.pause")
    me.confirm("Pause sending to HTTP://127.0.0.2:9/msmq/private$/far?")
    me.text("#outgoing-table", "paused")
    me.shot("outgoing")
    me.click("#outgoing-table button.resume")
    me.confirm("Resume sending to HTTP://127.0.0.2:9/msmq/private$/far?")
    me.wait(lambda driver: driver.find_elements(By.CSS_SELECTOR, "#outgoing-table button.pause"))
    me.click('a[href="#/triggers"]')
    me.click("#triggers-table a")
    me.text("main", "No invocation yet.")

    assert chromium.hosts_requested() <= {"127.0.0.1"}
    assert not chromium.blocked_urls(), chromium.blocked_urls()
    errors = [text for text in chromium.console_errors() if "/api/me" not in text]
    assert not errors, errors


def test_text_sent_in_base64_is_shown_as_text(chromium: Chromium, gateway: GatewayProcess) -> None:
    """An answer carries text of many control characters in base64, shorter than JSON would
    write it: the viewer's Text tab shows it as text all the same."""
    assert httpx.post(f"{gateway.base_url}/api/queues", json={"path": ORDERS}).status_code == 201
    rest_send(gateway, ORDERS, body="\x07\x07 ring", label="bell")
    me = Operator(chromium, None, publish=False)
    chromium.open(f"{gateway.base_url}/console")
    me.open_queue(ORDERS)
    me.click("#message-table a.open")
    me.click("#tab-text")
    me.text("#body-text", "\x07\x07 ring")


def test_a_principal_sees_only_the_actions_it_may_take(chromium: Chromium, gateway: GatewayProcess) -> None:
    """Signed in with a key that may peek at one queue and read properties, the operator sees
    no purge, send, edit, delete, move or import: the console asks GET /api/me/rights."""
    base = gateway.base_url
    assert httpx.post(f"{base}/api/queues", json={"path": ORDERS}).status_code == 201
    rest_send(gateway, ORDERS, body="look, do not touch", label="for the viewer")
    for queue, rights in ((ORDERS, ["PEEK_MESSAGE", "GET_PROPERTIES"]), (None, ["GET_PROPERTIES"])):
        granted = httpx.post(
            f"{base}/api/grants", json={"principal": "viewer", "queue": queue, "rights": rights}
        )
        assert granted.status_code == 200, granted.text
    created = httpx.post(f"{base}/api/keys", json={"principal": "viewer"})
    assert created.status_code == 201, created.text
    me = Operator(chromium, None, publish=False)

    def shown(css: str) -> bool:
        return bool(me.driver.find_elements(By.CSS_SELECTOR, css))

    chromium.open(f"{base}/console")
    me.text("#tree", DEADLETTER)
    me.click("#api-key").send_keys(created.json()["key"])
    me.click("#sign-in-button")
    me.text("#who", "signed in as viewer")
    me.open_queue(ORDERS)
    me.text("#message-table", "for the viewer")
    me.wait(lambda driver: shown("#export"))  # PEEK_MESSAGE: the button bar is drawn
    for forbidden in ("#purge", "#show-send", "#show-edit", "#delete-queue", "#import-file", "#move-target"):
        assert not shown(forbidden), forbidden
    me.click("#message-table a.open")
    me.wait(lambda driver: shown("#viewer-export"))
    for forbidden in ("#delete-message", "#viewer-move", "#viewer-move-target"):
        assert not shown(forbidden), forbidden
