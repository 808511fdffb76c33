from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_demo_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")
