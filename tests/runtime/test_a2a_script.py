"""`scripted:a2a`: the offline model that messages the first A2A agent it is offered, and
answers with what came back; offered none, it echoes (the simplest agent to call). The
demo model is untouched by it (`test_demo.py`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from opennua.runtime import Completed, default_agent, resolve_model
from opennua.runtime._a2a import A2aAgent
from opennua.runtime.testing import InMemoryJournal
from tests.runtime.helpers import make_loop


async def test_without_an_agent_it_echoes(tmp_path: Path) -> None:
    agent = default_agent("scripted:a2a")
    loop = make_loop(agent, InMemoryJournal(), tmp_path, resolve_model("scripted:a2a"))
    outcome = await loop.run("hello there")
    assert isinstance(outcome, Completed) and outcome.output == "echo: hello there"


async def test_it_calls_the_first_agent_and_a_failed_call_is_said_not_crashed(
    tmp_path: Path,
) -> None:
    agents = (A2aAgent("zed", "https://z.example", "zed"), A2aAgent("b", "https://b.example", "b"))
    agent = dataclasses.replace(default_agent("scripted:a2a"), a2a_agents=agents)
    journal = InMemoryJournal()
    loop = make_loop(agent, journal, tmp_path, resolve_model("scripted:a2a"))
    outcome = await loop.run("ask b")  # no gateway in this environment
    assert isinstance(outcome, Completed)
    started = [e.data for e in journal.log if e.type == "tool_call.started"]
    assert [(s.name, s.input) for s in started] == [("b__send_message", {"text": "ask b"})]
    [failed] = [e.data for e in journal.log if e.type == "tool_call.updated"
                and e.data.status == "failed"]  # fmt: skip
    assert failed.error is not None and "no gateway" in failed.error.message
    assert (
        outcome.output.startswith("b__send_message answered: ") and "no gateway" in outcome.output
    )
