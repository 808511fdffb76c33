"""`glob` and `grep`: read-only, confined to the workspace, bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opennua.runtime._errors import ToolError
from opennua.runtime._search import MAX_RESULTS, glob_files, glob_regex, grep_files


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\nTODO: one\n")
    (ws / "src" / "pkg" / "b.py").write_text("todo: two\nnothing\n")
    (ws / "src" / "pkg" / "c.ts").write_text("const todo = 3;\n")
    (ws / "README.md").write_text("# readme\n")
    (ws / "blob.bin").write_bytes(b"\0TODO binary")
    (ws / "node_modules" / "x").mkdir(parents=True)
    (ws / "node_modules" / "x" / "d.py").write_text("TODO vendored\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("TODO secret\n")
    os.symlink(outside, ws / "link-dir")
    os.symlink(outside / "secret.py", ws / "link.py")
    return ws


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "src/pkg/b.py", True),
        ("**/*.py", "a.py", True),
        ("src/*.py", "src/pkg/b.py", False),
        ("src/**", "src/pkg/c.ts", True),
        ("*.{py,ts}", "c.ts", True),
        ("[!a]*.py", "a.py", False),
        ("?.py", "b.py", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is matches


def test_glob_lists_files_by_pattern_and_not_what_a_symlink_reaches(workspace: Path) -> None:
    assert glob_files(workspace, "**/*.py").splitlines() == ["src/a.py", "src/pkg/b.py"]
    assert glob_files(workspace, "*.py", "src/pkg") == "src/pkg/b.py"
    assert glob_files(workspace, "*.nothing") == "(no files match)"


@pytest.mark.parametrize("path", ["..", "../outside", "/etc", "link-dir", "src/../.."])
def test_search_refuses_paths_out_of_the_workspace(workspace: Path, path: str) -> None:
    with pytest.raises(ToolError):
        glob_files(workspace, "*", path)
    with pytest.raises(ToolError):
        grep_files(workspace, "TODO", path)


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "src/../../*"])
def test_glob_refuses_patterns_that_leave_the_workspace(workspace: Path, pattern: str) -> None:
    with pytest.raises(ToolError, match="relative to the workspace"):
        glob_files(workspace, pattern)


def test_grep_modes_case_and_file_filter(workspace: Path) -> None:
    assert grep_files(workspace, "TODO").splitlines() == ["src/a.py"]
    assert grep_files(workspace, "todo", ignore_case=True).splitlines() == [
        "src/a.py",
        "src/pkg/b.py",
        "src/pkg/c.ts",
    ]
    assert grep_files(workspace, "todo", glob="*.py", ignore_case=True, output="count") == (
        "src/a.py:1\nsrc/pkg/b.py:1"
    )
    assert grep_files(workspace, "^todo", output="content") == "src/pkg/b.py:1:todo: two"
    # Never: a binary file, a vendored directory, a symlink out of the workspace.
    assert grep_files(workspace, "secret|binary|vendored") == "(no matches)"


def test_grep_refuses_a_bad_regex(workspace: Path) -> None:
    with pytest.raises(ToolError, match="not a regular expression"):
        grep_files(workspace, "(")


def test_output_is_bounded(workspace: Path) -> None:
    many = workspace / "many"
    many.mkdir()
    for i in range(MAX_RESULTS + 50):
        (many / f"f{i:04}.txt").write_text("hit\n")
    listed = glob_files(workspace, "many/*.txt").splitlines()
    assert len(listed) == MAX_RESULTS + 1 and listed[-1].startswith("… more files")
    found = grep_files(workspace, "hit", "many").splitlines()
    assert len(found) == MAX_RESULTS + 1 and found[-1].startswith("… more files")
