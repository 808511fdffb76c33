"""The first program in the sandbox: limits, identity, the proxy's forwarder, then `exec`.

It is run by the host's Python as `python -I -S -c <this file> <config JSON>` (standard
library only: no site packages, no opennua), under bubblewrap or on its own for the
Landlock backend, and replaces itself with the command. In order:

1. (Landlock) new user, network and PID namespaces: the network namespace has only its
   own loopback; the PID namespace dies with its first process, so nothing started in it
   outlives the command;
2. (bubblewrap run as root) become the unprivileged sandbox user, so the kernel's limit
   on processes applies (it exempts uid 0) and nothing runs as root;
3. change into the workspace; resource limits (address space, processes, file size, CPU
   time);
4. (Landlock) the file-system rules: read-only system paths, the workspace and a scratch
   directory writable, nothing else (the data directory is not among them);
5. with an egress proxy: a forwarder from 127.0.0.1:PORT in the sandbox's network
   namespace to the proxy's Unix socket (what `socat TCP-LISTEN:PORT
   UNIX-CONNECT:SOCKET` does in Anthropic's sandbox-runtime), so ordinary clients reach
   it through `HTTP_PROXY`; it runs before step 6, since it needs Unix sockets;
6. (Landlock) a seccomp filter refusing new Unix sockets (a path-named socket of the host,
   such as PostgreSQL's, is not behind the network namespace) and io_uring;
7. `exec` the command.

A step that fails ends the launch with exit status 125 and one line on stderr.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import selectors
import signal
import socket
import stat
import struct
import sys
from typing import Any

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long

CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 38, 22
_LIMITS = {
    "address_space": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "file_size": resource.RLIMIT_FSIZE,
    "cpu_seconds": resource.RLIMIT_CPU,
}


class LaunchError(Exception):
    pass


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    landlock = config.get("landlock")
    try:
        if landlock is not None:
            _enter_namespaces(landlock["uid"], landlock["gid"])
        if config.get("setuid") is not None:
            uid, gid = config["setuid"]
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        os.chdir(config["cwd"])
        for name, value in config["limits"].items():
            if value is not None:
                # CPU time: SIGXCPU at the limit (a clear status, 152), SIGKILL a second on.
                hard = value + 1 if name == "cpu_seconds" else value
                resource.setrlimit(_LIMITS[name], (value, hard))
        if landlock is not None:
            _restrict(landlock)
        if config.get("proxy") is not None:
            _start_forwarder(config["proxy"], config["port"], drop=landlock is not None)
        if landlock is not None:
            _deny_new_unix_sockets()
    except (LaunchError, OSError, ValueError) as exc:
        _fail(f"{type(exc).__name__}: {exc}" if not isinstance(exc, LaunchError) else str(exc))
    argv = config["argv"]
    # Python ignores these two; a program expects them as every shell leaves them.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"nua-sandbox: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(127)


def _fail(message: str) -> None:
    print(f"nua-sandbox: {message}", file=sys.stderr, flush=True)
    os._exit(125)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise LaunchError(f"{what}: {os.strerror(err)}")
    return result


# -- namespaces (the Landlock backend) -------------------------------------------------


def _enter_namespaces(inside_uid: int, inside_gid: int) -> None:
    uid, gid = os.getuid(), os.getgid()
    _check(_LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID), "new namespaces")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside_uid} {uid} 1")
    _write("/proc/self/gid_map", f"{inside_gid} {gid} 1")
    _loopback_up()
    alive_read, alive_write = os.pipe()
    pid = os.fork()
    if pid:
        # Outside the new PID namespace: wait for its first process, end as it ended. Killed,
        # this process takes the namespace with it (its child's parent-death signal).
        os.close(alive_read)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    os.close(alive_write)
    _check(_LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
    os.set_blocking(alive_read, False)
    try:
        if os.read(alive_read, 1) == b"":
            os._exit(137)  # the parent was killed before the signal was armed
    except BlockingIOError:
        pass
    os.close(alive_read)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))


# -- Landlock --------------------------------------------------------------------------

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture


def _restrict(config: dict[str, Any]) -> None:
    abi = _LIBC.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        raise LaunchError(f"Landlock is not available: {os.strerror(ctypes.get_errno())}")
    handled = (1 << 13) - 1  # ABI 1: execute … make_sym
    handled |= _REFER if abi >= 2 else 0
    handled |= _TRUNCATE if abi >= 3 else 0
    handled |= _IOCTL_DEV if abi >= 5 else 0
    if abi >= 6:  # no signals to, no abstract sockets of, processes outside the sandbox
        attr = struct.pack("QQQ", handled, 0, 0x1 | 0x2)
    else:
        attr = struct.pack("QQ", handled, 0) if abi >= 4 else struct.pack("Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(
        _LIBC.syscall(_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)),
        "Landlock ruleset",
    )
    read = _EXECUTE | _READ_FILE | _READ_DIR
    for path in config["read"]:
        _allow(ruleset, path, read & handled)
    for path in config["write"]:
        _allow(ruleset, path, handled)
    for path in config["devices"]:
        _allow(ruleset, path, (_READ_FILE | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV) & handled)
    _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    _check(_LIBC.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)), "Landlock restriction")
    os.close(ruleset)


def _allow(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # e.g. /lib32 on a system without it
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS  # directory rights on a file are refused (EINVAL)
        attr = struct.pack("=Qi", access, fd)
        buffer = ctypes.create_string_buffer(attr, len(attr))
        _check(
            _LIBC.syscall(_ADD_RULE, ruleset, ctypes.c_int(1), buffer, ctypes.c_uint32(0)),
            f"Landlock rule for {path}",
        )
    finally:
        os.close(fd)


# -- seccomp (the Landlock backend) ---------------------------------------------------

_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # audit arch, socket()


def _deny_new_unix_sockets() -> None:
    machine = os.uname().machine
    if machine not in _ARCHES:
        raise LaunchError(f"no seccomp filter for {machine}")
    audit_arch, nr_socket = _ARCHES[machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, errno_ = 0x7FFF0000, 0x00050000
    program = [
        (ld, 0, 0, 4),  # 0: the architecture
        (jeq, 1, 0, audit_arch),  # 1: ours → 3
        (ret, 0, 0, 0x80000000),  # 2: another one: kill the process
        (ld, 0, 0, 0),  # 3: the system call number
        (jge, 6, 0, 0x40000000),  # 4: x32 → 11
        (jeq, 6, 0, 425),  # 5: io_uring_setup (it creates sockets unseen) → 12
        (jeq, 1, 0, nr_socket),  # 6: socket() → 8
        (ret, 0, 0, allow),  # 7
        (ld, 0, 0, 16),  # 8: its first argument, the address family
        (jeq, 3, 0, socket.AF_UNIX),  # 9: a Unix socket → 13
        (ret, 0, 0, allow),  # 10
        (ret, 0, 0, errno_ | 1),  # 11: EPERM
        (ret, 0, 0, errno_ | 38),  # 12: ENOSYS
        (ret, 0, 0, errno_ | 13),  # 13: EACCES
    ]
    filters = b"".join(struct.pack("HBBI", *entry) for entry in program)
    code = ctypes.create_string_buffer(filters, len(filters))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program), ctypes.cast(code, ctypes.c_void_p))
    _check(_LIBC.prctl(PR_SET_SECCOMP, 2, ctypes.byref(prog), 0, 0), "seccomp filter")


# -- the forwarder to the egress proxy ---------------------------------------------------


def _start_forwarder(path: str, port: int, *, drop: bool) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))  # before the command starts: no race to connect
    listener.listen(64)
    if os.fork() == 0:
        try:
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):  # the command's output pipe must not stay open here
                os.dup2(null, fd)
            if drop:  # the capabilities of the sandbox's user namespace
                header = ctypes.create_string_buffer(struct.pack("II", 0x20080522, 0), 8)
                _LIBC.capset(header, ctypes.create_string_buffer(24))
            _forward(listener, path)
        finally:
            os._exit(0)
    listener.close()


_CHUNK = 256 * 1024


class _Pair:
    """A sandbox connection and its proxy connection; `pending[i]` waits to go to `socks[i]`."""

    def __init__(self, a: socket.socket, b: socket.socket) -> None:
        self.socks = (a, b)
        self.pending = [b"", b""]
        self.ended = [False, False]  # socks[i] sent its end
        self.registered = [False, False]


def _forward(listener: socket.socket, path: str) -> None:
    selector = selectors.DefaultSelector()
    listener.setblocking(False)
    selector.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, events in selector.select():
            if key.data is None:
                _accept(selector, listener, path)
                continue
            pair, i = key.data
            try:
                _step(pair, i, events)
            except OSError:
                pair.ended = [True, True]
                pair.pending = [b"", b""]
            _update(selector, pair)


def _accept(selector: selectors.BaseSelector, listener: socket.socket, path: str) -> None:
    try:
        client, _ = listener.accept()
    except BlockingIOError:
        return
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        client.close()
        proxy.close()
        return
    # Small writes go at once (a CONNECT's answer, then the first request after it).
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setblocking(False)
    proxy.setblocking(False)
    _update(selector, _Pair(client, proxy))


def _step(pair: _Pair, i: int, events: int) -> None:
    other = 1 - i
    if events & selectors.EVENT_READ:
        data = pair.socks[i].recv(_CHUNK)
        if data:
            pair.pending[other] += data
        else:
            pair.ended[i] = True
            if not pair.pending[other]:
                pair.socks[other].shutdown(socket.SHUT_WR)
    if events & selectors.EVENT_WRITE and pair.pending[i]:
        sent = pair.socks[i].send(pair.pending[i])
        pair.pending[i] = pair.pending[i][sent:]
        if not pair.pending[i] and pair.ended[other]:
            pair.socks[i].shutdown(socket.SHUT_WR)


def _update(selector: selectors.BaseSelector, pair: _Pair) -> None:
    done = all(pair.ended) and not any(pair.pending)
    for i, sock in enumerate(pair.socks):
        events = 0
        if not done:
            if not pair.ended[i] and not pair.pending[1 - i]:
                events |= selectors.EVENT_READ  # read only what the other side can take
            if pair.pending[i]:
                events |= selectors.EVENT_WRITE
        if events and pair.registered[i]:
            selector.modify(sock, events, (pair, i))
        elif events:
            selector.register(sock, events, (pair, i))
            pair.registered[i] = True
        elif pair.registered[i]:
            selector.unregister(sock)
            pair.registered[i] = False
    if done:
        for sock in pair.socks:
            sock.close()


if __name__ == "__main__":
    main()
