"""axe-core in the page under test, and keyboard reachability.

axe-core is pinned in tests/browser/package.json; `.ci/run` installs it (`npm ci
--prefix tests/browser`). It is evaluated through the DevTools protocol, which the
page's CSP (script-src 'self') does not govern: the page itself is not changed."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

AXE = Path(__file__).with_name("node_modules") / "axe-core" / "axe.min.js"


@cache
def _source() -> str:
    if not AXE.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but axe-core is not installed at {AXE} (npm ci)")
        pytest.skip("axe-core is not installed: npm ci --prefix tests/browser")
    return AXE.read_text()


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """What axe finds (WCAG 2.x A and AA rules) of impact serious or critical."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(f"() => {{ {_source()}\n}}")
    found: list[dict[str, Any]] = page.evaluate(
        """async () => {
            const result = await window.axe.run(document, {
                runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
            });
            return result.violations
                .filter((v) => v.impact === "serious" || v.impact === "critical")
                .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                               nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
        }"""
    )
    return found


def reach_by_keyboard(page: Page, selector: str, presses: int = 120) -> bool:
    """Tab from the top of the page until the element `selector` (a Playwright selector)
    names has focus (False if it never does)."""
    target = page.wait_for_selector(selector)
    assert target is not None
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
    for _ in range(presses):
        page.keyboard.press("Tab")
        if target.evaluate("e => e === document.activeElement"):
            return True
    return False
