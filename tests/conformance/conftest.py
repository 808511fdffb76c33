"""Writes the conformance matrix (`test_matrix.py`) to docs/conformance.md at the end of a
run that ran any of its cells: ✓ or ✗ per cell, a ✗ with the first line of what failed.

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
MODULE = "tests/conformance/test_matrix.py"

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
    if not item.nodeid.startswith(MODULE) or not hasattr(item, "callspec"):
        return
    key = (item.originalname, item.callspec.id)  # type: ignore[attr-defined]
    if report.failed:
        _cells[key] = f"✗ {_first_line(report)}"
    elif report.skipped and key not in _cells:
        _cells[key] = "skipped"
    elif report.when == "call" and report.passed:
        driver = item.funcargs.get("driver")  # type: ignore[attr-defined]
        note = getattr(driver, "partial", {}).get(item.originalname)  # type: ignore[attr-defined]
        _cells[key] = f"✓ (partial: {note})" if note else "✓"


def render(cells: dict[tuple[str, str], str]) -> str:
    from tests.conformance.test_matrix import COLUMNS, ROWS

    header = "| scenario | " + " | ".join(name for name, _, _ in COLUMNS.values()) + " |"
    lines = [header, "|---" * (len(COLUMNS) + 1) + "|"]
    for test, row in ROWS.items():
        marks = [cells.get((test, column), "–") for column in COLUMNS]
        lines.append(f"| {row} | " + " | ".join(marks) + " |")
    return "\n".join(lines)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _cells or not PAGE.exists():
        return
    page = PAGE.read_text()
    if START not in page or END not in page:
        return
    before, rest = page.split(START, 1)
    after = rest.split(END, 1)[1]
    PAGE.write_text(f"{before}{START}\n{render(_cells)}\n{END}{after}")
