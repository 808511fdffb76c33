"""How sandboxed programs start: bubblewrap, Landlock, or (the operator's choice) not confined.

A sandboxed program (a `shell` command, a plugin's stdio MCP server) sees the execution's
workspace as its only writable path that outlives it, system paths read-only, no data
directory, no secrets and **no network**: a new network namespace with only its own
loopback. Network goes only through the egress proxy, when the deployment allows any:
its Unix socket (`Sandbox.egress`) is reachable inside, and a forwarder in the sandbox
listens on 127.0.0.1:`PROXY_PORT`, which `HTTP_PROXY`/`HTTPS_PROXY` name. Every program
starts through `_sandbox_init.py` (resource limits, identity, the forwarder, then exec).

- **bubblewrap** (`bwrap`): a mount namespace with `/workspace`, `/usr`, a few files of
  `/etc`, its own `/proc` and scratch `/tmp`; new PID, IPC, UTS and network namespaces;
  no capabilities. Run as root, the program becomes uid 65534 (`SANDBOX_UID`).
- **Landlock** (`landlock`, where bubblewrap is missing; needs nothing installed): new
  user, network and PID namespaces, Landlock file-system rules (system paths read-only;
  the workspace and a scratch `TMPDIR` writable; nothing else, the data directory
  included) and a seccomp filter refusing new Unix sockets. The workspace keeps its own
  path (no mount namespace) and `/proc` is the host's (Landlock keeps other processes'
  memory and environment out of reach).

`choose_sandbox("auto")` picks bubblewrap where it starts, else Landlock; `sandbox_problem`
says, once per process and mode, why a mode cannot start here (None: it can).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SandboxMode = Literal["bwrap", "landlock", "none"]
#: What `nua serve --sandbox` takes: a mode, or `auto` (bubblewrap, else Landlock).
SANDBOX_CHOICES = ("auto", "bwrap", "landlock", "none")
#: Where the workspace appears inside bubblewrap (the host path is nobody's business).
WORKSPACE = "/workspace"
#: Where the egress proxy's socket appears inside bubblewrap.
EGRESS_SOCKET = "/run/nua/egress.sock"
#: The port of the forwarder to the egress proxy, on the sandbox's own loopback.
PROXY_PORT = 3128
#: Who sandboxed programs run as when the server is root (the kernel counts no processes
#: for uid 0), and inside Landlock's user namespace then: `nobody`.
SANDBOX_UID = 65534
_INIT = Path(__file__).with_name("_sandbox_init.py").read_text(encoding="utf-8")
#: What programs need from /etc (the dynamic linker's cache, `alternatives` links such as
#: awk, user names, time zone, certificates); never the rest (shadow, the host's config).
_ETC = (
    "alternatives",
    "ca-certificates",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "ssl",
    "timezone",
)
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
GiB = 1024**3


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of every sandboxed program (None: not limited). The CPU time is
    for calls (a `shell` command); a long-lived stdio server gets none."""

    address_space: int | None = 4 * GiB
    processes: int | None = 256
    file_size: int | None = 1 * GiB
    cpu_seconds: int | None = 600


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How an execution's programs run: `mode`, their `limits`, and the egress proxy's
    Unix socket (None: no network at all)."""

    mode: SandboxMode = "bwrap"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    egress: Path | None = None


class SandboxUnavailable(Exception):
    """The sandbox cannot start here; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Launch:
    """One confined program: its command line and environment; `scratch` is a directory
    to remove once it ended (Landlock's `TMPDIR`)."""

    argv: list[str]
    env: dict[str, str]
    scratch: Path | None = None


def inside(sandbox: Sandbox, host: Path, mounted: str = WORKSPACE) -> str:
    """Where the sandboxed program sees `host` (bubblewrap mounts it at `mounted`)."""
    return mounted if sandbox.mode == "bwrap" else str(host)


def proxy_env() -> dict[str, str]:
    """What sends ordinary clients (curl, pip, npm, git, Python, Node) to the proxy. The
    sandbox's own loopback is not proxied, as in sandbox-runtime."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    env["NODE_USE_ENV_PROXY"] = "1"  # Node's own fetch and http honour the variables
    return env


def confine(
    sandbox: Sandbox,
    workdir: Path,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    read_only: Sequence[tuple[Path, str]] = (),
    long_lived: bool = False,
    info_fd: int | None = None,
) -> Launch:
    """How to start `command` confined to `workspace`: `read_only` binds (host path,
    bubblewrap path) pairs read-only (a plugin's directory); `long_lived` leaves out the
    CPU-time limit (a server); `info_fd` is where bubblewrap writes its init's PID."""
    if sandbox.mode == "none":
        raise ValueError("an unconfined program needs no launch")
    root = os.getuid() == 0
    limits = {
        "address_space": sandbox.limits.address_space,
        "processes": sandbox.limits.processes,
        "file_size": sandbox.limits.file_size,
        "cpu_seconds": None if long_lived else sandbox.limits.cpu_seconds,
    }
    env = dict(env)
    env["HOME"] = inside(sandbox, workdir)
    config: dict[str, object] = {
        "limits": limits,
        "port": PROXY_PORT,
        "cwd": inside(sandbox, workdir),
    }
    if sandbox.egress is not None:
        env.update(proxy_env())
        config["proxy"] = inside(sandbox, sandbox.egress, EGRESS_SOCKET)
    if sandbox.mode == "bwrap":
        if root:
            config["setuid"] = [SANDBOX_UID, SANDBOX_UID]
        config["argv"] = list(command)
        binds = [*read_only, *_interpreter_binds()]
        if sandbox.egress is not None:
            binds.append((sandbox.egress, EGRESS_SOCKET))
        bwrap = shutil.which("bwrap") or "bwrap"
        argv = _bwrap_argv(workdir, bwrap, binds, root=root, info_fd=info_fd)
        return Launch([*argv, "--", *_launcher(config)], env)
    scratch = Path(tempfile.mkdtemp(prefix="nua-sandbox-"))
    env["TMPDIR"] = str(scratch)
    uid = os.getuid() or SANDBOX_UID
    gid = os.getgid() if os.getuid() else SANDBOX_UID
    config["argv"] = list(command)
    config["landlock"] = {
        "uid": uid,
        "gid": gid,
        "read": [
            *(f"/{name}" for name in ("usr", *_TOP)),
            *(f"/etc/{name}" for name in _ETC),
            "/proc",
            *dict.fromkeys(str(p) for p, _ in [*_interpreter_binds(), *read_only]),
        ],
        "write": [str(workdir), str(scratch)],
        "devices": list(_DEVICES),
    }
    return Launch(_launcher(config), env, scratch)


def _launcher(config: Mapping[str, object]) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", _INIT, json.dumps(config)]


def _interpreter_binds() -> list[tuple[Path, str]]:
    """This interpreter and its virtual environment when they are outside /usr: the
    launcher runs on it, and a server written with the `mcp` SDK, run by `python3` on
    PATH, finds it as opennua does."""
    prefixes = dict.fromkeys((Path(sys.base_prefix), Path(sys.prefix)))
    return [(p, str(p)) for p in prefixes if not p.is_relative_to("/usr")]


def _bwrap_argv(
    workdir: Path,
    bwrap: str,
    read_only: Sequence[tuple[Path, str]],
    *,
    root: bool,
    info_fd: int | None,
) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--new-session"]
    if root:
        # No user namespace (it would map the program to uid 0 outside, which the
        # process limit exempts): the launcher drops to SANDBOX_UID with these two.
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        argv += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in _TOP:
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    # /etc is made on the way to its binds: 0700 run as root, so made passable first (or
    # the sandbox's user reads no certificate, user name or OpenSSL configuration).
    argv += ["--perms", "0755", "--dir", "/etc"]
    for name in _ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /tmp and /dev/shm are the sandbox's own scratch space: they vanish with it.
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--tmpfs", "/dev/shm", "--perms", "1777", "--tmpfs", "/tmp"]
    # No --chdir: run as root, bubblewrap may not enter what is SANDBOX_UID's (0700); the
    # launcher does, as that user.
    argv += ["--bind", str(workdir), WORKSPACE]
    # The directories bubblewrap makes on the way to a mount point are its user's only
    # (0700) when it runs as root: the sandbox's user must pass through them.
    ancestors = {str(a) for _, m in read_only for a in Path(m).parents if str(a) != "/"}
    for directory in sorted(ancestors, key=lambda a: (a.count("/"), a)):
        argv += ["--perms", "0755", "--dir", directory]
    for host, mounted in read_only:
        argv += ["--ro-bind", str(host), mounted]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    return argv


def prepare(sandbox: Sandbox, workdir: Path) -> None:
    """Before a program starts: run as root, bubblewrap's program is `SANDBOX_UID`, so
    the workspace becomes its (what the server wrote since is root's). Blocking."""
    if sandbox.mode != "bwrap" or os.getuid() != 0:
        return
    paths = [str(workdir)]
    for directory, dirs, files in os.walk(workdir):
        paths.extend(os.path.join(directory, name) for name in (*dirs, *files))
    for path in paths:
        st = os.lstat(path)
        # A file with other links may be another path's too: it is left alone.
        if st.st_uid != SANDBOX_UID and not (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)


def finish(launch: Launch) -> None:
    if launch.scratch is not None:
        shutil.rmtree(launch.scratch, ignore_errors=True)


@functools.cache
def sandbox_problem(mode: SandboxMode) -> str | None:
    """Why programs cannot run in `mode` here, or None when they can. The sandbox is tried
    once per process and mode (a command that must succeed), so call this at startup."""
    if mode == "none":
        return None
    if mode == "bwrap" and shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="nua-probe-") as probe:
        sandbox = Sandbox(mode)
        prepare(sandbox, Path(probe))
        launch = confine(sandbox, Path(probe), ["/bin/true"], {"PATH": "/usr/bin:/bin"})
        try:
            done = subprocess.run(
                launch.argv,
                env=launch.env,
                cwd=probe,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{_NAMES[mode]} cannot start: {exc}"
        finally:
            finish(launch)
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        why = detail[-1] if detail else f"exit {done.returncode}"
        return f"{_NAMES[mode]} cannot start: {why}"
    return None


_NAMES = {"bwrap": "bubblewrap", "landlock": "Landlock", "none": "none"}


def choose_sandbox(requested: str) -> SandboxMode:
    """The mode `requested` names; `auto` is bubblewrap where it starts, else Landlock
    where it confines, else bubblewrap (whose problem then says what to install)."""
    if requested in ("bwrap", "landlock", "none"):
        return requested  # type: ignore[return-value]
    if requested != "auto":
        raise ValueError(f"unknown sandbox {requested!r}")
    if sandbox_problem("bwrap") is None:
        return "bwrap"
    return "landlock" if sandbox_problem("landlock") is None else "bwrap"


def describe_sandbox(mode: SandboxMode) -> str:
    """One line for a startup banner: which confinement is in force."""
    if mode == "none":
        return "sandbox: NONE — shell commands and local MCP servers run unconfined"
    problem = sandbox_problem(mode)  # tried once per process; the supervisor reuses it
    if problem is not None:
        other: SandboxMode = "landlock" if mode == "bwrap" else "bwrap"
        also = sandbox_problem(other)
        more = f"; {also}" if also else ""
        return (
            f"sandbox: UNAVAILABLE ({problem}{more}) — shell commands and local MCP servers "
            "are refused; install bubblewrap, or --sandbox none runs them unconfined"
        )
    if mode == "bwrap":
        return "sandbox: bubblewrap (no network; egress through the proxy)"
    return "sandbox: Landlock + namespaces (bubblewrap not used; no network; egress via proxy)"
