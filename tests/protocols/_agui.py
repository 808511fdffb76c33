"""`@ag-ui/client`'s HttpAgent under Node, as the AG-UI tests and the conformance column
drive it (`agui_agents.mjs`): one Node process, any number of agents, one command at a time."""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "agui_agents.mjs"


def node_ready() -> str | None:
    """Why the Node client cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (HERE / "node_modules" / "@ag-ui" / "client").exists():
        return "run `npm ci --prefix tests/protocols` first"
    return None


def require_node() -> None:
    missing = node_ready()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {missing}")
        pytest.skip(missing)


class Agents:
    """The Node process; `call` sends one command and returns its reply."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["node", str(SCRIPT)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, SUPPRESS_TRANSFORMATION_WARNINGS="1"),
        )
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[str] = []
        self._errors = threading.Thread(target=self._drain, daemon=True)
        self._errors.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self._lock:
                box = self._replies.setdefault(reply["id"], queue.Queue())
            box.put(reply)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def call(self, cmd: str, timeout: float = 60, **args: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        with self._lock:
            box = self._replies.setdefault(request_id, queue.Queue())
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": request_id, "cmd": cmd, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            reply = box.get(timeout=timeout)
        except queue.Empty:
            tail = "".join(self._stderr[-20:])
            raise AssertionError(f"no reply to {cmd} in {timeout}s; node said:\n{tail}") from None
        assert "failed" not in reply, reply["failed"]
        return reply

    def agent(self, name: str, url: str, token: str, thread_id: str) -> None:
        self.call("agent", name=name, url=url, token=token, threadId=thread_id)

    def run(self, name: str, **args: Any) -> None:
        self.call("run", name=name, **args)

    def wait(self, name: str, timeout: float = 90) -> dict[str, Any]:
        result: dict[str, Any] = self.call("wait", timeout=timeout, name=name)["result"]
        return result

    def run_to_end(self, name: str, timeout: float = 90, **args: Any) -> dict[str, Any]:
        self.run(name, **args)
        return self.wait(name, timeout)

    def view(self, name: str) -> dict[str, Any]:
        return self.call("view", name=name)

    def abort(self, name: str) -> None:
        self.call("abort", name=name)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        # The readers end at the process's EOF; only then are their pipes closed.
        self._reader.join(5)
        self._errors.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
