"""Workspace manifests (supervisor/_workspace.py): commit, restore on an empty disk, only
the changed files stored again, lost changes named, and nothing planted in one workspace
points out of the workspace it is restored into."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opennua.store import BlobCorrupted, FileBlobStore
from opennua.supervisor._workspace import Workspace


def _blob_files(root: Path) -> set[str]:
    return {p.name for p in (root / "sha256").rglob("*") if p.is_file()}


def _machine(tmp_path: Path, name: str, blobs: FileBlobStore) -> Workspace:
    root = tmp_path / name / "ws"
    root.mkdir(parents=True)
    return Workspace(root, tmp_path / name / "index.json", blobs)


async def test_a_commit_restores_on_an_empty_disk(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    a = _machine(tmp_path, "a", blobs)
    (a.root / "notes.md").write_text("# Notes\n")
    (a.root / "src" / "deep").mkdir(parents=True)
    (a.root / "src" / "deep" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(a.root / "src" / "deep" / "run.sh", 0o755)
    (a.root / "empty.bin").write_bytes(b"")
    manifest = await a.commit()
    assert manifest.files == 3 and manifest.bytes == 8 + 18

    b = _machine(tmp_path, "b", blobs)
    restored, lost, written = await b.restore(manifest.sha256 or "")
    assert (restored, lost, written) == (manifest, [], 3)
    assert (b.root / "notes.md").read_text() == "# Notes\n"
    assert (b.root / "src" / "deep" / "run.sh").stat().st_mode & 0o111
    assert not (b.root / "notes.md").stat().st_mode & 0o111
    assert (b.root / "empty.bin").read_bytes() == b""
    # Restoring what is already there writes nothing and loses nothing, not even the index
    # (a next attempt on the same disk, the common case).
    index = tmp_path / "b" / "index.json"
    saved = index.stat().st_ino
    again = Workspace(b.root, index, blobs)  # a new attempt's, as the supervisor makes one
    assert await again.restore(manifest.sha256 or "") == (manifest, [], 0)
    assert index.stat().st_ino == saved
    assert (await again.commit()).sha256 == manifest.sha256


async def test_only_what_changed_is_stored_again(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = _machine(tmp_path, "a", blobs)
    for i in range(50):
        (ws.root / f"file{i}.txt").write_text(f"content {i}\n")
    first = await ws.commit()
    before = _blob_files(tmp_path / "blobs")
    assert len(before) == 50 + 1  # the files and the manifest
    assert (await ws.commit()).sha256 == first.sha256  # nothing changed: the same manifest
    (ws.root / "file7.txt").write_text("changed\n")
    second = await ws.commit()
    added = _blob_files(tmp_path / "blobs") - before
    assert second.sha256 != first.sha256
    assert len(added) == 2  # the changed file and the new manifest, nothing else


async def test_uncommitted_changes_are_lost_and_named(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = _machine(tmp_path, "a", blobs)
    (ws.root / "kept.txt").write_text("committed\n")
    (ws.root / "edited.txt").write_text("committed\n")
    manifest = await ws.commit()
    (ws.root / "edited.txt").write_text("written after the commit\n")
    (ws.root / "new.txt").write_text("never committed\n")
    (ws.root / "kept.txt").unlink()
    restored, lost, written = await ws.restore(manifest.sha256 or "")
    assert lost == ["edited.txt", "new.txt"]
    assert written == 2  # edited.txt back to its committed bytes, kept.txt back at all
    assert (ws.root / "edited.txt").read_text() == "committed\n"
    assert (ws.root / "kept.txt").read_text() == "committed\n"
    assert not (ws.root / "new.txt").exists()
    assert restored == manifest


async def test_links_planted_in_one_workspace_point_nowhere_after_a_restore(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host secret\n")
    blobs = FileBlobStore(tmp_path / "blobs")
    a = _machine(tmp_path, "a", blobs)
    (a.root / "escape").symlink_to(outside / "secret")
    (a.root / "escape_dir").symlink_to(outside)
    os.link(outside / "secret", a.root / "hardlink")  # a hard link to a host file
    manifest = await a.commit()
    assert manifest.files == 1  # the hard link's bytes; symlinks are not workspace files

    b = _machine(tmp_path, "b", blobs)
    # Machine b has a planted directory symlink where the manifest has a real directory.
    (b.root / "sub").symlink_to(outside)
    (a.root / "sub").mkdir()
    (a.root / "sub" / "secret").write_text("workspace copy\n")
    manifest = await a.commit()
    await b.restore(manifest.sha256 or "")
    assert not (b.root / "escape").exists() and not (b.root / "escape_dir").exists()
    assert (b.root / "hardlink").stat().st_nlink == 1  # a file of its own
    assert (b.root / "hardlink").stat().st_ino != (outside / "secret").stat().st_ino
    assert not (b.root / "sub").is_symlink()
    assert (b.root / "sub" / "secret").read_text() == "workspace copy\n"
    assert (outside / "secret").read_text() == "host secret\n"  # never written through


async def test_a_corrupted_manifest_is_refused_not_half_restored(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    ws = _machine(tmp_path, "a", blobs)
    (ws.root / "a.txt").write_text("a\n")
    manifest = await ws.commit()
    blobs.path(manifest.sha256 or "").write_bytes(b"{}")
    (ws.root / "a.txt").write_text("local\n")
    with pytest.raises(BlobCorrupted):
        await ws.restore(manifest.sha256 or "")
    assert (ws.root / "a.txt").read_text() == "local\n"
