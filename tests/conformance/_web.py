"""The web UI column: the shipped page in Debian's Chromium through Playwright."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests._support.polling import wait_for
from tests.browser._ui import open_session, open_ui, ui_state_json
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.conformance._drivers import Answered, Driver, View
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server


class WebDriver(Driver):
    """One browser context (one `client_id`), one page per session it follows."""

    column = "web UI"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        from playwright.sync_api import sync_playwright

        self.playwright = sync_playwright().start()
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        self.browser = self.playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        self.page = open_ui(self.browser, server)
        self.client_id = str(self.page.evaluate("window.__nuaClientId"))
        self.open: str | None = None

    def close(self) -> None:
        self.page.context.close()
        self.browser.close()
        self.playwright.stop()

    def _show(self, sid: str) -> None:
        if self.open != sid:
            open_session(self.page, self.server, sid)
            self.open = sid

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        page = self.page
        if sid is None:
            page.goto(f"{self.server.url}/#/")
            page.wait_for_selector(".list-page")
            page.fill("#new-title", "matrix")
            page.click("button:has-text('New session')")
            page.wait_for_selector(".session[data-rendered]")
            sid = page.get_attribute(".session", "data-session-id")
            assert sid is not None
            self.open = sid
        self._show(sid)
        turns = page.locator(".turn").count()
        page.fill("#composer-text", text)
        page.press("#composer-text", "Enter")
        page.wait_for_function("(n) => document.querySelectorAll('.turn').length > n", arg=turns)
        return sid

    def quick(self, sid: str) -> str | None:
        self._show(sid)
        return ui_state_json(self.page)

    def view(self, sid: str) -> View:
        self._show(sid)
        page = self.page
        state = json.loads(ui_state_json(page))
        # What is drawn, not what is held: the timeline's cards in document order (a
        # response's reasoning sits inside its message's card) and the usage tables.
        items = page.eval_on_selector_all(
            ".turn .timeline > li[data-key]", "els => els.map(e => e.dataset.key)"
        )
        usage = []
        for turn in page.locator(".turn").all():
            rows = turn.locator(".turn-usage table[data-scope=turn] tr.model")
            shown = [
                [rows.nth(i).locator(f"td[data-field={f}]").text_content() or ""
                 for i in range(rows.count())]
                for f in ("input_tokens", "output_tokens")
            ]  # fmt: skip
            # A turn that has used nothing yet draws no numbers.
            count = [sum(int(c.replace(",", "") or 0) for c in cells) for cells in shown]
            usage.append((count[0], count[1]))
        return View(
            state=ui_state_json(page),
            items=tuple(items),
            usage=tuple(usage),
            # The page draws no trace id; it holds the turn's, as the reducer folded it.
            trace_ids=tuple(t["trace_id"] for t in state["turns"]),
        )

    def expected(self, state: dict[str, Any]) -> View:
        view = super().expected(state)
        drawn: list[str] = []

        def walk(turn: dict[str, Any], timeline: list[dict[str, str]]) -> None:
            for ref in timeline:
                if ref["kind"] == "reasoning" and ref["id"] in turn["messages"]:
                    continue
                drawn.append(f"{ref['kind']}:{ref['id']}")
                if ref["kind"] == "worker":
                    walk(turn, turn["workers"][ref["id"]]["timeline"])

        for turn in state["turns"]:
            walk(turn, turn["timeline"])
        return View(view.state, tuple(drawn), view.usage, view.trace_ids)

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        self._show(sid)
        card = f'[data-request-id="{rid}"]'
        button = f"{card} button[data-option-id={option_id}]"
        resolved = f"{card}[data-status=resolved] .resolution"
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        # The button, or the card already resolved: in a race the other answer can reach
        # this page first, and then, as for a person who comes too late, there is nothing
        # to click, only who answered (CI saw the click wait for a button that was gone).
        self.page.wait_for_selector(f"{button}, {resolved}")
        clicked = False
        try:
            if self.page.locator(button).count():
                self.page.click(button, timeout=10_000)
                clicked = True
        except PlaywrightTimeout:
            # Seen on CI under load: the card re-drawn faster than the click's stability
            # check settles ("detached from the DOM, retrying"). The button's own handler
            # still decides; dispatch the click to the button as drawn now, if it is.
            with contextlib.suppress(PlaywrightTimeout):
                self.page.locator(button).dispatch_event("click", timeout=2_000)
                clicked = True
        line = self.page.wait_for_selector(resolved)
        assert line is not None
        winner = line.get_attribute("data-answered-by") or ""
        won = winner == self.client_id
        if clicked and not won:
            # Our answer went out and lost: the page says so once its 409 is back, which
            # may be after the winner's resolution reached it on the stream.
            self.page.wait_for_selector(f"{card} [data-lost=true]")
        return Answered(won, winner)

    def disconnect(self, sid: str) -> None:
        # The tab goes away: its event stream closes with it.
        self.page.goto("about:blank")
        self.open = None

    def reconnect(self, sid: str) -> None:
        self._show(sid)

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        self.page.reload()
        self.open = None
        self._show(sid)
        link = f'.artifact[data-artifact-id="{artifact_id}"] a.download'
        with self.page.expect_download() as download:
            self.page.locator(link).first.click()
        data = Path(download.value.path()).read_bytes()
        assert hashlib.sha256(data).hexdigest()  # a download that finished
        return data

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        # A slow link: every byte of the event stream takes its time.
        self._show(sid)
        cdp = self.page.context.new_cdp_session(self.page)
        cdp.send("Network.enable")
        conditions = {"offline": False, "latency": 200, "uploadThroughput": -1}
        cdp.send("Network.emulateNetworkConditions", conditions | {"downloadThroughput": 4096})
        try:
            yield
        finally:
            cdp.send("Network.emulateNetworkConditions", conditions | {"downloadThroughput": -1})
            cdp.detach()
        wait_for(lambda: self.page.inner_text("#connection") in ("Live", "Reconnecting…"), 30)
