"""Every `nua` command against a real server: output, `--json` shapes and exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from opennua.protocol import action_from_json, replay, state_to_json
from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import Server, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def _detach(nua: Nua, text: str = "write the report", *extra: str) -> dict[str, str]:
    result = nua("run", text, "--detach", "--json", *extra)
    assert result.exit_code == 0, result.output
    ids: dict[str, str] = json.loads(result.stdout)
    return ids


def _ended(nua: Nua, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = wait_for(
        lambda: (s := nua.state(sid))["turns"][-1]["state"] == "ended" and s, timeout=30
    )
    return state


def _lines_in_order(text: str, *needles: str) -> list[int]:
    positions = []
    start = 0
    for needle in needles:
        found = text.find(needle, start)
        assert found >= 0, f"{needle!r} missing (or out of order) in:\n{text}"
        positions.append(found)
        start = found + len(needle)
    return positions


def test_run_streams_the_task_and_answers_the_approval_prompt(nua: Nua) -> None:
    result = nua("run", "write the report", "--prompt", input="1\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    _lines_in_order(
        out,
        "› write the report",
        "✓ Update plan",
        "◐ Write working notes",
        "✓ Write file notes.md",
        "✎ notes.md created",
        "? Allow Run command?",
        "1) Allow [allow_once]",
        "answered: allow_once",
        "✓ Run command",
        "✓ Allow Run command? → allow_once",
        "✓ Run sub-agent researcher",
        "↳ sub-agent researcher [completed]",
        "✓ Read file notes.md",
        "☑ Publish report.md",
        "▣ artifact report.md",
        "Done. I wrote notes.md",
        "■ end_turn",
        "usage · in ",
    )
    # The sub-agent's items are drawn nested under its tool call.
    agent_line = next(line for line in out.splitlines() if "↳ sub-agent researcher" in line)
    read_line = next(line for line in out.splitlines() if "Read file notes.md" in line)
    assert (
        _indent(read_line)
        > _indent(agent_line)
        > _indent(next(line for line in out.splitlines() if "Run sub-agent" in line))
    )
    assert "reasoning 0)" not in out.splitlines()[-1], "usage shows all five fields"
    assert "cache write" in out and "cache read" in out
    assert "[pending]" not in out and "[in_progress]" not in out


def test_a_rejected_approval_ends_the_call_rejected_and_the_turn_goes_on(tmp_path: Path) -> None:
    server = Server(tmp_path, step_delay="0.02").start()
    nua = Nua(server)
    try:
        result = nua("run", "write the report", "--prompt", input="2\n")
        assert result.exit_code == 0, result.output
        out = result.stdout
        _lines_in_order(
            out,
            "? Allow Run command?",
            "2) Reject [reject_once]",
            "answered: reject_once",
            "⊗ Run command",
            "[rejected]",
            "⎿ The user rejected this tool call.",
            "✓ Allow Run command? → reject_once",
            "✓ Run sub-agent researcher",
            "■ end_turn",
        )
        # The approved command appends to checks.log: rejected, it never ran.
        assert not list(tmp_path.rglob("checks.log"))
        sid = result.stderr.split("session ", 1)[1].split(" ", 1)[0]
        (turn,) = nua.state(sid)["turns"]
        shell = next(c for c in turn["tool_calls"].values() if c["name"] == "shell")
        assert shell["status"] == "rejected" and turn["stop_reason"] == "end_turn"
        # Reattached, and after a server restart, the call still reads rejected.
        again = nua("attach", sid)
        assert again.exit_code == 0 and "⊗ Run command" in again.stdout, again.output
        server.stop()
        server.start()
        shown = nua("show", sid)
        assert shown.exit_code == 0 and "[rejected]" in shown.stdout, shown.output
        assert "[failed]" not in shown.stdout
    finally:
        server.stop()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def test_run_detach_returns_after_acceptance_with_the_ids(nua: Nua) -> None:
    ids = _detach(nua)
    assert set(ids) == {"session_id", "turn_id", "execution_id"}
    assert ids["session_id"].startswith("ses_") and ids["turn_id"].startswith("trn_")
    text = nua("run", "again", "--detach", "--session", ids["session_id"])
    assert text.exit_code == 0, text.output
    assert f"nua attach {ids['session_id']}" in text.stdout
    # The task continues without any client: it reaches the approval on its own.
    nua.open_request(ids["session_id"])
    assert nua("cancel", ids["session_id"]).exit_code == 0


def test_answer_first_writer_wins_and_the_loser_learns_who_answered(nua: Nua) -> None:
    sid = _detach(nua)["session_id"]
    rid = nua.open_request(sid)
    usage = nua("answer", sid, rid, "--option", "allow_once", "--text", "yes")
    assert usage.exit_code == 2
    invalid = nua("answer", sid, rid, "--option", "maybe")
    assert invalid.exit_code == 7, invalid.output
    missing = nua("answer", sid, "req_01NOSUCHREQUEST000000000", "--option", "allow_once")
    assert missing.exit_code == 3, missing.output
    won = nua("answer", sid, rid, "--option", "allow_once", "--json", NUA_CLIENT_ID="cli_alice")
    assert won.exit_code == 0, won.output
    resolution = json.loads(won.stdout)
    assert resolution["answered_by"]["client_id"] == "cli_alice"
    lost = nua("answer", sid, rid, "--option", "reject_once", NUA_CLIENT_ID="cli_bob")
    assert lost.exit_code == 4, lost.output
    assert "already answered by cli_alice" in lost.stderr
    assert "allow_once" in lost.stderr
    _ended(nua, sid)


def test_cancel_retry_and_gone(nua: Nua) -> None:
    ids = _detach(nua)
    sid = ids["session_id"]
    rid = nua.open_request(sid)
    busy_retry = nua("retry", sid, ids["turn_id"])
    assert busy_retry.exit_code == 4, busy_retry.output
    cancelled = nua("cancel", sid)
    assert cancelled.exit_code == 0, cancelled.output
    assert ids["turn_id"] in cancelled.stdout
    gone = nua("answer", sid, rid, "--option", "allow_once")
    assert gone.exit_code == 6, gone.output
    state = _ended(nua, sid)
    assert state["turns"][-1]["stop_reason"] == "cancelled"
    assert nua("cancel", sid).exit_code == 4
    watched = nua("attach", sid, "--no-prompt")
    assert watched.exit_code == 1, watched.output  # the watched turn did not succeed
    assert "■ cancelled" in watched.stdout
    retried = nua("retry", sid, ids["turn_id"], "--json")
    assert retried.exit_code == 0, retried.output
    new = json.loads(retried.stdout)
    assert new["turn_id"] != ids["turn_id"]
    turns = nua.state(sid)["turns"]
    assert turns[-1]["turn_id"] == new["turn_id"] and turns[-1]["retry_of"] == ids["turn_id"]
    nua.open_request(sid)
    assert nua("cancel", sid, "--turn", new["turn_id"]).exit_code == 0


def test_attach_json_replays_every_action_after_n(nua: Nua) -> None:
    sid = _detach(nua)["session_id"]
    nua.answer_when_open(sid)
    live = nua("attach", sid, "--after", "0", "--json", "--no-prompt")
    assert live.exit_code == 0, live.output
    streamed = [json.loads(line) for line in live.stdout.splitlines()]
    history = nua("history", sid, "--json")
    assert history.exit_code == 0
    logged = [json.loads(line) for line in history.stdout.splitlines()]
    assert streamed == logged
    assert [a["seq"] for a in logged] == list(range(1, len(logged) + 1))
    tail = nua("attach", sid, "--after", "10", "--json")
    assert next(json.loads(line)["seq"] for line in tail.stdout.splitlines()) == 11
    human = nua("attach", sid)
    assert human.exit_code == 0 and "■ end_turn" in human.stdout


def test_run_json_emits_every_action_as_a_json_line(nua: Nua) -> None:
    # --json never prompts: the approval comes from another client meanwhile.
    title = f"json-{free_port()}"
    answering = nua.answer_when_open(title=title)
    result = nua("run", "write the report", "--json", "--title", title)
    answering.join(5)
    assert result.exit_code == 0, result.output
    actions = [action_from_json(line) for line in result.stdout.splitlines()]
    assert [a.seq for a in actions] == list(range(1, len(actions) + 1))
    assert actions[0].type == "session.created" and actions[-1].type == "turn.ended"
    sid = actions[0].session_id
    logged = nua("history", sid, "--json").stdout
    assert result.stdout == logged, "live JSON lines are the log, byte for byte"


def test_show_history_usage_trace_artifacts_and_download(nua: Nua, tmp_path: Path) -> None:
    sid = _detach(nua)["session_id"]
    nua.answer_when_open(sid)
    state = _ended(nua, sid)
    shown = nua("show", sid, "--json")
    assert shown.exit_code == 0
    history = nua("history", sid, "--json").stdout.splitlines()
    replayed = replay(action_from_json(line) for line in history)
    assert shown.stdout == state_to_json(replayed) + "\n"
    assert state_to_json(replayed) == state_to_json(state)  # type: ignore[arg-type]

    human = nua("show", sid).stdout
    _lines_in_order(human, sid, "Update plan", "↳ sub-agent researcher", "▣ artifact report.md")
    assert "plan" in human and "session usage" in human

    usage = json.loads(nua("usage", sid, "--json").stdout)
    recorded = [json.loads(line) for line in history if '"usage.recorded"' in line]
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "reasoning_output_tokens",
    )
    turn_usage = usage["turns"][0]["usage"]
    for field in fields:
        assert turn_usage[field] == sum(r["data"][field] for r in recorded), field
    (agent,) = usage["turns"][0]["sub_agents"]
    assert agent["name"] == "researcher" and agent["usage"]["input_tokens"] > 0
    table = nua("usage", sid).stdout
    assert "↳ researcher (sub-agent, included)" in table and "reasoning" in table

    trace = json.loads(nua("trace", sid, "--json").stdout)
    (turn,) = trace["turns"]
    assert len(turn["trace_id"]) == 32
    assert turn["execution"]["status"] == "completed"
    assert [a["attempt"] for a in turn["execution"]["attempts"]] == [1, 2]
    assert turn["execution"]["attempts"][1]["resumed_from_checkpoint"] is True
    root, worker = turn["runs"]
    assert root["parent_run_id"] is None and worker["parent_run_id"] == root["run_id"]
    assert worker["parent_tool_call_id"] in state["turns"][0]["tool_calls"]
    assert "attempt 2" in nua("trace", sid).stdout

    (artifact,) = [json.loads(line) for line in nua("artifacts", sid, "--json").stdout.splitlines()]
    assert artifact["name"] == "report.md"
    assert artifact["artifact_id"] in nua("artifacts", sid).stdout
    target = tmp_path / "report.md"
    got = nua("artifact", "get", artifact["artifact_id"], "-o", str(target))
    assert got.exit_code == 0, got.output
    assert hashlib.sha256(target.read_bytes()).hexdigest() == artifact["sha256"]
    assert "sha256" in got.stdout and "ok" in got.stdout
    missing = nua("artifact", "get", "art_01NOSUCHARTIFACT00000000", "-o", str(target))
    assert missing.exit_code == 3

    # A single-use link for a browser: opens once without a token, then 410.
    link = nua("artifact", "link", artifact["artifact_id"])
    assert link.exit_code == 0, link.output
    url = link.stdout.strip()
    assert "/v1/downloads/" in url and "opens once" in link.stderr
    first, second = httpx.get(url, timeout=10), httpx.get(url, timeout=10)
    assert hashlib.sha256(first.content).hexdigest() == artifact["sha256"]
    assert (second.status_code, second.json()["code"]) == (410, "link_used")
    # Retrying a published artifact changes nothing and says so.
    retried = nua("artifact", "retry", sid, artifact["artifact_id"])
    assert retried.exit_code == 0 and "published" in retried.stdout, retried.output


def test_file_changes_show_their_diff_live_and_in_history(nua: Nua) -> None:
    sid = _detach(nua)["session_id"]
    nua.answer_when_open(sid)
    state = _ended(nua, sid)
    (change,) = state["turns"][0]["file_changes"].values()
    assert change["path"] == "notes.md" and change["diff"].startswith("--- /dev/null\n")
    assert change["size"] > 0 and len(change["sha256"]) == 64 and not change["binary"]
    human = nua("show", sid).stdout
    first_line = change["diff"].splitlines()[3]  # the first added line
    _lines_in_order(human, "✎ notes.md created", "+++ b/notes.md", first_line)
    whole = nua("diff", sid, change["id"])
    assert whole.exit_code == 0 and whole.stdout == change["diff"]
    assert nua("diff", sid, "act_nosuchchange").exit_code == 3


def test_sessions_and_errors(nua: Nua) -> None:
    sid = _detach(nua)["session_id"]
    listed = [json.loads(line) for line in nua("sessions", "--json").stdout.splitlines()]
    assert sid in {item["session_id"] for item in listed}
    assert sid in nua("sessions").stdout
    assert nua("show", "ses_01NOSUCHSESSION000000000").exit_code == 3
    bad = nua("show", sid, NUA_TOKEN="not-the-token")
    assert bad.exit_code == 8, bad.output
    unreachable = nua("sessions", NUA_URL=f"http://127.0.0.1:{free_port()}")
    assert unreachable.exit_code == 5
    assert "nua serve" in unreachable.stderr
    nua.open_request(sid)
    assert nua("cancel", sid).exit_code == 0
