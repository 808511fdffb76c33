"""What `file.changed` carries: a unified diff for text (inline when small, else stored as a
blob and named by `diff_ref`), size and sha256 always, and for a binary file nothing else."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from opennua.protocol.actions import FileChanged
from opennua.runtime import BlobsUnavailable, ToolContext
from opennua.runtime._builtins import edit_file, write_file
from opennua.runtime._diffs import DIFF_INLINE_LIMIT
from opennua.runtime._tools import MemoryArtifacts


def _ctx(workdir: Path, artifacts: MemoryArtifacts | None = None) -> ToolContext:
    return ToolContext(
        workdir=workdir,
        run_id="run_x",
        tool_call_id="call_x",
        idempotency_key="call_x",
        artifacts=artifacts or MemoryArtifacts(),
        cancel=asyncio.Event(),
    )


def _change(ctx: ToolContext) -> FileChanged:
    (change,) = ctx.reported
    assert isinstance(change, FileChanged)
    return change


async def test_a_created_then_edited_text_file_reports_its_diffs(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    await write_file.fn(ctx, "notes.md", "one\ntwo\nthree\n")
    created = _change(ctx)
    assert (created.change, created.binary, created.diff_ref) == ("created", False, None)
    assert created.diff == "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1,3 @@\n+one\n+two\n+three\n"
    assert created.size == 14
    assert created.sha256 == hashlib.sha256(b"one\ntwo\nthree\n").hexdigest()

    ctx = _ctx(tmp_path)
    await edit_file.fn(ctx, "notes.md", "two", "TWO")
    edited = _change(ctx)
    assert edited.change == "modified"
    assert edited.diff == (
        "--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    )

    ctx = _ctx(tmp_path)
    await write_file.fn(ctx, "notes.md", "no newline")
    rewritten = _change(ctx)
    assert rewritten.change == "modified"
    assert rewritten.diff is not None
    assert rewritten.diff.endswith("+no newline\n\\ No newline at end of file\n")


async def test_a_big_diff_goes_by_reference_into_the_blob_store(tmp_path: Path) -> None:
    blobs = MemoryArtifacts()
    ctx = _ctx(tmp_path, blobs)
    content = "".join(f"line {i}\n" for i in range(5000))
    await write_file.fn(ctx, "big.txt", content)
    change = _change(ctx)
    assert change.diff is None and change.diff_ref is not None
    stored = blobs.blobs[change.diff_ref.removeprefix("sha256:")].decode()
    assert len(stored.encode()) > DIFF_INLINE_LIMIT
    assert stored.startswith("--- /dev/null\n+++ b/big.txt\n") and "+line 4999\n" in stored
    assert change.size == len(content)


class _Refusing(MemoryArtifacts):
    async def put(self, data: bytes, *, name: str, media_type: str) -> str:
        raise BlobsUnavailable("the blob store does not answer")


async def test_a_big_diff_the_blob_store_refuses_still_reports_the_change(
    tmp_path: Path,
) -> None:
    ctx = _ctx(tmp_path, _Refusing())
    await write_file.fn(ctx, "big.txt", "x\n" * 10_000)
    change = _change(ctx)
    assert (change.diff, change.diff_ref, change.size) == (None, None, 20_000)
    assert (tmp_path / "big.txt").read_text() == "x\n" * 10_000


async def test_a_binary_file_reports_size_and_sha256_only(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    ctx = _ctx(tmp_path)
    await write_file.fn(ctx, "blob.bin", "now text\n")  # was binary: no diff of bytes
    change = _change(ctx)
    assert (change.binary, change.diff, change.diff_ref) == (True, None, None)
    assert change.size == 9 and change.sha256 == hashlib.sha256(b"now text\n").hexdigest()
    ctx = _ctx(tmp_path)
    await write_file.fn(ctx, "nul.txt", "a\x00b")
    assert _change(ctx).binary and _change(ctx).diff is None
