"""The shipped nginx config (docs/deploy/nginx.conf) in front of two real host processes
and a supervisor on PostgreSQL: the demo task runs over SSE through the proxy, and the
session goes on through the other host after one is killed with SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e._proc import nginx_binary, write_nginx_conf
from tests.server._serve_proc import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]


@contextlib.contextmanager
def _proc(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _healthy(url: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # generous: a loaded shared machine
    while True:
        assert proc.poll() is None, log.read_text(errors="replace")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        assert time.monotonic() < deadline, f"{url} never became healthy"
        time.sleep(0.1)


def _sse_until(client: httpx.Client, sid: str, after: int, wanted: str) -> list[dict[str, Any]]:
    """Actions from the SSE stream (through nginx) until one of type `wanted` arrives."""
    seen: list[dict[str, Any]] = []
    with client.stream(
        "GET", f"/v1/sessions/{sid}/events", params={"after": after}, timeout=60
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                payload = json.loads(line[5:])
                if isinstance(payload, dict) and "type" in payload:
                    seen.append(payload)
                    if payload["type"] == wanted:
                        return seen
    raise AssertionError(f"the stream ended before {wanted}: {[a['type'] for a in seen]}")


def test_demo_through_nginx_survives_a_killed_host(pg_url: str, tmp_path: Path) -> None:
    nginx = nginx_binary()
    data = tmp_path / "data"
    ports = [free_port(), free_port()]
    edge = free_port()
    env = dict(os.environ, NUA_MODEL="scripted:demo", NUA_DEMO_STEP_DELAY="0", PYTHONUNBUFFERED="1")
    base = [sys.executable, "-m", "opennua.cli", "serve", "--db", pg_url, "--data", str(data)]
    prefix = tmp_path / "nginx"
    conf = write_nginx_conf(prefix, ports, edge)
    with contextlib.ExitStack() as stack:
        hosts = []
        for i, port in enumerate(ports):
            args = [*base, "--role", "host", "--port", str(port)]
            args += ["--allowed-host", f"127.0.0.1:{edge}"]
            log = tmp_path / f"host{i}.log"
            proc = stack.enter_context(_proc(args, log, env))
            _healthy(f"http://127.0.0.1:{port}", log, proc)
            hosts.append(proc)
        sup = [*base, "--role", "supervisor", "--sandbox", "none", "--port", str(free_port())]
        stack.enter_context(_proc(sup, tmp_path / "supervisor.log", env))
        stack.enter_context(
            _proc(
                [nginx, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
                tmp_path / "nginx.log",
                env,
            )
        )
        url = f"http://127.0.0.1:{edge}"
        token = (data / "token").read_text().strip()
        client = stack.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=20)
        )
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/healthz").status_code == 200:
                    break
            assert time.monotonic() < deadline, (prefix / "logs" / "error.log").read_text()
            time.sleep(0.1)

        created = client.post("/v1/sessions", json={"title": "nginx"})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        sent = client.post(
            f"/v1/sessions/{sid}/messages",
            json={"content": [{"type": "text", "text": "Write the quarterly report"}]},
        )
        assert sent.status_code == 202, sent.text
        opened = _sse_until(client, sid, 0, "input_request.opened")
        request_id = opened[-1]["data"]["request_id"]

        hosts[0].kill()  # SIGKILL one host: nginx sends the rest to the other
        hosts[0].wait(5)
        answer = client.post(
            f"/v1/sessions/{sid}/input-requests/{request_id}/answer",
            json={"option_id": "allow_once"},
            headers={"Idempotency-Key": "answer-1"},
        )
        assert answer.status_code == 200, answer.text
        ended = _sse_until(client, sid, opened[-1]["seq"], "turn.ended")
        assert ended[-1]["data"]["stop_reason"] == "end_turn"
        # A reconnect through the proxy resumes from its cursor: gapless seqs end to end.
        seqs = [a["seq"] for a in opened + ended]
        assert seqs == list(range(1, len(seqs) + 1))
        # The retransmitted answer replays through the surviving host.
        again = client.post(
            f"/v1/sessions/{sid}/input-requests/{request_id}/answer",
            json={"option_id": "allow_once"},
            headers={"Idempotency-Key": "answer-1"},
        )
        assert again.status_code == 200 and again.json() == answer.json()
