"""One MCP server that does not start does not sink the turn, and says why."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models import ModelRequestParameters

from opennua.protocol.actions import McpServerUnavailable
from opennua.runtime import Completed, McpServer, RuntimeFailure, default_agent
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.fixtures import mcp_server
from tests.runtime.helpers import make_loop

SERVER_SCRIPT = Path(mcp_server.__file__)


class Listening(ScriptedModel):
    """A scripted model that keeps the instructions each request carried."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instructions: list[str] = []

    def request_stream(  # type: ignore[override]
        self, messages: Any, settings: Any, params: ModelRequestParameters, run_context: Any = None
    ) -> Any:
        self.instructions.append("\n".join(p.content for p in params.instruction_parts or ()))
        return super().request_stream(messages, settings, params, run_context)


def _broken(name: str = "broken", stderr: str = "getaddrinfo EAI_AGAIN registry") -> McpServer:
    script = f"echo 'starting' >&2; echo '{stderr}' >&2; exit 1"
    return McpServer(name, command="/bin/sh", args=("-c", script), prefix=name)


def _good(log: Path) -> McpServer:
    return McpServer(
        "notes", command=sys.executable, args=(str(SERVER_SCRIPT), str(log)), prefix="notes"
    )


def _unavailable(journal: InMemoryJournal) -> list[McpServerUnavailable]:
    return [e.data for e in journal.log if isinstance(e.data, McpServerUnavailable)]


async def test_a_turn_goes_on_without_a_server_that_does_not_start(tmp_path: Path) -> None:
    log = tmp_path / "notes.log"
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(_broken(), _good(log)))
    model = Listening([ScriptStep(calls=(call("notes__tag", name="k", value=1),)), say("done")])
    journal = InMemoryJournal()
    outcome = await make_loop(agent, journal, tmp_path, model).run("x")
    assert isinstance(outcome, Completed), outcome
    assert log.read_text() == "tag k=1\n"  # the good server's tool ran
    [found] = _unavailable(journal)
    assert found.server == "broken"
    # Why, as the server said it: its last stderr lines, not only "Connection closed".
    assert "getaddrinfo EAI_AGAIN registry" in found.message
    assert "starting" in found.message
    # The model is told too, in every request of the turn.
    assert len(model.instructions) == 2
    assert all("broken" in text and "unavailable" in text for text in model.instructions)


async def test_a_required_server_that_does_not_start_fails_the_turn_with_why(
    tmp_path: Path,
) -> None:
    broken = dataclasses.replace(_broken(), required=True)
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(broken,))
    with pytest.raises(RuntimeFailure) as failed:
        await make_loop(agent, InMemoryJournal(), tmp_path, ScriptedModel([say("x")])).run("x")
    assert "EAI_AGAIN" in failed.value.message
    assert "requires this server" in failed.value.message


async def test_secrets_in_the_stderr_of_a_failed_server_are_redacted(tmp_path: Path) -> None:
    broken = dataclasses.replace(
        _broken(stderr="token s3cr3t-value rejected"), secret_values={"API_TOKEN": "s3cr3t-value"}
    )
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(broken,))
    journal = InMemoryJournal()
    await make_loop(agent, journal, tmp_path, ScriptedModel([say("x")])).run("x")
    [found] = _unavailable(journal)
    assert "s3cr3t-value" not in found.message
    assert "token [redacted:API_TOKEN] rejected" in found.message


async def test_the_stderr_kept_is_bounded(tmp_path: Path) -> None:
    script = (
        "for i in $(seq 1 500); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >&2; done; exit 3"
    )
    broken = McpServer("noisy", command="/bin/sh", args=("-c", script))
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(broken,))
    journal = InMemoryJournal()
    await make_loop(agent, journal, tmp_path, ScriptedModel([say("x")])).run("x")
    [found] = _unavailable(journal)
    assert "line-500-" in found.message and "line-480-" not in found.message
    assert len(found.message) < 2048 + 200


async def test_variables_expand_from_the_deployment_and_defaults(tmp_path: Path) -> None:
    log = tmp_path / "expanded.log"
    server = McpServer(
        "notes",
        command="${PYTHON:-/no/such/python}",
        args=(str(SERVER_SCRIPT), "${LOG_DIR}/expanded.log"),
        prefix="notes",
        variables={"PYTHON": sys.executable, "LOG_DIR": str(tmp_path)},
    )
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(server,))
    model = ScriptedModel([ScriptStep(calls=(call("notes__tag", name="v", value=2),)), say("ok")])
    outcome = await make_loop(agent, InMemoryJournal(), tmp_path, model).run("x")
    assert isinstance(outcome, Completed), outcome
    assert log.read_text() == "tag v=2\n"


async def test_an_undefined_variable_leaves_the_server_unconfigured_not_a_crash(
    tmp_path: Path,
) -> None:
    server = McpServer(
        "notes", command=sys.executable, args=(str(SERVER_SCRIPT), "${NOT_GIVEN}"), prefix="notes"
    )
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(server,))
    journal = InMemoryJournal()
    outcome = await make_loop(agent, journal, tmp_path, ScriptedModel([say("x")])).run("x")
    assert isinstance(outcome, Completed)
    [found] = _unavailable(journal)
    assert found.code == "mcp_unconfigured"
    assert "${NOT_GIVEN} is not defined" in found.message
