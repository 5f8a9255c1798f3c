"""Headless Chromium for tests that look at a page as a person would.

Debian's `chromium` and `chromium-driver` packages, driven by Selenium with the system
chromedriver: Selenium Manager is never asked (it would download a browser), and when the
packages are missing they are installed with apt-get (as root). A machine that cannot install
them skips the browser tests, and fails them under `CI=true`.

    from tests.browser import Chromium

    def test_page(chromium: Chromium, ...) -> None:
        chromium.open(f"{base_url}/docs")
        chromium.wait_for_text("#swagger-ui", "/api/queues")
        chromium.screenshot(path)
        assert chromium.hosts_requested() <= {"127.0.0.1"}

`chromium` is a pytest fixture (registered by tests/conftest.py): a fresh browser and profile
per test. By default the browser can reach loopback only: every other host name is made
unresolvable, so a page that needs the internet shows it by failing to render.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = ("chromium", "chromium-driver")
APT_TIMEOUT_S = 900
WAIT_S = 60.0
"""How long a page may take to show what a test waits for (a loaded 2-core CI machine)."""
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1600",
)
LOOPBACK_ONLY = "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"
"""--host-resolver-rules: no host name but loopback resolves, as in a closed network."""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"headless Chromium is not available under CI=true: {reason}")
    pytest.skip(f"headless Chromium is not available: {reason}")


def _apt(*arguments: str) -> subprocess.CompletedProcess[bytes] | None:
    environment = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    try:
        return subprocess.run(
            ["apt-get", *arguments], env=environment, capture_output=True, timeout=APT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _installed() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


def ensure_chromium() -> None:
    """Debian's chromium and chromium-driver, installed with apt-get when missing (once with the
    package lists as they are, once more after `apt-get update`)."""
    if _installed():
        return
    if shutil.which("apt-get") is None:
        _unavailable(f"{CHROMIUM} or {CHROMEDRIVER} is missing and there is no apt-get")
    install = ("install", "-y", "--no-install-recommends", *PACKAGES)
    done = _apt(*install)
    if not _installed():
        _apt("update")
        done = _apt(*install)
    if not _installed():
        said = "timed out or could not run" if done is None else done.stderr.decode(errors="replace")[-2000:]
        _unavailable(f"`apt-get install {' '.join(PACKAGES)}` did not install them: {said}")


class Chromium:
    """One headless browser with its own profile directory."""

    def __init__(self, profile: Path, loopback_only: bool = True) -> None:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        if loopback_only:
            options.add_argument(f"--host-resolver-rules={LOOPBACK_ONLY}")
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        # An explicit driver path: Selenium Manager (which downloads browsers) is never run.
        service = Service(executable_path=str(CHROMEDRIVER))
        self.driver = webdriver.Chrome(service=service, options=options)
        self._requested: dict[str, str] = {}
        self._blocked: dict[str, str] = {}

    def open(self, url: str) -> None:
        self.driver.get(url)

    def wait_for_text(self, css: str, text: str, timeout_s: float = WAIT_S) -> str:
        """Poll until an element matching `css` shows `text` (a deadline, not a sleep)."""
        locator = (By.CSS_SELECTOR, css)
        try:
            WebDriverWait(self.driver, timeout_s).until(
                expected_conditions.text_to_be_present_in_element(locator, text)
            )
        except TimeoutException:
            page = self.driver.find_element(By.TAG_NAME, "body").text[:2000]
            raise AssertionError(
                f"{text!r} did not appear in {css!r} within {timeout_s} s; the page shows:\n{page}\n"
                f"requested: {self.requested_urls()}\nblocked: {self.blocked_urls()}"
            ) from None
        shown: str = self.driver.find_element(*locator).text
        return shown

    def _read_network_log(self) -> None:
        for entry in self.driver.get_log("performance"):  # type: ignore[no-untyped-call]
            message = json.loads(entry["message"])["message"]
            params = message.get("params", {})
            if message.get("method") == "Network.requestWillBeSent":
                self._requested[params["requestId"]] = params["request"]["url"]
            elif message.get("method") == "Network.loadingFailed" and params.get("blockedReason"):
                self._blocked[params["requestId"]] = params["blockedReason"]

    def requested_urls(self) -> list[str]:
        """Every URL the pages asked for so far (Chrome's network log), in order, but those
        the browser itself refused to request (Content-Security-Policy and the like)."""
        self._read_network_log()
        return [url for request, url in self._requested.items() if request not in self._blocked]

    def blocked_urls(self) -> dict[str, str]:
        """URLs the browser refused to request, with the reason (`csp`, ...)."""
        self._read_network_log()
        return {self._requested[request]: reason for request, reason in self._blocked.items()}

    def hosts_requested(self) -> set[str]:
        """Hosts of the http(s) and ws(s) URLs requested (data: and blob: URLs have none)."""
        return {
            urlsplit(url).hostname or ""
            for url in self.requested_urls()
            if urlsplit(url).scheme in ("http", "https", "ws", "wss")
        }

    def console_errors(self) -> list[str]:
        logged = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [entry["message"] for entry in logged if entry["level"] == "SEVERE"]

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.driver.save_screenshot(str(path)):
            raise AssertionError(f"Chromium could not save a screenshot to {path}")
        return path

    def quit(self) -> None:
        self.driver.quit()


@pytest.fixture
def chromium() -> Iterator[Chromium]:
    """A fresh headless Chromium (loopback only) with a fresh profile, quit after the test."""
    ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        browser = Chromium(Path(profile))
        try:
            yield browser
        finally:
            browser.quit()
