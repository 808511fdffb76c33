"""Real `nua serve` processes for end-to-end tests: start, wait until healthy, kill -9; and
`FakeProvider`, an OpenAI-compatible model server that plays a script, for the tests that
need the model to say exactly something (a hidden command, escape sequences)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx

from tests._support.polling import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(
        self,
        data: Path,
        *,
        db: str | None = None,
        step_delay: str = "0.2",
        role: str = "all",
        model: str | None = None,
        env: Mapping[str, str] | None = None,
        blobs: str | None = None,
        lease_ttl: str = "2",
        args: Sequence[str] = (),
        relative_data: bool = False,
    ) -> None:
        #: Start in the data directory's parent and name it relatively (`--data data`).
        self.relative_data = relative_data
        self.data = data
        self.args = list(args)
        self.lease_ttl = lease_ttl
        self.db = db
        self.blobs = blobs
        self.role = role
        self.model = model
        self.extra_env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.step_delay = step_delay
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        args = [
            sys.executable,
            "-m",
            "opennua.cli",
            "serve",
            "--data",
            self.data.name if self.relative_data else str(self.data),
            "--port",
            str(self.port),
            "--lease-ttl",
            self.lease_ttl,
            "--role",
            self.role,
        ]
        if self.db:
            args += ["--db", self.db]
        if self.blobs:
            args += ["--blobs", self.blobs]
        if self.model:
            args += ["--model", self.model]
        args += self.args
        env = dict(os.environ, NUA_DEMO_STEP_DELAY=self.step_delay) | self.extra_env
        self.log = self.data / f"serve-{self.role}-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                args,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data.parent if self.relative_data else None,
            )
        # Generous: on a loaded shared machine a start takes well over 10 s.
        deadline = time.monotonic() + 90
        if self.role == "supervisor":
            # No HTTP here: ready once it has announced its supervisor id.
            wait_for(lambda: b"supervisor sup_" in self.log.read_bytes(), timeout=30)
            return self
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()  # never leave the process behind
        raise AssertionError(f"nua serve did not become healthy at {self.url}")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @property
    def token(self) -> str:
        return (self.data / "token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )


#: The nginx config users deploy (docs/deploy/nginx.conf), run as is with the ports swapped.
NGINX_CONF = Path(__file__).resolve().parents[2] / "docs" / "deploy" / "nginx.conf"


def nginx_binary() -> str:
    """nginx's path; a test that needs it fails in CI without it, elsewhere it skips."""
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).exists():
        import pytest

        if os.environ.get("CI"):
            pytest.fail("CI is set but nginx is not installed (.ci/run installs it)")
        pytest.skip("nginx is not installed")
    return found


def write_nginx_conf(prefix: Path, host_ports: Sequence[int], edge: int) -> Path:
    """A standalone nginx.conf under `prefix` around the shipped config: its two upstream
    hosts on `host_ports`, listening on 127.0.0.1:`edge`, every temp path and log inside
    `prefix` (run it with `nginx -p PREFIX -c RETURNED -g 'daemon off;'`)."""
    first, second = host_ports
    conf = NGINX_CONF.read_text().replace("127.0.0.1:7431", f"127.0.0.1:{first}")
    conf = conf.replace("127.0.0.1:7432", f"127.0.0.1:{second}")
    conf = conf.replace("listen 8080;", f"listen 127.0.0.1:{edge};")
    (prefix / "logs").mkdir(parents=True, exist_ok=True)
    temp = " ".join(
        f"{kind}_temp_path {prefix};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    path = prefix / "nginx.conf"
    path.write_text(
        f"pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log; events {{}}\n"
        f"http {{ access_log off; {temp}\n{conf}\n}}\n"
    )
    return path


@dataclass(frozen=True)
class Reply:
    """One model response in a `FakeProvider` script: reasoning, text and tool calls."""

    text: str = ""
    reasoning: str = ""
    calls: Sequence[tuple[str, dict[str, Any]]] = ()


@dataclass
class FakeProvider:
    """A chat-completions server (the OpenAI streaming protocol) in the test process, for
    `nua serve --model openai:fake` (see `env()`).

    `scripts` maps the last user message of a conversation (a turn's text, or the task a
    sub-agent was given) to its replies: the n-th request after that message gets the n-th
    reply. A conversation without a script, or past its end, gets "ok".
    """

    scripts: Mapping[str, Sequence[Reply]]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version: ClassVar[str] = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(body)
                payload = provider._stream(provider._reply(body["messages"]))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": "sk-fake"}

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _reply(self, messages: list[dict[str, Any]]) -> Reply:
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        last = users[-1] if users else 0
        content = messages[last].get("content") if users else ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        answered = sum(1 for m in messages[last:] if m["role"] == "assistant")
        script = self.scripts.get(str(content), ())
        return script[answered] if answered < len(script) else Reply(text="ok")

    @staticmethod
    def _stream(reply: Reply) -> bytes:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {"choices": [choice], "usage": None}

        chunks = [chunk({"role": "assistant", "content": ""})]
        if reply.reasoning:
            chunks.append(chunk({"reasoning_content": reply.reasoning}))
        if reply.text:
            chunks.append(chunk({"content": reply.text}))
        for index, (name, arguments) in enumerate(reply.calls):
            call = {
                "index": index,
                "id": f"call_fake{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            chunks.append(chunk({"tool_calls": [call]}))
        chunks.append(chunk({}, "tool_calls" if reply.calls else "stop"))
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        chunks.append({"choices": [], "usage": usage})
        frames = []
        for data in chunks:
            envelope = {"id": "chatcmpl-fake", "object": "chat.completion.chunk"}
            envelope |= {"created": 1764403200, "model": "fake"} | data
            frames.append(f"data: {json.dumps(envelope)}\n\n")
        frames.append("data: [DONE]\n\n")
        return "".join(frames).encode()
