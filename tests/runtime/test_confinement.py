"""What confines a sandboxed program, on both backends with the real kernel: resource
limits, an unprivileged user, no network but the egress proxy's forwarder, and (Landlock,
forced here although bubblewrap is installed) the file system rules.

The egress proxy here is a small Unix-socket server that answers any request, standing in
for the gateway's (tests/gateway/test_egress_e2e.py runs the real one): what is tested is
that a program reaches it, and only it, through `HTTP_PROXY`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from opennua.runtime import Sandbox, SandboxLimits, ToolError
from opennua.runtime._builtins import shell
from opennua.runtime._sandbox import SANDBOX_UID, SandboxMode, sandbox_problem
from tests.runtime.helpers import processes_running, tool_context

TOKEN = "owner-token-" + secrets.token_hex(8)
MODES: list[SandboxMode] = ["bwrap", "landlock"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "workspaces" / "ses_1").mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    return data / "workspaces" / "ses_1"


async def _sh(workdir: Path, command: str, sandbox: Sandbox, **kw: float) -> str:
    try:
        return str(await shell.fn(tool_context(workdir, sandbox), command, **kw))
    except ToolError as exc:  # "exit status N" and the output, or why it did not run
        first, _, rest = exc.message.partition("\n")
        return rest if first.startswith("exit status") else exc.message


def test_landlock_confines_here() -> None:
    # Kernel 6.x with Landlock and unprivileged user namespaces: the fallback backend runs.
    assert sandbox_problem("landlock") is None


@pytest.mark.parametrize("mode", MODES)
async def test_nobody_inside_is_root(workdir: Path, mode: SandboxMode) -> None:
    out = await _sh(workdir, "id -u; id -g; touch made; echo ok", Sandbox(mode))
    uid, gid, ok = out.split()
    assert ok == "ok" and uid != "0" and gid != "0"
    if os.getuid() == 0:
        assert int(uid) == SANDBOX_UID
    assert (workdir / "made").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_address_space_file_size_and_cpu_time_are_limited(
    workdir: Path, mode: SandboxMode
) -> None:
    limits = SandboxLimits(address_space=512 * 2**20, file_size=2**20, cpu_seconds=1)
    sandbox = Sandbox(mode, limits)
    memory = await _sh(workdir, "python3 -c 'bytearray(1 << 30)'; echo status $?", sandbox)
    assert "MemoryError" in memory and "status 1" in memory
    size = await _sh(workdir, "head -c 3000000 /dev/zero > big; echo status $?", sandbox)
    assert "status 153" in size  # SIGXFSZ
    assert (workdir / "big").stat().st_size == 2**20
    spin = await _sh(workdir, "python3 -c 'while True: pass'; echo status $?", sandbox)
    assert "status 152" in spin  # SIGXCPU
    # The defaults are in force when nothing is said.
    default = await _sh(workdir, "ulimit -v; ulimit -f; ulimit -t", Sandbox(mode))
    assert default.split() == [str(4 * 2**20), str(2 * 2**20), "600"]


@pytest.mark.skipif(os.getuid() != 0, reason="as another user the count is per sandbox too")
async def test_the_process_limit_holds_for_a_server_run_as_root(workdir: Path) -> None:
    # The kernel exempts uid 0 from RLIMIT_NPROC: run as root, bubblewrap's program is
    # SANDBOX_UID, so the limit holds (the probe started 300 processes).
    sandbox = Sandbox("bwrap", SandboxLimits(processes=40))
    out = await _sh(workdir, f"python3 -c '{FORKS}'", sandbox)
    started, errno = out.split()[1:]
    assert int(started) < 40 and errno == "11"  # EAGAIN
    assert processes_running("30.91") == []  # and none outlived the call


FORKS = """
import os, time
n = 0
try:
    while n < 100:
        if os.fork() == 0:
            time.sleep(30.91)
            os._exit(0)
        n += 1
except OSError as exc:
    print("stopped", n, exc.errno)
"""


class FakeProxy:
    """A Unix socket answering every connection with one fixed HTTP response."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(head.split(b"\r\n")[0])
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nfrom-proxy\n"
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[FakeProxy]:
    fake = FakeProxy(tmp_path / "egress.sock")
    server = await asyncio.start_unix_server(fake.handle, fake.path)
    fake.path.chmod(0o666)  # the sandbox's user connects (as the relay makes it)
    async with server:
        yield fake


CURL = "curl -sS --max-time 5 http://example.test:8080/x"
DIRECT = (
    "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 5432), timeout=3)"
    "; print('CONNECTED')\""
)


@pytest.mark.parametrize("mode", MODES)
async def test_the_network_is_the_proxy_and_nothing_else(
    workdir: Path, proxy: FakeProxy, mode: SandboxMode
) -> None:
    sandbox = Sandbox(mode, egress=proxy.path)
    out = await _sh(workdir, f"echo $HTTP_PROXY $HTTPS_PROXY; {CURL}; {DIRECT}", sandbox)
    lines = out.splitlines()
    assert lines[0] == "http://127.0.0.1:3128 http://127.0.0.1:3128"
    assert lines[1] == "from-proxy"  # an ordinary client went through the proxy
    assert proxy.requests == [b"GET http://example.test:8080/x HTTP/1.1"]
    assert "CONNECTED" not in out and "Connection refused" in out
    # Without egress there is no proxy and no variable naming one.
    out = await _sh(workdir, f"echo [$HTTP_PROXY]; {CURL}", Sandbox(mode))
    assert out.startswith("[]\n") and "from-proxy" not in out


async def test_landlock_keeps_the_data_directory_and_the_host_out(
    workdir: Path, tmp_path: Path
) -> None:
    data = workdir.parent.parent
    sandbox = Sandbox("landlock")
    writes = [
        f"{data}/x",
        f"{tmp_path}/x",
        "/tmp/nua-landlock-x",
        "../x",
        "/usr/x",
        f"{Path.home()}/x",
    ]
    script = "; ".join(f"touch {t} 2>/dev/null && echo WROTE {t}" for t in writes)
    out = await _sh(workdir, f"{script}; echo hi > here.txt; echo $TMPDIR; echo done", sandbox)
    assert "WROTE" not in out and out.strip().endswith("done")
    assert (workdir / "here.txt").read_text() == "hi\n"
    scratch = out.splitlines()[-2]
    # The scratch directory (TMPDIR) was removed after the call.
    assert scratch.startswith("/") and not await asyncio.to_thread(os.path.exists, scratch)
    read = await _sh(workdir, f"cat {data}/token; ls {data}; cat /root/.bashrc", sandbox)
    assert TOKEN not in read and "Permission denied" in read
    # The host's processes are in /proc, but not their environment or memory.
    environ = await _sh(workdir, f"cat /proc/{os.getpid()}/environ; echo end", sandbox)
    assert "PATH=" not in environ and environ.strip().endswith("end")
    # A Unix socket of the host (PostgreSQL's) is not reachable: new ones are refused.
    pg = "/var/run/postgresql/.s.PGSQL.5432"
    probe = f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{pg}')\""
    assert "PermissionError" in await _sh(workdir, probe, sandbox)
    if await asyncio.to_thread(os.path.exists, pg):  # the same probe unconfined does connect
        assert await _sh(workdir, probe, Sandbox("none")) == ""


async def test_landlock_kills_what_the_command_left_running(workdir: Path) -> None:
    out = await _sh(
        workdir,
        "(setsid sleep 30.93 &) ; (sleep 0.4; touch late) & echo started",
        Sandbox("landlock"),
    )
    assert out == "started\n"
    assert processes_running("sleep 30.93") == []
    await asyncio.sleep(0.6)
    assert not (workdir / "late").exists()
    timed = await _sh(workdir, "sleep 30.94", Sandbox("landlock"), timeout_seconds=0.5)
    assert timed == "command timed out after 0.5s"
    assert processes_running("sleep 30.94") == []
