"""The CLI against a model that says hostile things (issue 12, bugs 4 and 5), with real
`nua` processes, a real `nua serve` and a scripted OpenAI-compatible provider: the approval
shows the whole command however it hides its tail, and no control sequence from the
model, a tool or another client reaches the terminal, piped or on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests._support.polling import wait_for
from tests.cli._hostile import HIDDEN_COMMAND, PAYLOAD, injected, plain, run_in_pty
from tests.e2e._proc import FakeProvider, Reply, Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

P = PAYLOAD
SCRIPTS = {
    "count the notes": [
        Reply(calls=[("write_file", {"path": "notes.md", "content": "a\nb\n"})]),
        Reply(calls=[("shell", {"command": HIDDEN_COMMAND})]),
        Reply(text="Counted."),
    ],
    "hostile": [
        Reply(
            reasoning=f"why {P}",
            text=f"text {P}",
            calls=[("plan", {"entries": [{"content": f"plan {P}", "status": "in_progress"}]})],
        ),
        Reply(calls=[("write_file", {"path": "evil.txt", "content": f"file {P}"})]),
        Reply(calls=[("read_file", {"path": "evil.txt"})]),
        Reply(calls=[("read_file", {"path": f"missing {P}"})]),
        Reply(calls=[("task", {"name": f"agent {P}", "task": f"task {P}"})]),
        Reply(calls=[("publish_artifact", {"name": f"report {P}.md", "content": f"art {P}"})]),
        Reply(calls=[("shell", {"command": f"echo {P}"})]),
        Reply(text=f"final {P}"),
    ],
    f"task {P}": [Reply(text=f"summary {P}")],
}
# The approval as the CLI must show it, all whitespace removed (wrapping moves it around).
WHOLE = "command:wc-lnotes.md" + "·" * 220 + ";cat../../token>stolen.txt"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    provider = FakeProvider(SCRIPTS).start()
    server = Server(
        tmp_path_factory.mktemp("hostile"), model="openai:fake", env=provider.env()
    ).start()
    try:
        yield server
    finally:
        server.stop()
        provider.stop()


def _env(server: Server, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUA_")}
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    return env | {"NUA_DATA": str(server.data), "COLUMNS": "100", "TERM": "xterm-256color"} | extra


def _nua(
    server: Server, *args: str, input: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opennua.cli", *args],
        env=_env(server, **env),
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _session_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.split("session ", 1)[1].split(" ", 1)[0]


def _state(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as http:
        state: dict[str, Any] = http.get(f"/v1/sessions/{sid}").json()["state"]
    return state


def _no_stolen_file(server: Server) -> None:
    assert not list(server.data.rglob("stolen.txt")), "the rejected command never ran"


def test_the_approval_prompt_shows_the_whole_command(served: Server) -> None:
    result = _nua(served, "run", "count the notes", "--prompt", input="2\n")
    assert result.returncode == 0, result.stderr
    asked, _, after = result.stdout.partition("answered: reject_once")
    question = asked[asked.index("? Allow Run command?") :]
    assert WHOLE in _squeezed(question), question
    # ... and what was decided stays in the scrollback, whole, marked rejected.
    assert "[rejected]" in after and WHOLE in _squeezed(after)
    assert "The user rejected this tool call." in after and "■ end_turn" in after
    _no_stolen_file(served)


def test_show_and_the_no_prompt_hint_show_the_whole_command(served: Server) -> None:
    args = ["run", "count the notes", "--no-prompt", "--title", "not prompted"]
    watcher = subprocess.Popen(
        [sys.executable, "-m", "opennua.cli", *args],
        env=_env(served),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sid = wait_for(lambda: _titled(served, "not prompted"), timeout=30)
        request = wait_for(lambda: _state(served, sid)["open_input_requests"], timeout=30)[0]
        shown = _nua(served, "show", sid)
        assert shown.returncode == 0 and WHOLE in _squeezed(shown.stdout), shown.stdout
        rejected = _nua(served, "answer", sid, request["request_id"], "--option", "reject_once")
        assert rejected.returncode == 0, rejected.stderr
        out, err = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()
    assert watcher.returncode == 0, err
    hint = err[err.index("waiting for input") : err.index("answer from anywhere")]
    assert WHOLE in _squeezed(hint), err
    assert "[rejected]" in out and "■ end_turn" in out
    _no_stolen_file(served)


def _titled(server: Server, title: str) -> str | None:
    with server.client() as http:
        items = http.get("/v1/sessions").json()["items"]
    return next((i["session_id"] for i in items if i["title"] == title), None)


def test_the_approval_on_a_terminal_shows_the_whole_command(served: Server) -> None:
    code, output = run_in_pty(
        [sys.executable, "-m", "opennua.cli", "run", "count the notes"],
        _env(served),
        answers={"answer (1-2 or an option id)": "2\r"},
    )
    assert code == 0, output
    text = plain(output)
    question = text[text.index("? Allow Run command?") : text.index("answer (1-2")]
    assert WHOLE in _squeezed(question), question
    assert "[rejected]" in text and "■ end_turn" in text
    assert injected(output, terminal=True) == []
    _no_stolen_file(served)


@pytest.fixture(scope="module")
def hostile_run(served: Server) -> subprocess.CompletedProcess[str]:
    """`nua run` of a task whose every remote string carries the payload: its title (set
    by the run), the model's reasoning, text, plan and tool inputs, a tool's output and
    error, a sub-agent's name, task and summary, an artifact's name; the command rejected."""
    result = _nua(served, "run", "hostile", "--prompt", "--title", f"title {P}", input="2\n")
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def hostile(hostile_run: subprocess.CompletedProcess[str]) -> str:
    return _session_of(hostile_run)


def test_a_live_run_through_a_pipe(hostile_run: subprocess.CompletedProcess[str]) -> None:
    assert injected(hostile_run.stdout) == [] and injected(hostile_run.stderr) == []
    assert "␛[8mhidden" in hostile_run.stdout, "shown, made visible, not dropped"
    assert "[rejected]" in hostile_run.stdout


READ_COMMANDS = [
    ("show",),
    ("show", "--reasoning"),
    ("sessions",),
    ("history",),
    ("usage",),
    ("trace",),
    ("artifacts",),
    ("attach",),
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_remote_strings_never_reach_a_pipe_raw(
    served: Server, hostile: str, command: tuple[str, ...]
) -> None:
    args = [command[0], *(() if command[0] == "sessions" else (hostile,)), *command[1:]]
    result = _nua(served, *args)
    assert result.returncode == 0, result.stderr
    assert injected(result.stdout) == [] and injected(result.stderr) == []
    # history and usage show JSON data and numbers: nothing there to make visible. The
    # runtime refuses an artifact whose name carries control characters, so the hostile
    # artifact is never published and `artifacts` has nothing to make visible either.
    quiet = ("usage", "trace", "history", "artifacts")
    assert "␛[8m" in result.stdout or command[0] in quiet, result.stdout


def test_problem_details_and_echoed_ids_are_cleaned(served: Server, hostile: str) -> None:
    # The server names the turn it could not find: the detail echoes what was typed.
    echoed = _nua(served, "cancel", hostile, "--turn", f"trn_{P}")
    assert echoed.returncode == 3 and "␛[8m" in echoed.stderr, echoed.stderr
    for args in (
        ("cancel", hostile, "--turn", f"trn_{P}"),
        ("show", f"ses_{P}"),
        ("answer", hostile, f"req_{P}", "--option", f"x{P}"),
        ("artifact", "get", f"art_{P}", "-o", "-"),
        ("retry", hostile, f"trn_{P}"),
    ):
        result = _nua(served, *args)
        assert result.returncode == 3, result.stderr  # not found, not a traceback
        assert injected(result.stdout) == [] and injected(result.stderr) == [], result.stderr


def test_json_output_stays_exact_json(served: Server, hostile: str) -> None:
    logged = _nua(served, "history", hostile, "--json")
    with served.client() as http:
        page = http.get(f"/v1/sessions/{hostile}/actions", params={"limit": 500}).json()
    assert [json.loads(line) for line in logged.stdout.splitlines()] == page["actions"]
    shown = json.loads(_nua(served, "show", hostile, "--json").stdout)
    assert shown == _state(served, hostile) and shown["title"] == f"title {P}"
    assert "\x1b" not in logged.stdout, "JSON escapes control characters itself"


@pytest.mark.parametrize("command", [("show",), ("sessions",), ("attach",), ("history",)])
def test_remote_strings_never_reach_a_terminal_raw(
    served: Server, hostile: str, command: tuple[str, ...]
) -> None:
    args = [command[0], *(() if command[0] == "sessions" else (hostile,))]
    code, output = run_in_pty([sys.executable, "-m", "opennua.cli", *args], _env(served))
    assert code == 0, output
    assert injected(output, terminal=True) == [], output
    assert "\x1b[" in output, "a terminal gets Rich's styles (the check above has work to do)"


def test_a_live_run_on_a_terminal(served: Server) -> None:
    code, output = run_in_pty(
        [sys.executable, "-m", "opennua.cli", "run", "hostile", "--title", f"t {P}"],
        _env(served),
        answers={"answer (1-2 or an option id)": "2\r"},
    )
    assert code == 0, output
    assert injected(output, terminal=True) == [], output
    assert "␛]52;" in plain(output)
