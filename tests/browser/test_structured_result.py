"""A structured result end to end (issue 34): a plugin declaring `output-schema` is
published and deployed through the CLI, a real `nua serve` runs it against a model server,
and the accepted JSON is the turn's `output` — in the HTTP state, in `nua show` (a result
block) and on the web page (also after a reload). An answer that never fits fails the turn
with `output_invalid`, shown as its error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser._ui import (
    canonical,
    nua,
    nua_show_json,
    open_session,
    open_ui,
    server_state,
    wait_converged,
)
from tests.e2e._proc import FakeProvider, Reply, Server, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

SCHEMA = {
    "type": "object",
    "required": ["category", "severity", "evidence", "reply_draft"],
    "properties": {
        "category": {"enum": ["bug", "question", "idea"]},
        "severity": {"type": "integer", "minimum": 1, "maximum": 4},
        "evidence": {"type": "array", "items": {"type": "string"}},
        "reply_draft": {"type": "string"},
    },
    "additionalProperties": False,
}
RESULT = {
    "category": "bug",
    "severity": 2,
    "evidence": ["ticket T-17: “crash on save”"],
    "reply_draft": "Thanks — we can reproduce it and are on it.",
}


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "triage", "version": "1.0.0", "description": "Triages feedback."})
    )
    (root / "AGENTS.md").write_text("You triage customer feedback.\n")
    (root / "schemas").mkdir()
    (root / "schemas" / "result.json").write_text(json.dumps(SCHEMA, indent=2))
    (root / "opennua.toml").write_text(
        'output-schema = "schemas/result.json"\noutput-retries = 1\n'
    )
    return root


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    provider = FakeProvider(
        {
            "Triage ticket 42": [Reply(text=f"```json\n{json.dumps(RESULT, indent=1)}\n```")],
            "Triage ticket 43": [Reply(text="It looks like a bug to me.")],
        }
    ).start()
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv", model="openai:fake", env=provider.env()).start()
    try:
        root = _plugin(tmp_path / "triage")
        for args in (
            ("plugin", "publish", str(root)),
            ("plugin", "release", "triage", "1.0.0"),
            ("deploy", "triage", "--plugin", "triage", "--model", "openai:fake"),
        ):
            done = nua(server, *args)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        yield server
    finally:
        server.stop()
        provider.stop()


def _run(server: Server, text: str) -> tuple[str, dict[str, Any]]:
    ran = nua(server, "run", "--deployment", "triage", "--detach", text)
    assert ran.returncode == 0, ran.stderr
    sid = next(word for word in ran.stdout.split() if word.startswith("ses_"))
    ended = wait_for(
        lambda: (
            (s := server_state(server, sid))["turns"] and s["turns"][-1]["state"] == "ended" and s
        ),
        timeout=60,
    )
    return sid, ended["turns"][-1]


def test_the_result_is_the_turns_output_in_the_api_the_cli_and_the_page(
    browser: Any, served: Server
) -> None:
    sid, turn = _run(served, "Triage ticket 42")
    assert (turn["stop_reason"], turn["output"]) == ("end_turn", RESULT)

    shown = nua(served, "show", sid)
    assert shown.returncode == 0, shown.stderr
    # Key order is not kept: the state is canonical JSON (sorted keys) wherever it is read.
    pretty = json.dumps(RESULT, indent=2, ensure_ascii=False, sort_keys=True)
    assert "  result\n" + "\n".join(f"    {line}" for line in pretty.splitlines()) in shown.stdout

    page = open_ui(browser, served)
    try:
        open_session(page, served, sid)
        block = page.wait_for_selector(".turn-result pre.result-json")
        assert block is not None and json.loads(block.text_content() or "") == RESULT
        assert page.locator(".turn-result h3").text_content() == "Result"
        assert page.locator(".turn-result pre.result-json").is_visible()
        mine = wait_converged(page, served, sid)
        assert mine == canonical(server_state(served, sid)) == nua_show_json(served, sid)
        page.reload()
        page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
        again = page.wait_for_selector(".turn-result pre.result-json")
        assert again is not None and json.loads(again.text_content() or "") == RESULT
        assert page.errors == []  # type: ignore[attr-defined]
    finally:
        page.context.close()


def test_an_answer_that_never_fits_fails_the_turn_visibly(browser: Any, served: Server) -> None:
    sid, turn = _run(served, "Triage ticket 43")
    assert turn["stop_reason"] == "failed" and turn["output"] is None
    assert turn["error"]["code"] == "output_invalid"
    assert "after 1 retry: the answer is not JSON" in turn["error"]["message"]
    shown = nua(served, "show", sid)
    assert "output_invalid" in shown.stdout and "  result\n" not in shown.stdout

    page = open_ui(browser, served)
    try:
        open_session(page, served, sid)
        error = page.wait_for_selector(".turn-error p.error")
        assert error is not None and (error.text_content() or "").startswith("output_invalid ")
        assert page.locator(".turn-result").inner_html() == ""
    finally:
        page.context.close()
