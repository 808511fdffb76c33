"""Writes the conformance matrix (`test_matrix_*.py`) to docs/conformance.md at the end of
a run that ran any of its cells: ✓ or ✗ per cell, a ✗ with the first line of what failed.

Under xdist the cells run on several workers: each report carries its cell
(`user_properties`) to the controller, which alone writes the page.

Only the part between the two markers is rewritten; the rest of the page is prose. A cell
that did not run in this run keeps no stale mark: it reads "–".
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"
MODULES = "tests/conformance/test_matrix_"

_cells: dict[tuple[str, str], str] = {}


def _first_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(crash.message if crash is not None else report.longrepr)
    line = text.strip().splitlines()[0] if text.strip() else "failed"
    return line.replace("|", "\\|")[:160]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not item.nodeid.startswith(MODULES) or not hasattr(item, "callspec"):
        return
    mark = None
    if report.failed:
        mark = f"✗ {_first_line(report)}"
    elif report.skipped:
        mark = "skipped"
    elif report.when == "call" and report.passed:
        driver = item.funcargs.get("driver")  # type: ignore[attr-defined]
        note = getattr(driver, "partial", {}).get(item.originalname)  # type: ignore[attr-defined]
        mark = f"✓ (partial: {note})" if note else "✓"
    if mark is not None:
        cell = [item.originalname, item.callspec.id, mark]  # type: ignore[attr-defined]
        report.user_properties.append(("matrix_cell", cell))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name != "matrix_cell":
            continue
        test, column, mark = value
        # A failure wins over what another phase said; "skipped" never replaces a result.
        if mark == "skipped" and (test, column) in _cells:
            continue
        if _cells.get((test, column), "").startswith("✗"):
            continue
        _cells[(test, column)] = mark


def render(cells: dict[tuple[str, str], str]) -> str:
    from tests.conformance._matrix import COLUMNS, ROWS

    header = "| scenario | " + " | ".join(name for name, _, _ in COLUMNS.values()) + " |"
    lines = [header, "|---" * (len(COLUMNS) + 1) + "|"]
    for test, row in ROWS.items():
        marks = [cells.get((test, column), "–") for column in COLUMNS]
        lines.append(f"| {row} | " + " | ".join(marks) + " |")
    return "\n".join(lines)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller writes the page
    if not _cells or not PAGE.exists():
        return
    page = PAGE.read_text()
    if START not in page or END not in page:
        return
    before, rest = page.split(START, 1)
    after = rest.split(END, 1)[1]
    PAGE.write_text(f"{before}{START}\n{render(_cells)}\n{END}{after}")
