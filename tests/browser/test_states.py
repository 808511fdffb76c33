"""What the web UI shows for a decision and while a turn waits (issue 12): the whole input
of an approval however it hides its tail (bug 4, with a model that says exactly that), a
rejection that ends the call `rejected` while the turn goes on (also after a reload), a
turn waiting for the model, and a model retry counting down."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import (
    create_session,
    deliver,
    open_session,
    open_ui,
    send_message,
    server_state,
    start_demo,
    ui_state_json,
    wait_converged,
)
from tests.cli._hostile import HIDDEN_COMMAND
from tests.e2e._proc import FakeProvider, Reply, Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

SHOWN = "wc -l notes.md" + "·" * 220 + "; cat ../../token > stolen.txt"


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Server]:
    provider = FakeProvider(
        {
            "count the notes": [
                Reply(calls=[("write_file", {"path": "notes.md", "content": "a\nb\n"})]),
                Reply(calls=[("shell", {"command": HIDDEN_COMMAND})]),
                Reply(text="Counted."),
            ]
        }
    ).start()
    server = Server(tmp_path, model="openai:fake", env=provider.env()).start()
    try:
        yield server
    finally:
        server.stop()
        provider.stop()


def _reject(page: Page) -> str:
    card = page.wait_for_selector(".request[data-status=open]", timeout=30_000)
    request_id = card.get_attribute("data-request-id") or ""
    page.click(f'[data-request-id="{request_id}"] button[data-option-id=reject_once]')
    return request_id


def test_the_approval_shows_the_whole_command(browser: object, hostile: Server) -> None:
    page = open_ui(browser, hostile)  # type: ignore[arg-type]
    try:
        sid = start_demo(hostile, title="hidden tail", text="count the notes")
        open_session(page, hostile, sid)
        card = page.wait_for_selector(".request[data-status=open]", timeout=30_000)
        block = card.query_selector(".whole-input pre.whole")
        assert block is not None and block.text_content() == SHOWN
        # Shown, not merely present: wrapped inside the card, nothing scrolled or clipped.
        geometry = block.evaluate(
            """el => ({scroll: el.scrollHeight, client: el.clientHeight,
                       wide: el.scrollWidth, width: el.clientWidth,
                       lines: Math.round(el.getBoundingClientRect().height
                                         / parseFloat(getComputedStyle(el).lineHeight))})"""
        )
        assert geometry["scroll"] <= geometry["client"] + 1, geometry
        assert geometry["wide"] <= geometry["width"] + 1, geometry
        assert geometry["lines"] >= 2, "the long line wraps"
        assert page.locator(".request[data-status=open] .whole-input pre.whole").is_visible()
        _reject(page)
        page.wait_for_selector(".tool[data-status=rejected]", timeout=30_000)
        page.wait_for_selector(".turn[data-state=ended] .state-end_turn", timeout=30_000)
        assert not list(hostile.data.rglob("stolen.txt"))
        # Answered, the card still holds what was asked, whole, one click away.
        page.click(".request[data-status=resolved] summary:has-text('What was asked')")
        asked = page.locator(".request[data-status=resolved] .whole-input pre.whole")
        assert asked.text_content() == SHOWN and asked.is_visible()
        assert page.errors == []  # type: ignore[attr-defined]
    finally:
        page.context.close()


# A model that takes a second to answer: "waiting" is a state between two actions, and a
# page on a loaded machine may draw no frame in a 0.3 s wait (CI saw all three missed).
@pytest.mark.parametrize("server", ["1.0"], indirect=True)
def test_a_rejection_from_the_ui(ui: Callable[..., Page], server: Server) -> None:
    # The page is open and its stream live before the turn starts: a stream that connects
    # after the approval catches up in one batch, and no frame shows the waits between.
    sid = create_session(server)
    page = ui()
    open_session(page, server, sid)
    page.wait_for_selector("#connection[data-status=live]", timeout=30_000)
    send_message(server, sid)
    # Before the approval: the turn waits for the model at every step, and says so.
    page.wait_for_selector(".turn-activity .waiting-model", timeout=30_000)
    _reject(page)
    rejected = page.wait_for_selector(".tool[data-status=rejected]", timeout=30_000)
    assert rejected.query_selector(".badge.status-rejected").inner_text() == "rejected"
    assert "The user rejected this tool call." in rejected.inner_text()
    assert rejected.query_selector(".error") is None, "a decision, not an error"
    # The turn goes on: the sub-agent, the artifact, the end.
    page.wait_for_selector(".worker[data-status=completed]", timeout=30_000)
    page.wait_for_selector(".turn[data-state=ended] .state-end_turn", timeout=30_000)
    final = wait_converged(page, server, sid)
    assert page.locator(".turn-activity p").count() == 0
    # The approved command appends to checks.log: rejected, it never ran.
    assert not list(server.data.rglob("checks.log"))
    (turn,) = json.loads(final)["turns"]
    shell = next(c for c in turn["tool_calls"].values() if c["name"] == "shell")
    assert shell["status"] == "rejected" and turn["stop_reason"] == "end_turn"

    # From history: a reload draws the same rejected call from the snapshot.
    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    assert page.locator(".tool[data-status=rejected]").count() == 1
    assert ui_state_json(page) == final
    assert page.errors == []  # type: ignore[attr-defined]


def test_a_model_retry_counts_down_and_clears(ui: Callable[..., Page], server: Server) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    page.wait_for_selector(".request[data-status=open]", timeout=30_000)
    # The request opens a unit before the attempt parks the turn (`turn.state
    # requires_action`, after its workspace commit): read the seq once the page holds the
    # park, past which nothing is appended until the answer, or the actions injected below
    # race the server's own for the same seqs.
    page.wait_for_selector(".turn[data-state=requires_action]", timeout=30_000)
    parked = server_state(server, sid)
    seq = json.loads(ui_state_json(page))["seq"]
    assert seq == parked["seq"], (seq, parked["seq"])
    turn_id = parked["turns"][0]["turn_id"]
    at = page.evaluate("new Date(Date.now() + 5000).toISOString()")
    retry = {
        "attempt": 2,
        "retry_at": at,
        "error": {"code": "model_rate_limited", "message": "429"},
    }

    def state(n: int, data: dict[str, object]) -> dict[str, object]:
        return {
            "v": 1,
            "session_id": sid,
            "seq": n,
            "id": f"act_retry{n}",
            "type": "turn.state",
            "ts": at,
            "turn_id": turn_id,
            "data": data,
        }

    # Delivered as the server would send them (the scripted demo never has to retry).
    deliver(page, "action", state(seq + 1, {"state": "running", "model_retry": retry}))
    line = page.wait_for_selector(".turn-activity .model-retry")
    clock = page.evaluate("(at) => new Date(at).toLocaleTimeString('en-GB')", at)
    text = line.inner_text()
    assert text.startswith(f"Retrying the model (attempt 2) at {clock}, in ")
    assert text.endswith("— model_rate_limited: 429")
    first = int(text.split(", in ")[1].split(" s")[0])
    wait_for(lambda: f", in {first - 2} s" in line.inner_text(), timeout=5)
    assert page.locator(".waiting-model").count() == 0, "a retry says more than waiting"
    deliver(page, "action", state(seq + 2, {"state": "requires_action", "model_retry": None}))
    page.wait_for_selector(".turn-activity .model-retry", state="detached")
    # The retry never happened on the server: a reload shows its state, and it goes on.
    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    assert page.locator(".model-retry").count() == 0
    assert page.errors == []  # type: ignore[attr-defined]
