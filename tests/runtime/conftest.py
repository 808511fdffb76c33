from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from opennua.runtime import sandbox_problem


@pytest.fixture(autouse=True)
def _no_demo_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A bubblewrap that cannot start (as where user namespaces are forbidden)."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    sandbox_problem.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        sandbox_problem.cache_clear()
