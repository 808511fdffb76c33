"""The runtime side of plugins: a Claude Code layout plugin runs a scripted turn (skills by
progressive disclosure, a resource, its stdio MCP tool, a named sub-agent), its access
policy governs every tool, and one budget per execution stops a sub-agent that spends it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from opennua.plugins import PluginError, builtin_plugin_root, read_plugin, scaffold_plugin
from opennua.runtime import (
    AgentDefinition,
    Completed,
    Limits,
    Sandbox,
    Stopped,
    ToolContext,
    agent_from_plugin,
    default_agent,
    model_priced,
    tool,
)
from opennua.runtime._scripted import first_prompt
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop

FIXTURE = Path(__file__).parent / "fixtures" / "claude_layout"
REVIEW = "Review the release notes."


@dataclass
class Request:
    prompt: str  # the run's first prompt: which run asked
    tools: list[str]
    descriptions: dict[str, str]
    instructions: str


class Recording(ScriptedModel):
    """A scripted model that records what each request offered the model."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[Request] = []

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        params = model_request_parameters
        self.requests.append(
            Request(
                prompt=first_prompt(messages),
                tools=sorted(t.name for t in params.function_tools),
                descriptions={t.name: t.description or "" for t in params.function_tools},
                instructions="".join(p.content for p in params.instruction_parts or []),
            )
        )
        async with super().request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            yield stream


@pytest.fixture
def plugin_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "plugin"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    # `.mcp.json` says `python3`, as a plugin author writes it: this interpreter's, with `mcp`.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return root


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def _agent(root: Path) -> AgentDefinition:
    return agent_from_plugin(root, read_plugin(root), model="scripted:test")


def _results(journal: InMemoryJournal) -> list[tuple[str, str | None]]:
    """(status, output or error message) of every tool call's result, in order."""
    out = []
    for e in journal.log:
        if e.type == "tool_call.updated" and e.data.status in ("completed", "failed", "rejected"):  # type: ignore[attr-defined]
            data: Any = e.data
            out.append((data.status, data.output if data.error is None else data.error.message))
    return out


def _of(journal: InMemoryJournal, kind: str) -> list[Any]:
    return [e.data for e in journal.log if e.type == kind]


async def test_a_claude_code_plugin_runs_a_scripted_turn(plugin_root: Path, workdir: Path) -> None:
    model = Recording(
        [
            ScriptStep(calls=(call("skill", name="release-notes"),)),
            ScriptStep(calls=(call("skill", name="release-notes", resource="template.md"),)),
            ScriptStep(calls=(call("notes__lookup", word="durable"),)),
            ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),)),
            say("Release notes written and reviewed."),
        ],
        workers={REVIEW: [say("Looks good.")]},
    )
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model), InMemoryJournal(), "Write notes."
    )
    assert isinstance(outcome, Completed), outcome
    assert outcome.output == "Release notes written and reviewed."
    body, resource, lookup, review = _results(journal)
    assert body[0] == "completed" and body[1] is not None
    assert body[1].startswith("# Release notes\n\nGroup changes under Added")
    assert body[1].endswith("Resources of this skill (load with `resource`):\n- template.md")
    assert resource == ("completed", (plugin_root / "skills/release-notes/template.md").read_text())
    # The stdio server ran from .mcp.json, confined: ${PLUGIN_ROOT} is where the sandbox
    # shows the plugin, its env was given.
    assert lookup == ("completed", "durable: defined (hello, root=/plugin)")
    assert review == ("completed", "Looks good.")
    (started,) = _of(journal, "worker.started")
    assert started.name == "reviewer" and started.task == REVIEW

    root_request = model.requests[0]
    assert root_request.instructions == (plugin_root / "AGENTS.md").read_text().strip()
    # Only the allow-list is offered: no shell, no write_file, no notes__secret.
    assert root_request.tools == [
        "notes__erase", "notes__lookup", "plan", "read_file", "skill", "task",
    ]  # fmt: skip
    # Progressive disclosure: names and descriptions in context, bodies on demand.
    skill_text = root_request.descriptions["skill"]
    assert "- release-notes: How to write release notes." in skill_text
    assert "- glossary: The project's terms." in skill_text
    assert "Group changes" not in skill_text and "Group changes" not in root_request.instructions
    assert "- reviewer: Reviews release notes" in root_request.descriptions["task"]

    (worker_request,) = [r for r in model.requests if r.prompt == REVIEW]
    assert worker_request.instructions == "You review release notes. Reply with remarks only."
    assert worker_request.tools == ["notes__lookup", "read_file"]  # its front matter `tools`


async def test_a_skill_resource_is_confined_to_its_skill(plugin_root: Path, workdir: Path) -> None:
    (plugin_root / "secret.txt").write_text("not a resource")
    attempts = ["../glossary/SKILL.md", "../../secret.txt", "/etc/passwd", "terms/list.md"]
    model = ScriptedModel(
        [
            *(
                ScriptStep(calls=(call("skill", name="release-notes", resource=r),))
                for r in attempts
            ),
            ScriptStep(calls=(call("skill", name="glossary", resource="terms/../terms/list.md"),)),
            ScriptStep(calls=(call("skill", name="nope"),)),
            say("done"),
        ]
    )
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    results = _results(journal)
    for (status, message), attempt in zip(results[:4], attempts, strict=True):
        assert status == "failed"
        assert message == (
            f"{attempt!r} is not a resource of skill 'release-notes'; "
            "its resources are: template.md"
        )
    assert results[4] == ("completed", "- durable: survives a crash of any process\n")
    assert results[5][0] == "failed" and "no skill 'nope'" in (results[5][1] or "")


async def test_a_tool_outside_the_allow_list_is_never_offered_nor_run(
    plugin_root: Path, workdir: Path
) -> None:
    model = Recording(
        [
            ScriptStep(calls=(call("notes__secret"),)),
            ScriptStep(calls=(call("shell", command="touch ran"),)),
            say("done"),
        ]
    )
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model, env={"sandbox": Sandbox("none")}),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Completed)
    assert all("notes__secret" not in r.tools and "shell" not in r.tools for r in model.requests)
    assert _results(journal) == [
        ("failed", "Invalid arguments: unknown tool 'notes__secret'"),
        ("failed", "Invalid arguments: unknown tool 'shell'"),
    ]
    assert not (workdir / "ran").exists()
    assert _of(journal, "input_request.opened") == []


@pytest.mark.slow  # starts the stdio MCP server once per resumed attempt
async def test_an_approval_required_tool_asks_even_when_its_hints_say_read_only(
    plugin_root: Path, workdir: Path
) -> None:
    model = ScriptedModel(
        [
            ScriptStep(calls=(call("notes__lookup", word="a"), call("notes__erase", word="b"))),
            say("done"),
        ]
    )
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model),
        InMemoryJournal(),
        "x",
        choices={"tool_call": "reject_once"},
    )
    assert isinstance(outcome, Completed)
    kinds = {d.name: d.kind for d in _of(journal, "tool_call.started")}
    assert kinds == {"notes__lookup": "read", "notes__erase": "read"}  # both hint read-only
    (opened,) = _of(journal, "input_request.opened")
    assert opened.reason == "tool_call"
    erase_id = next(
        d.tool_call_id for d in _of(journal, "tool_call.started") if d.name == "notes__erase"
    )
    assert opened.tool_call_id == erase_id
    assert _results(journal)[1] == ("rejected", "The user rejected this tool call.")


async def test_a_sub_agent_runs_on_its_own_model_with_claude_code_tool_names(
    plugin_root: Path, workdir: Path
) -> None:
    reviewer = plugin_root / "agents" / "reviewer.md"
    reviewer.write_text(
        reviewer.read_text()
        .replace("tools: read_file, notes__lookup", "tools: Read, mcp__notes__lookup")
        .replace("model: inherit", "model: scripted:reviewer")
    )
    parent = Recording([ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),)), say("ok")])
    own = Recording([say("From the reviewer's own model.")], model_name="reviewer-model")
    resolved: list[str] = []

    def resolve(spec: str) -> Model:
        resolved.append(spec)
        return own

    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, parent, resolve=resolve), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    assert resolved == ["scripted:reviewer"]
    assert [r.prompt for r in own.requests] == [REVIEW]
    assert own.requests[0].tools == ["notes__lookup", "read_file"]
    assert all(r.prompt != REVIEW for r in parent.requests)
    models = [u.model for u in _of(journal, "usage.recorded")]
    assert models == ["scripted", "reviewer-model", "scripted"]
    assert _results(journal) == [("completed", "From the reviewer's own model.")]


async def test_any_other_task_name_starts_the_general_worker(
    plugin_root: Path, workdir: Path
) -> None:
    model = Recording(
        [ScriptStep(calls=(call("task", name="helper", task="Help."),)), say("ok")],
        workers={"Help.": [say("helped")]},
    )
    outcome, _, _ = await drive(
        lambda j: make_loop(_agent(plugin_root), j, workdir, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    (worker,) = [r for r in model.requests if r.prompt == "Help."]
    assert worker.instructions.startswith("You are a sub-agent working on one task")
    assert "task" not in worker.tools and "skill" in worker.tools  # the parent's, minus task


async def test_each_run_is_offered_its_own_tools_at_every_request(
    plugin_root: Path, workdir: Path
) -> None:
    """What a run is offered is built once per sub-agent and depth in an attempt: a named
    sub-agent and the general worker at the same depth still see their own lists, and the
    root sees its own again after both."""
    model = Recording(
        [
            ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),)),
            ScriptStep(calls=(call("task", name="helper", task="Help."),)),
            say("ok"),
        ],
        workers={REVIEW: [say("Looks good.")], "Help.": [say("helped")]},
    )
    outcome, _, _ = await drive(
        lambda j: make_loop(_agent(plugin_root), j, workdir, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed), outcome
    offered = {r.prompt: r.tools for r in model.requests}
    assert len(offered) == 3
    assert offered[REVIEW] == ["notes__lookup", "read_file"]
    assert "task" not in offered["Help."] and "skill" in offered["Help."]
    roots = [r.tools for r in model.requests if r.prompt not in (REVIEW, "Help.")]
    assert len(roots) == 3 and all(tools == roots[0] for tools in roots)
    assert "task" in roots[0]


# -- one budget per execution ----------------------------------------------------------------

STEP_USAGE = RequestUsage(input_tokens=1000, output_tokens=1000)


def _spender(**model: Any) -> ScriptedModel:
    """The root starts a sub-agent that never stops calling tools, 2,000 tokens a step."""
    return ScriptedModel(
        [ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),), usage=STEP_USAGE)],
        workers={
            REVIEW: lambda m: ScriptStep(calls=(call("read_file", path="x"),), usage=STEP_USAGE)
        },
        **model,
    )


async def _spend(
    plugin_root: Path, workdir: Path, limits: Limits, *, in_worker: bool = True, **model: Any
) -> Any:
    (plugin_root / ".mcp.json").unlink()  # no MCP server to start: the budget is the subject
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, _spender(**model), limits=limits),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Stopped), outcome
    recorded = _of(journal, "usage.recorded")
    # The usage the outcome reports is what was recorded, sub-agent included.
    for field in ("input_tokens", "output_tokens"):
        assert outcome.usage[field] == sum(getattr(u, field) for u in recorded)
    if in_worker:
        (ended,) = _of(journal, "worker.ended")
        assert ended.status == "failed"  # the sub-agent is where the budget ran out
    return outcome, recorded


async def test_the_step_limit_stops_a_sub_agent_that_spends_it(
    plugin_root: Path, workdir: Path
) -> None:
    outcome, recorded = await _spend(plugin_root, workdir, Limits(max_steps=4))
    assert outcome.stop_reason == "max_steps" and outcome.error.code == "max_steps"
    assert len(recorded) == 4  # the root's one step and three of the sub-agent's
    assert "reached max_steps (4 model steps); used 4 steps, 8000 tokens" in outcome.error.message


async def test_the_token_limit_stops_a_sub_agent_that_spends_it(
    plugin_root: Path, workdir: Path
) -> None:
    outcome, recorded = await _spend(plugin_root, workdir, Limits(max_tokens=5000))
    assert outcome.stop_reason == "failed" and outcome.error.code == "max_tokens"
    assert len(recorded) == 3  # 6,000 tokens after three steps: no fourth call
    assert "reached max_tokens (5000); used 3 steps, 6000 tokens" in outcome.error.message


async def test_the_cost_limit_stops_a_sub_agent_that_spends_it(
    plugin_root: Path, workdir: Path
) -> None:
    # gpt-4o at $2.50 / $10 per million tokens: $0.0125 a step in genai-prices' table.
    outcome, recorded = await _spend(
        plugin_root,
        workdir,
        Limits(max_cost_usd=0.03),
        provider="openai",
        model_name="gpt-4o",
    )
    assert outcome.stop_reason == "failed" and outcome.error.code == "max_cost_usd"
    assert len(recorded) == 3 and {(u.provider, u.model) for u in recorded} == {
        ("openai", "gpt-4o")
    }
    assert "reached max_cost_usd ($0.03); used 3 steps, 6000 tokens, $0.037500" in (
        outcome.error.message
    )


async def test_a_cost_limit_is_not_silently_unenforced_for_an_unpriced_model(
    plugin_root: Path, workdir: Path
) -> None:
    outcome, recorded = await _spend(
        plugin_root,
        workdir,
        Limits(max_cost_usd=100.0),
        in_worker=False,  # the root's first response already cannot be priced
        provider="openai",
        model_name="no-such-model",
    )
    assert outcome.error.code == "max_cost_usd" and len(recorded) == 1
    assert "no price is known for openai:no-such-model" in outcome.error.message


async def test_the_deadline_is_checked_before_every_tool_call(workdir: Path) -> None:
    now = [100.0]
    ran: list[str] = []

    @tool("tick", idempotent=True)
    def tick(ctx: ToolContext, label: str) -> str:
        ran.append(label)
        now[0] += 10  # the tool takes the execution past its deadline
        return "ok"

    model = ScriptedModel(
        [ScriptStep(calls=(call("tick", label="first"), call("tick", label="second"))), say("x")]
    )
    outcome, journal, _ = await drive(
        lambda j: make_loop(
            default_agent("scripted:test"),
            j,
            workdir,
            model,
            limits=Limits(deadline=105.0),
            env={"wall_clock": lambda: now[0]},
            tools=[tick],
        ),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "deadline_exceeded"
    assert outcome.error is not None and outcome.error.code == "deadline"
    assert ran == ["first"]
    assert [d.status for d in _of(journal, "tool_call.updated")][-1] == "failed"
    assert journal.ledger.get(_of(journal, "tool_call.started")[1].tool_call_id) is None


# -- the built-in plugin, the scaffold, egress -------------------------------------------------


async def test_a_deployments_tool_override_replaces_how_its_server_is_reached(
    plugin_root: Path, workdir: Path
) -> None:
    # Another script in the plugin stands for "the same server, run differently".
    notes = (plugin_root / "servers/notes.py").read_text()
    (plugin_root / "servers/other.py").write_text(notes.replace("defined", "overridden"))
    plugin = read_plugin(plugin_root)
    args = ["${PLUGIN_ROOT}/servers/other.py", "${PLUGIN_ROOT}"]
    agent = agent_from_plugin(
        plugin_root, plugin, model="scripted:test", tool_overrides={"notes": {"args": args}}
    )
    (server,) = agent.mcp_servers
    assert (server.command, list(server.args)) == ("python3", args)
    assert agent.digest != _agent(plugin_root).digest  # a different agent, a different digest
    model = Recording([ScriptStep(calls=(call("notes__lookup", word="durable"),)), say("ok")])
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed), outcome
    assert _results(journal) == [("completed", "durable: overridden (hello, root=/plugin)")]

    # A url makes it remote, and the plugin's egress list still decides.
    settings = plugin_root / "opennua.toml"
    settings.write_text(settings.read_text() + 'egress = ["api.example.com"]\n')
    remote = {"notes": {"url": "https://elsewhere.example.org/mcp"}}
    with pytest.raises(PluginError, match=r"elsewhere\.example\.org is not in the egress list"):
        agent_from_plugin(
            plugin_root, read_plugin(plugin_root), model="scripted:test", tool_overrides=remote
        )


def test_the_builtin_agent_is_the_builtin_plugin() -> None:
    builtin = read_plugin(builtin_plugin_root())
    agent = default_agent("scripted:test")
    assert agent.name == builtin.name == "default"
    assert agent.plugin == {"name": "default", "version": builtin.version, "digest": builtin.digest}
    assert agent.instructions == builtin.settings.instructions.strip()
    assert (
        agent.digest
        == agent_from_plugin(builtin_plugin_root(), builtin, model="scripted:test").digest
    )


def test_a_remote_server_outside_the_egress_list_is_refused(plugin_root: Path) -> None:
    (plugin_root / ".mcp.json").write_text(
        '{"mcpServers": {"docs": {"url": "https://docs.example.com/mcp"}}}'
    )
    settings = plugin_root / "opennua.toml"
    settings.write_text(settings.read_text() + 'egress = ["api.example.com"]\n')
    with pytest.raises(PluginError, match=r"docs\.example\.com is not in the egress list"):
        _agent(plugin_root)
    settings.write_text(settings.read_text().replace('"api.example.com"', '"*.example.com"'))
    (server,) = _agent(plugin_root).mcp_servers
    assert server.url == "https://docs.example.com/mcp"


@pytest.mark.slow  # starts the stdio MCP server once per resumed attempt
async def test_the_scaffold_is_a_working_plugin(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "hello"
    plugin = scaffold_plugin(root, "hello")
    model = ScriptedModel(
        [
            ScriptStep(calls=(call("skill", name="greeting", resource="phrases.md"),)),
            ScriptStep(calls=(call("notes__remember", key="name", value="Ada"),)),
            ScriptStep(calls=(call("notes__recall", key="name"),)),
            ScriptStep(calls=(call("notes__forget", key="name"),)),
            ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),)),
            say("Good morning, Ada!"),
        ],
        workers={REVIEW: [say("Fine.")]},
    )
    agent = agent_from_plugin(root, plugin, model="scripted:test")
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model), InMemoryJournal(), "Hello!"
    )
    assert isinstance(outcome, Completed)
    phrases, remembered, recalled, forgot, review = _results(journal)
    assert phrases[1] is not None and "Good morning!" in phrases[1]
    assert (remembered, recalled, forgot) == (
        ("completed", "remembered name"),
        ("completed", "Ada"),
        ("completed", "forgot name"),
    )
    assert review == ("completed", "Fine.")
    # The server ran in the execution's workspace, and `forget` asked despite its hint.
    assert (workdir / "notes.json").read_text() == "{}"
    (opened,) = _of(journal, "input_request.opened")
    assert opened.prompt == "Allow forget?"


async def test_unconfined_a_plugin_server_sees_the_plugin_where_it_is(
    plugin_root: Path, workdir: Path
) -> None:
    model = ScriptedModel([ScriptStep(calls=(call("notes__lookup", word="w"),)), say("ok")])
    agent = _agent(plugin_root)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model, env={"sandbox": Sandbox("none")}),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Completed)
    assert _results(journal) == [("completed", f"w: defined (hello, root={plugin_root})")]


def test_the_definition_does_not_depend_on_where_the_plugin_is_unpacked(
    plugin_root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere" / "writer"
    shutil.copytree(plugin_root, elsewhere)
    assert _agent(elsewhere).digest == _agent(plugin_root).digest
    (elsewhere / "skills" / "glossary" / "terms" / "list.md").write_text("- changed\n")
    assert _agent(elsewhere).digest != _agent(plugin_root).digest  # a resource is the plugin's


@pytest.mark.parametrize("compact_min_bytes", [1, 64 * 1024])  # from fulls, and from steps
async def test_a_named_sub_agent_resumes_as_itself_after_a_crash_at_any_commit(
    plugin_root: Path, tmp_path: Path, compact_min_bytes: int
) -> None:
    (plugin_root / ".mcp.json").unlink()
    agent = _agent(plugin_root)
    limits = Limits(compact_min_bytes=compact_min_bytes)

    def model() -> Recording:
        return Recording(
            [ScriptStep(calls=(call("task", name="reviewer", task=REVIEW),)), say("ok")],
            workers={
                REVIEW: [
                    ScriptStep(calls=(call("read_file", path="a"),)),
                    ScriptStep(calls=(call("read_file", path="b"),)),
                    say("reviewed"),
                ]
            },
        )

    _, reference, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model(), limits=limits), InMemoryJournal(), "x"
    )
    for k in range(1, reference.commits):
        recording = model()
        outcome, journal, history = await drive(
            lambda j, m=recording: make_loop(agent, j, tmp_path, m, limits=limits),
            InMemoryJournal(crash_after=k),
            "x",
        )
        assert "crash" in history and isinstance(outcome, Completed), (k, history)
        assert _results(journal)[-1] == ("completed", "reviewed"), k
        worker = [r for r in recording.requests if r.prompt == REVIEW]
        assert worker, k
        assert {(r.instructions, tuple(r.tools)) for r in worker} == {
            ("You review release notes. Reply with remarks only.", ("read_file",))
        }, k


def test_whether_a_cost_cap_can_be_enforced_is_known_before_any_call() -> None:
    # What `nua deploy --max-cost` is checked against (the same table as the budget).
    assert model_priced("openai:gpt-4o") and model_priced("anthropic:claude-sonnet-4-5")
    assert model_priced("scripted:demo")  # free
    assert not model_priced("openai:no-such-model")
    assert not model_priced("ollama:llama3")
