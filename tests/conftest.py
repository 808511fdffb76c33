"""Shared fixtures: a private PostgreSQL database per test, and the rule for skipping it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest

from tests._pgdb import scratch_database

PG_ADMIN_URL = os.environ.get("NUA_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opennua simulation (tests/sim)")
    group.addoption(
        "--sim-seed", type=int, default=None, help="replay this one seed of the simulation"
    )
    group.addoption(
        "--sim-seeds", type=int, default=1000, help="how many seeds the simulation runs"
    )


def _pg_answers() -> bool:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The admin URL of the test server. In CI a missing server fails; elsewhere it skips."""
    if not _pg_answers():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but PostgreSQL does not answer at {PG_ADMIN_URL}")
        pytest.skip(f"PostgreSQL does not answer at {PG_ADMIN_URL} and CI is unset: skipping")
    return PG_ADMIN_URL


#: A fixture that starts an outside program, and the marker a test using it must carry, so
#: that `-m "not postgres and not browser"` starts neither.
NEEDS_MARKER = {"pg_admin_url": "postgres", "pg_url": "postgres", "browser": "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses one of NEEDS_MARKER's fixtures without its marker is an error."""
    unmarked = [
        f"{item.nodeid} uses {fixture} but is not marked {marker}"
        for item in items
        for fixture, marker in NEEDS_MARKER.items()
        if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("\n".join(unmarked))


@pytest.fixture
def pg_url(pg_admin_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards. A test reaching it through
    `request.getfixturevalue` escapes the collection check, so it is checked here too."""
    if request.node.get_closest_marker("postgres") is None:
        pytest.fail(f"{request.node.nodeid} uses PostgreSQL but is not marked postgres")
    with scratch_database(pg_admin_url, f"nua_test_{os.getpid()}") as url:
        yield url


@pytest.fixture(autouse=True, scope="session")
def _no_real_model_requests() -> Iterator[None]:
    """No test may reach a real model provider: pydantic-ai refuses every request to one."""
    import pydantic_ai.models

    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    try:
        yield
    finally:
        pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous
