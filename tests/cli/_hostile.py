"""Hostile text for the CLI's tests: the escape sequences issue 12 (bug 5) names, the
hidden command of bug 4, and a checker that finds any of them in what reached a terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

# ESC[8m hidden text, an OSC 8 link, an OSC 52 clipboard write, ESC[2J, a C1 CSI, a BEL,
# a bidi override and a carriage return that would overwrite the line.
PAYLOAD = (
    "\x1b[8mhidden\x1b[0m \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ "
    "\x1b]52;c;ZXZpbA==\x07 \x1b[2J\x9b31m\x07 \u202eevil\r"
)
HIDDEN_COMMAND = "wc -l notes.md" + " " * 220 + "; cat ../../token > stolen.txt"

# What Rich itself writes to a terminal: SGR styles, and the Live footer's cursor moves.
_RICH_CSI = re.compile(r"\x1b\[(\??[0-9;]*)([mABCDGKhl])")
_C1 = re.compile(r"[\x80-\x9f]")


def _sgr_conceals(params: str) -> bool:
    """Whether an SGR sequence sets conceal (8), reading 38/48 colour arguments as such."""
    values = [int(p) if p else 0 for p in params.split(";")]
    index = 0
    while index < len(values):
        value = values[index]
        if value in (38, 48, 58):
            index += 3 if values[index + 1 : index + 2] == [5] else 5
            continue
        if value == 8:
            return True
        index += 1
    return False


def injected(output: str, *, terminal: bool = False) -> list[str]:
    """Control sequences in `output` that Rich did not write: each one came from a payload.

    Piped output may hold no ESC at all; on a terminal only Rich's own styles and cursor
    moves are allowed (never conceal, a screen clear, OSC, DCS or a BEL).
    """
    found: list[str] = []
    rest = output
    if terminal:
        for match in _RICH_CSI.finditer(output):
            params, final = match.groups()
            if final == "m" and _sgr_conceals(params):
                found.append(match.group())
            if final in "hl" and params not in ("?25", "?1049", "?2004"):
                found.append(match.group())
        rest = _RICH_CSI.sub("", output)
        rest = rest.replace("\r", "")  # the Live footer returns to the line's start
    found += re.findall(r"\x1b.{0,6}", rest)
    found += [c for c in ("\x07", "\r", "\u202e") if c in rest]
    found += _C1.findall(rest)
    return found


def run_in_pty(
    args: list[str],
    env: dict[str, str],
    *,
    answers: dict[str, str] | None = None,
    timeout: float = 60,
) -> tuple[int, str]:
    """Run `args` on a pseudo-terminal (stdin, stdout and stderr), typing `answers[marker]`
    once `marker` has appeared; return the exit code and everything the terminal received."""
    pending = dict(answers or {})
    leader, follower = pty.openpty()
    # A wide window: what wraps where is not what these tests look at.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
    proc = subprocess.Popen(
        args, env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True
    )
    os.close(follower)
    received = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the other side closed: the process is gone
                    break
                if not chunk:
                    break
                received += chunk
                text = received.decode("utf-8", "replace")
                for marker in [m for m in pending if m in text]:
                    os.write(leader, pending.pop(marker).encode())
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"{args} did not finish in {timeout}s:\n{received.decode()}")
        return proc.wait(10), received.decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(leader)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(output: str) -> str:
    """Terminal output without Rich's own styles and cursor moves, and without CRs."""
    return _ANSI.sub("", output).replace("\r", "")
