"""Model resolution, the guard against real requests, and the OpenAI adapter against a local
server speaking the chat-completions streaming protocol (recorded fixtures)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic_ai.models import override_allow_model_requests

from opennua.runtime import Completed, ModelConfigError, default_agent, resolve_model
from opennua.runtime._scripted import ScriptedModel
from opennua.runtime.testing import InMemoryJournal
from tests.runtime.helpers import drive, make_loop

FIXTURES = Path(__file__).parent / "fixtures"


def test_resolution_and_clear_errors() -> None:
    assert isinstance(resolve_model("scripted:demo", env={}), ScriptedModel)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o", env={})
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-sonnet-4-5", env={})
    with pytest.raises(ModelConfigError, match="GOOGLE_API_KEY"):
        resolve_model("google:gemini-2.5-flash", env={})
    with pytest.raises(ModelConfigError, match="unknown model provider"):
        resolve_model("nope:x", env={})
    with pytest.raises(ModelConfigError, match="provider:model"):
        resolve_model("gpt-4o", env={})
    model = resolve_model("openai:llama3", env={"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert model.model_name == "llama3"
    assert resolve_model("anthropic:claude-x", env={"ANTHROPIC_API_KEY": "k"}).system == "anthropic"


class _Recorded(BaseHTTPRequestHandler):
    responses: ClassVar[list[bytes]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "auth": self.headers["Authorization"]}
        )
        payload = type(self).responses[len(type(self).requests) - 1]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def openai_server() -> Iterator[str]:
    _Recorded.responses = [(FIXTURES / f"openai_stream_{i}.sse").read_bytes() for i in (1, 2)]
    _Recorded.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_real_requests_are_refused_by_the_global_guard(openai_server: str) -> None:
    model = resolve_model(
        "openai:gpt-4o-mini", env={"OPENAI_BASE_URL": openai_server, "OPENAI_API_KEY": "k"}
    )
    agent = default_agent("openai:gpt-4o-mini")
    with pytest.raises(RuntimeError, match="ALLOW_MODEL_REQUESTS"):
        await make_loop(agent, InMemoryJournal(), Path("."), model).run("hi")
    assert _Recorded.requests == []


async def test_openai_adapter_streams_tools_and_cached_usage(
    openai_server: str, tmp_path: Path
) -> None:
    (tmp_path / "hello.txt").write_text("hi")
    env = {"OPENAI_BASE_URL": openai_server, "OPENAI_API_KEY": "sk-test"}
    model = resolve_model("openai:gpt-4o-mini", env=env)
    agent = default_agent("openai:gpt-4o-mini")
    with override_allow_model_requests(True):
        outcome, journal, _ = await drive(
            lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "What is here?"
        )
    assert isinstance(outcome, Completed) and outcome.output == "The workspace has hello.txt."
    # The adapter's deltas reach the log joined per batch, or not at all when the message's
    # completion commits with them (tests/runtime/test_delta_batches.py): either way each
    # message's streamed text is a prefix of its completed text.
    texts = [e.data for e in journal.log if e.type == "message.completed"]
    assert [t.text for t in texts] == ["Let me look at the files.", "The workspace has hello.txt."]  # type: ignore[attr-defined]
    for completed in texts:
        streamed = "".join(
            e.data.delta  # type: ignore[attr-defined]
            for e in journal.log
            if e.type == "message.delta" and e.data.message_id == completed.message_id  # type: ignore[attr-defined]
        )
        assert completed.text.startswith(streamed)  # type: ignore[attr-defined]
    started = next(e.data for e in journal.log if e.type == "tool_call.started")
    assert started.name == "list_files" and started.input == {"path": "."}  # type: ignore[attr-defined]
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.output == "hello.txt"  # type: ignore[attr-defined]
    usage = [e.data.model_dump() for e in journal.log if e.type == "usage.recorded"]
    assert usage[0] == {
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "input_tokens": 1200,
        "output_tokens": 30,
        "cache_read_input_tokens": 1024,
        "cache_creation_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }
    assert usage[1]["cache_read_input_tokens"] == 1152 and usage[1]["reasoning_output_tokens"] == 4
    # What went over the wire: our tools, the streamed request, the tool result echoed back.
    first, second = _Recorded.requests
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["body"]["stream"] is True
    assert "list_files" in {t["function"]["name"] for t in first["body"]["tools"]}
    tool_msg = [m for m in second["body"]["messages"] if m["role"] == "tool"]
    assert tool_msg == [{"role": "tool", "tool_call_id": "call_Rec0001", "content": "hello.txt"}]
