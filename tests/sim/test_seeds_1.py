"""The simulation's seeds ≡ 1 (mod 4); tests/sim/_seeds.py says why they are split."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._seeds import MARKS, keeps_every_invariant

pytestmark = MARKS


def test_every_seeded_world_keeps_every_invariant(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    keeps_every_invariant(request.config, 1, tmp_path)
