"""How long `nua serve` takes to be ready: a first start, and a restart after `kill -9`.

    python benchmarks/startup.py [--runs 3] [--sessions 20]

Each run spawns `nua serve --sandbox none` (SQLite, the offline demo model, a fresh data
directory) and measures from the spawn to the first `GET /readyz` answering 200 (polled
every 20 ms), with `/healthz` for comparison:

- **first start**: an empty data directory (the schema, the default workspace, the
  built-in deployment are created);
- **after kill -9**: the same data directory after `--sessions` sessions each started the
  demo task (it runs up to its approval, so some executions were running and the rest
  waiting for input when the server was killed), killed with SIGKILL mid-flight.

Beside the wall clock it prints the CPU time the server process had used when it became
ready (`/proc/PID/stat`), which a loaded machine inflates far less, and `python -X
importtime`'s total for `opennua.server`. Prints figures only (median and each run);
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import free_port


def spawn(data: Path, port: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data)]
    args += ["--port", str(port), "--sandbox", "none"]
    env = dict(os.environ, NUA_MODEL="scripted:demo")
    log = open(data.parent / f"serve-{port}.log", "ab")  # noqa: SIM115 - the child owns it
    try:
        return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()


def cpu_seconds(pid: int) -> float:
    """CPU (user + system) the process used so far: a figure the machine's load changes
    far less than the wall clock."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_ready(
    proc: subprocess.Popen[bytes], port: int, began: float
) -> tuple[float, float, float]:
    """(seconds to /healthz 200, to /readyz 200, CPU seconds used by then) since `began`."""
    url = f"http://127.0.0.1:{port}"
    healthy = None
    with httpx.Client(timeout=2) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"nua serve exited with {proc.returncode}")
            try:
                if healthy is None and client.get(f"{url}/healthz").status_code == 200:
                    healthy = time.monotonic() - began
                if client.get(f"{url}/readyz").status_code == 200:
                    ready = time.monotonic() - began
                    return healthy or ready, ready, cpu_seconds(proc.pid)
            except httpx.HTTPError:
                pass
            if time.monotonic() - began > 120:
                raise RuntimeError("nua serve was not ready within 120 s")
            time.sleep(0.02)


def load(port: int, data: Path, sessions: int) -> None:
    """Start the demo task in `sessions` sessions and let them get under way."""
    token = (data / "token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as c:
        for n in range(sessions):
            sid = c.post("/v1/sessions", json={"title": f"s{n}"}).json()["session_id"]
            c.post(f"/v1/sessions/{sid}/messages", json={"content": "Write a short report"})
        time.sleep(1.0)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    proc.send_signal(sig)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_run(root: Path, sessions: int) -> dict[str, tuple[float, float, float]]:
    data = root / "data"
    port = free_port()
    began = time.monotonic()
    proc = spawn(data, port)
    first = until_ready(proc, port, began)
    load(port, data, sessions)
    stop(proc, signal.SIGKILL)
    port = free_port()
    began = time.monotonic()
    proc = spawn(data, port)
    try:
        killed = until_ready(proc, port, began)
    finally:
        stop(proc)
    return {"first start": first, "after kill -9": killed}


def import_seconds() -> float:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import opennua.server"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    # The last line is the top-level import; its cumulative column is the total (us).
    match = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| opennua\.server$", out, re.M)
    return int(match[-1]) / 1e6 if match else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            for name, figures in one_run(Path(tmp), args.sessions).items():
                results.setdefault(name, []).append(figures)
    print(f"nua serve start-up, {args.runs} runs, {args.sessions} sessions before the kill")
    print(f"  import opennua.server: {import_seconds():.2f} s")
    for name, runs in results.items():
        ready = [r for _, r, _ in runs]
        healthy = [h for h, _, _ in runs]
        cpu = [c for _, _, c in runs]
        each = ", ".join(f"{r:.2f}" for r in ready)
        print(
            f"  {name:14} ready (/readyz) median {statistics.median(ready):.2f} s "
            f"[{each}]; /healthz median {statistics.median(healthy):.2f} s; "
            f"CPU used by then median {statistics.median(cpu):.2f} s"
        )
    print(f"  load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
