"""File tools on hostile workspaces: FIFOs, devices, sockets, hard links, bad names.

Each refusal is a clean `ToolError` that names the path as the agent gave it (never a host
path), returned promptly while the event loop keeps running other tasks.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opennua.runtime import Completed, Tool, ToolContext, ToolError, default_agent
from opennua.runtime._builtins import edit_file, list_files, read_file, write_file
from opennua.runtime._tools import MemoryArtifacts
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop


def _ctx(workdir: Path) -> ToolContext:
    return ToolContext(
        workdir=workdir,
        run_id="run_x",
        tool_call_id="call_x",
        idempotency_key="call_x",
        artifacts=MemoryArtifacts(),
        cancel=asyncio.Event(),
    )


async def _call(tool: Tool, workdir: Path, **args: object) -> object:
    """The tool as the loop calls it (sync and async tools alike)."""
    return await tool.call(_ctx(workdir), dict(args))


@contextmanager
def _ticking() -> Iterator[list[float]]:
    """A task that notes the time every 10 ms: gaps show a blocked event loop."""
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    task = asyncio.get_running_loop().create_task(tick())
    try:
        yield ticks
    finally:
        task.cancel()


def _special(ws: Path, kind: str) -> str:
    name = f"special-{kind}"
    if kind == "fifo":
        os.mkfifo(ws / name)
    elif kind == "socket":
        cwd = os.getcwd()
        os.chdir(ws)  # a socket's path must fit in 108 bytes
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.bind(name)  # the socket file outlives the socket
        finally:
            os.chdir(cwd)
    else:
        os.mknod(ws / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    return name


# Making a device node needs root (CI runs as root); the other kinds need nothing.
KINDS = ["fifo", "socket"] + (["device"] if os.geteuid() == 0 else [])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.timeout(20)
async def test_special_files_are_refused_promptly_and_the_loop_keeps_running(
    tmp_path: Path, kind: str
) -> None:
    name = _special(tmp_path, kind)
    calls = [
        (read_file, {"path": name}),
        (write_file, {"path": name, "content": "x"}),
        (edit_file, {"path": name, "old": "a", "new": "b"}),
    ]
    with _ticking() as ticks:
        await asyncio.sleep(0.03)
        for tool, args in calls:
            started = time.monotonic()
            with pytest.raises(ToolError, match="not a regular file") as err:
                await asyncio.wait_for(_call(tool, tmp_path, **args), 5)
            assert time.monotonic() - started < 2, tool.name
            assert str(tmp_path) not in err.value.message
        await asyncio.sleep(0.03)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 5 and max(gaps) < 0.5  # the loop never stopped


async def test_a_fifo_cannot_freeze_a_turn(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    agent = default_agent("scripted:test")
    model = ScriptedModel(
        [ScriptStep(calls=(call("write_file", path="p", content="hello"),)), say("ok")]
    )
    with _ticking() as ticks:
        outcome, journal, _ = await asyncio.wait_for(
            drive(lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "x"), 10
        )
    assert isinstance(outcome, Completed) and len(ticks) > 0
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.status == "failed" and result.error.code == "tool_error"  # type: ignore[attr-defined]
    assert "named pipe" in result.error.message  # type: ignore[attr-defined]
    assert str(tmp_path) not in result.error.message  # type: ignore[attr-defined]


async def test_a_hard_link_is_not_a_way_out(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "token").write_text("s3cret")
    os.link(outside / "token", ws / "t")
    for tool, args in [
        (read_file, {"path": "t"}),
        (write_file, {"path": "t", "content": "pwned"}),
        (edit_file, {"path": "t", "old": "s3cret", "new": "pwned"}),
    ]:
        with pytest.raises(ToolError, match="hard links") as err:
            await _call(tool, ws, **args)
        assert "s3cret" not in err.value.message and str(tmp_path) not in err.value.message
    assert (outside / "token").read_text() == "s3cret"


async def test_symlinks_inside_the_workspace_work_and_out_of_it_do_not(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("s3cret")
    (ws / "real.txt").write_text("inside")
    (ws / "alias.txt").symlink_to("real.txt")
    (ws / "out").symlink_to(outside / "secret")
    (ws / "dir").symlink_to(outside)
    assert await _call(read_file, ws, path="alias.txt") == "inside"
    await _call(write_file, ws, path="alias.txt", content="changed")
    assert (ws / "real.txt").read_text() == "changed" and (ws / "alias.txt").is_symlink()
    for path in ("out", "dir/secret", "dir/new.txt"):
        for tool, args in [(read_file, {}), (write_file, {"content": "x"})]:
            with pytest.raises(ToolError, match="outside the workspace"):
                await _call(tool, ws, path=path, **args)
    assert not (outside / "new.txt").exists() and (outside / "secret").read_text() == "s3cret"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("a\x00b", "NUL byte"),
        ("x" * 300, "longer than 255 bytes"),
        ("d/" + "x" * 256 + "/f", "longer than 255 bytes"),
        ("a/" * 2100 + "f", "longer than 4096 bytes"),
        ("d", "is a directory"),
        (".", "is a directory"),
        ("f.txt/inner", "not a directory"),
        ("missing/f.txt", "no such file"),
        ("bad\udc80name", "not valid Unicode"),
    ],
)
async def test_bad_paths_give_clean_errors_without_host_paths(
    tmp_path: Path, path: str, message: str
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f.txt").write_text("text")
    host_paths = (str(tmp_path), str(tmp_path.parent))
    tools = [(read_file, {}), (edit_file, {"old": "a", "new": "b"})]
    if message != "no such file":  # writing creates missing directories
        tools.append((write_file, {"content": "x"}))
    for tool, args in tools:
        with pytest.raises(ToolError, match=message) as err:
            await _call(tool, tmp_path, path=path, **args)
        assert not any(p in err.value.message for p in host_paths)
        assert len(err.value.message) < 400


async def test_writing_creates_directories_and_lists_without_following_links(
    tmp_path: Path,
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "hidden").write_text("x")
    (ws / "link").symlink_to(outside)
    assert await _call(write_file, ws, path="a/b/c.txt", content="deep") == (
        "Wrote 4 bytes to a/b/c.txt."
    )
    assert (ws / "a" / "b" / "c.txt").read_text() == "deep"
    listing = await _call(list_files, ws)
    assert listing == "a/\na/b/\na/b/c.txt\nlink/"
    assert "hidden" not in str(listing)
    with pytest.raises(ToolError, match="outside the workspace"):
        await _call(list_files, ws, path="link")
