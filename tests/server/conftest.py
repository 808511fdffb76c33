from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ._harness import Env, environment


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/nua.db"
    try:
        import opennua.store._postgres  # noqa: F401
    except ImportError:
        pytest.skip("the PostgreSQL backend is not in this tree yet")
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def env(store_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    async with environment(store_url, tmp_path) as e:
        yield e
