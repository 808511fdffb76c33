"""Chromium (Debian's, never a downloaded one) and real `nua serve` processes for the UI tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser._ui import open_ui
from tests.e2e._proc import Server

CHROMIUM = os.environ.get("NUA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# Per module, not per session: Playwright's sync API keeps an event loop running while it
# is open, and pytest-asyncio cannot start the loops of async tests beside it.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but Chromium is not installed at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A `nua serve` of its own, the demo paced so a test can act mid-task (0.3 s a model
    step, or the seconds a test gives with `parametrize("server", [...], indirect=True)`)."""
    started = Server(tmp_path, step_delay=getattr(request, "param", "0.3")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def ui(browser: Any, server: Server) -> Iterator[Callable[..., Any]]:
    """Open logged-in pages on `server`; their contexts close before the server stops (an
    open event stream would hold its graceful shutdown)."""
    pages: list[Any] = []

    def open_page(**options: Any) -> Any:
        page = open_ui(browser, server, **options)
        pages.append(page)
        return page

    yield open_page
    for page in pages:
        page.context.close()
