"""A plugin's `hooks/hooks.json` runs under the real sandbox (bubblewrap) with Claude
Code's contract: JSON on stdin; exit 2 blocks with stderr as the reason; stdout JSON
denies, asks or adds context; plain stdout adds context to a prompt; Stop exit 2 makes the
agent go on. Hook scripts log each run to the workspace, so a test sees how often they ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolReturnPart,
    UserPromptPart,
)

from opennua.plugins import PluginError, read_plugin
from opennua.runtime import Completed, Stopped, agent_from_plugin
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop

# Each hook logs "<event> <tool_name>" to /workspace/hooks.log, then decides.
GUARD = r"""#!/bin/sh
input=$(cat)
event=$(printf '%s' "$input" | jq -r .hook_event_name)
tool=$(printf '%s' "$input" | jq -r '.tool_name // ""')
echo "$event $tool" >> "$CLAUDE_PROJECT_DIR/hooks.log"
case "$event" in
PreToolUse)
  path=$(printf '%s' "$input" | jq -r '.tool_input.file_path // ""')
  case "$path" in
    secret*) echo "secrets stay out of the workspace" >&2; exit 2 ;;
    private*) echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse",
      "permissionDecision": "deny", "permissionDecisionReason": "private files are off limits"}}'
      exit 0 ;;
    ask*) echo '{"hookSpecificOutput": {"permissionDecision": "ask"}}'; exit 0 ;;
  esac ;;
PostToolUse)
  echo '{"decision": "block", "reason": "remember to update the changelog"}' ;;
UserPromptSubmit)
  prompt=$(printf '%s' "$input" | jq -r .prompt)
  case "$prompt" in
    *forbidden*) echo "this prompt is not allowed here" >&2; exit 2 ;;
  esac
  echo '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
    "additionalContext": "The release is 2.0."}}' ;;
SessionStart) echo "The team is called Falcon." ;;
Stop)
  if [ "$(printf '%s' "$input" | jq -r .stop_hook_active)" = "false" ]; then
    echo "run the tests before you stop" >&2; exit 2
  fi ;;
esac
exit 0
"""

HOOKS = {
    "description": "guards",
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Write|Read|LS",
                "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/guard.sh"}],
            }
        ],
        "PostToolUse": [
            {
                "matcher": "Write",
                "hooks": [
                    {"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/guard.sh"}
                ],
            }
        ],
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "$CLAUDE_PLUGIN_ROOT/hooks/guard.sh"}]}
        ],
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [{"type": "command", "command": "$CLAUDE_PLUGIN_ROOT/hooks/guard.sh"}],
            }
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
    },
}


def _plugin(tmp_path: Path, hooks: dict[str, Any] = HOOKS) -> Path:
    root = tmp_path / "guarded"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin/plugin.json").write_text(
        json.dumps({"name": "guarded", "version": "1.0.0", "description": "Guards."})
    )
    (root / "hooks").mkdir()
    (root / "hooks/hooks.json").write_text(json.dumps(hooks))
    guard = root / "hooks/guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    return root


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def _log(workdir: Path) -> list[str]:
    path = workdir / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


def _results(journal: InMemoryJournal) -> list[tuple[str, str | None]]:
    out = []
    for e in journal.log:
        data: Any = e.data
        if e.type == "tool_call.updated" and data.status in ("completed", "failed", "rejected"):
            out.append((data.status, data.output if data.error is None else data.error.message))
    return out


class Seen:
    """A scripted model that keeps every request's messages."""

    def __init__(self, steps: list[ScriptStep]) -> None:
        self.requests: list[list[ModelMessage]] = []
        self._steps = steps

    def __call__(self, messages: list[ModelMessage]) -> ScriptStep:
        # The step is the number of responses so far (the script may be asked twice).
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step == len(self.requests):
            self.requests.append(list(messages))
        return self._steps[step]

    def prompts(self, n: int) -> list[str]:
        return [
            str(p.content)
            for m in self.requests[n]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ]

    def returns(self, n: int) -> list[str]:
        return [
            str(p.content)
            for m in self.requests[n]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]


def test_hooks_are_read_and_other_events_and_types_reported_as_ignored(tmp_path: Path) -> None:
    hooks = json.loads(json.dumps(HOOKS))
    hooks["hooks"]["PreToolUse"][0]["hooks"].append({"type": "prompt", "prompt": "Is it ok?"})
    plugin = read_plugin(_plugin(tmp_path, hooks))
    assert [(h.event, h.matcher) for h in plugin.hooks] == [
        ("PreToolUse", "Write|Read|LS"),
        ("PostToolUse", "Write"),
        ("UserPromptSubmit", None),
        ("SessionStart", "startup"),
    ]
    ignored = [(p.severity, p.file, p.message) for p in plugin.problems]
    assert ignored == [
        (
            "ignored",
            "hooks/hooks.json",
            "PreToolUse: a hook of type 'prompt' is not run by opennua",
        ),
        ("ignored", "hooks/hooks.json", "hook event 'Notification' is not run by opennua"),
    ]


def test_a_malformed_hooks_file_is_an_error_with_its_line(tmp_path: Path) -> None:
    root = _plugin(tmp_path)
    (root / "hooks/hooks.json").write_text('{"hooks": {\n  "Stop": [}\n}')
    with pytest.raises(PluginError) as caught:
        read_plugin(root)
    assert (caught.value.file, caught.value.line) == ("hooks/hooks.json", 2)


async def test_pre_tool_use_blocks_denies_and_allows_and_post_tool_use_adds_feedback(
    tmp_path: Path, workdir: Path
) -> None:
    seen = Seen(
        [
            ScriptStep(calls=(call("write_file", path="secret.txt", content="k"),)),
            ScriptStep(calls=(call("read_file", path="private.txt"),)),
            ScriptStep(calls=(call("write_file", path="notes.txt", content="hi"),)),
            say("done"),
        ]
    )
    root = _plugin(tmp_path)
    agent = agent_from_plugin(root, read_plugin(root), model="scripted:test")
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, ScriptedModel(seen)),
        InMemoryJournal(),
        "Write the notes.",
    )
    assert isinstance(outcome, Completed), outcome
    secret, private, notes = _results(journal)
    # Exit 2: blocked, stderr the reason, the tool never ran.
    assert secret == (
        "failed",
        "A PreToolUse hook blocked this call: secrets stay out of the workspace",
    )
    assert not (workdir / "secret.txt").exists()
    # JSON deny: its reason.
    assert private == (
        "failed",
        "A PreToolUse hook blocked this call: private files are off limits",
    )
    # Allowed: it ran, and PostToolUse's block reason follows its result.
    assert (workdir / "notes.txt").read_text() == "hi"
    assert notes == (
        "completed",
        "Wrote 2 bytes to notes.txt.\n\n[PostToolUse hook] remember to update the changelog",
    )
    # The model saw each reason as the call's result.
    assert seen.returns(1) == [secret[1]]
    assert seen.returns(3)[-1] == notes[1]
    blocked = [
        e.data
        for e in journal.log
        if e.type == "tool_call.updated" and e.data.error is not None  # type: ignore[attr-defined]
    ]
    assert [b.error.code for b in blocked] == ["blocked_by_hook", "blocked_by_hook"]  # type: ignore[attr-defined]
    assert _log(workdir) == [
        "SessionStart ",
        "UserPromptSubmit ",
        "PreToolUse Write",
        "PreToolUse Read",
        "PreToolUse Write",
        "PostToolUse Write",
    ]


async def test_pre_tool_use_ask_needs_a_person_and_does_not_run_again_on_resume(
    tmp_path: Path, workdir: Path
) -> None:
    seen = Seen([ScriptStep(calls=(call("list_files", path="ask-me"),)), say("listed")])
    (workdir / "ask-me").mkdir()
    root = _plugin(tmp_path)
    agent = agent_from_plugin(root, read_plugin(root), model="scripted:test")
    outcome, journal, history = await drive(
        lambda j: make_loop(agent, j, workdir, ScriptedModel(seen)), InMemoryJournal(), "List."
    )
    assert isinstance(outcome, Completed), outcome
    assert [type(h).__name__ for h in history] == ["Suspended", "Completed"]
    (opened,) = [e.data for e in journal.log if e.type == "input_request.opened"]
    assert opened.reason == "tool_call"  # type: ignore[attr-defined]
    assert _log(workdir).count("PreToolUse LS") == 1  # not again after the answer
    assert _results(journal) == [("completed", "(empty)")]


async def test_user_prompt_submit_blocks_the_prompt(tmp_path: Path, workdir: Path) -> None:
    seen = Seen([say("never")])
    root = _plugin(tmp_path)
    agent = agent_from_plugin(root, read_plugin(root), model="scripted:test")
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, workdir, ScriptedModel(seen)),
        InMemoryJournal(),
        "do the forbidden thing",
    )
    assert isinstance(outcome, Stopped) and outcome.error is not None
    assert (outcome.error.code, outcome.error.message) == (
        "blocked_by_hook",
        "a hook blocked the prompt: this prompt is not allowed here",
    )
    assert seen.requests == []  # the model was never called


async def test_prompt_hooks_add_context_and_stop_makes_the_agent_go_on(
    tmp_path: Path, workdir: Path
) -> None:
    hooks = json.loads(json.dumps(HOOKS))
    hooks["hooks"]["Stop"] = [
        {"hooks": [{"type": "command", "command": "$CLAUDE_PLUGIN_ROOT/hooks/guard.sh"}]}
    ]
    # SessionStart's matcher is its source: a turn starts, it does not resume a transcript.
    hooks["hooks"]["SessionStart"].append(
        {"matcher": "resume|compact", "hooks": [{"type": "command", "command": "echo resumed"}]}
    )
    seen = Seen([say("finished"), say("tests pass; finished")])
    root = _plugin(tmp_path, hooks)
    agent = agent_from_plugin(root, read_plugin(root), model="scripted:test")
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, workdir, ScriptedModel(seen)),
        InMemoryJournal(),
        "Ship it.",
    )
    assert isinstance(outcome, Completed), outcome
    assert outcome.output == "tests pass; finished"
    (first,) = seen.prompts(0)
    assert first == "Ship it.\n\nThe team is called Falcon.\n\nThe release is 2.0."
    # Stop exit 2: its stderr is the next prompt; the second time the hook sees
    # stop_hook_active and lets the agent stop.
    assert seen.prompts(1)[-1] == "run the tests before you stop"
    assert _log(workdir).count("Stop ") == 2
