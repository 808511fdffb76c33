"""Every event stream a real `nua serve` sends is gzipped when the request accepts it, and
text as is when it does not: here an AG-UI run and A2A's streaming send, over `nua serve`'s
own HTTP protocol (a session's SSE: tests/server/test_streams.py). The bytes are read raw
and inflated here, so a gzip member that is not closed fails (docs/server.md, "Live
streams")."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TASK = "Write the quarterly report"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("gzip"), step_delay="0", model="scripted:demo")
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _read(server: Server, method: str, path: str, encoding: str, **kw: object) -> str:
    """The whole response as text: inflated here when it came gzipped, which it must exactly
    when `encoding` allows it."""
    headers = {
        "Authorization": f"Bearer {server.token}",
        "Accept-Encoding": encoding,
        "A2A-Version": "1.0",
    }
    with (
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
        http.stream(method, path, **kw) as response,  # type: ignore[arg-type]
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["vary"] == "Accept-Encoding"
        raw = b"".join(response.iter_raw())
        if encoding == "identity":
            assert "content-encoding" not in response.headers
            return raw.decode()
        assert response.headers["content-encoding"] == "gzip"
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = inflater.decompress(raw).decode()
    assert inflater.eof and not inflater.unused_data, "the gzip member was not closed"
    return text


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_an_agui_run_streams_gzipped_when_asked(server: Server, encoding: str) -> None:
    body = {
        "threadId": f"t-{encoding}",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": TASK}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    text = _read(server, "POST", "/v1/agui/default", encoding, json=body)
    # The demo's run ends at its approval: the whole run, up to its end, came through.
    assert '"type":"RUN_STARTED"' in text and '"type":"RUN_FINISHED"' in text, text[-500:]


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_an_a2a_streaming_send_streams_gzipped_when_asked(server: Server, encoding: str) -> None:
    message = {"messageId": f"m-{encoding}", "role": "ROLE_USER", "parts": [{"text": TASK}]}
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    text = _read(server, "POST", "/v1/a2a/default", encoding, json=rpc)
    # It streams until the task waits for its approval.
    assert "TASK_STATE_INPUT_REQUIRED" in text, text[-500:]
