"""In a real browser (Playwright + Debian's Chromium): a person submits feedback with an
attachment on the public form → a reviewer logs in and dispatches it once → the draft
arrives by delivery, citing an existing ticket → the reviewer edits it, accepts the
suggested link and publishes → the submitter's page shows the reply. Then the same flow
with `nua serve` killed (`kill -9`) mid-investigation and the desk killed while the
result's delivery is pending: still one execution, one draft, one reply.

`FEEDBACK_DESK_SCREENSHOT=path.png` saves the review page (docs/feedback-desk-review.png).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import PASSWORD, Stack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

CHROMIUM = os.environ.get("NUA_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def browser() -> Iterator[Any]:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but Chromium is not installed")
        pytest.skip("no Chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


def _submit(page: Any, stack: Stack, attachment: Path) -> str:
    """The public form filled and sent; the submitter's private page."""
    page.goto(stack.desk.url + "/")
    page.fill("#title", "CSV export crashes on a big report")
    page.fill("#body", "Export > CSV crashes on our report with 40,000 rows. jo@ex.example")
    page.fill("#email", "jo@ex.example")
    page.set_input_files("#attachment", str(attachment))
    page.click("button[type=submit]")
    page.wait_for_url("**/t/*")
    assert "a person will answer here" in page.content()
    url: str = page.url
    return url


def _log_in(page: Any, stack: Stack) -> None:
    page.goto(stack.desk.url + "/desk")
    page.fill("#username", "reviewer")
    page.fill("#password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/desk")


def _wait_for_draft(page: Any) -> None:
    def draft_ready() -> bool:
        page.reload()
        return page.locator("[data-status='draft ready']").count() == 1

    wait_for(draft_ready, timeout=150, what="the draft on the review page")


def test_submit_review_publish_in_a_browser(stack: Stack, browser: Any, tmp_path: Path) -> None:
    log = tmp_path / "export.log"
    log.write_text("10:00:07 ERROR csv writer failed: buffer overflow\n")
    submitter = browser.new_context().new_page()
    reviewer = browser.new_context(viewport={"width": 1100, "height": 1400}).new_page()
    try:
        public_url = _submit(submitter, stack, log)
        _log_in(reviewer, stack)
        ticket_id = reviewer.locator("tbody tr").first.locator("a").inner_text()
        assert "not dispatched" in reviewer.locator("tbody tr").first.inner_text()
        reviewer.click(f"a[href='/desk/{ticket_id}']")
        reviewer.click("#dispatch")
        reviewer.wait_for_url(f"**/desk/{ticket_id}")

        _wait_for_draft(reviewer)
        assert "turn.ended" in {e["type"] for e in stack.events()}  # it came by delivery
        executions = stack.db.all("SELECT execution_id FROM dispatches")
        assert len(executions) == 1  # dispatched once
        evidence = reviewer.locator("ul.evidence").inner_text()
        assert "T-1001" in evidence and "ERROR csv writer failed" in evidence
        assert reviewer.locator("fieldset.link[data-ticket='T-1001']").count() == 1
        assert "jo@ex.example" not in reviewer.locator("details pre").inner_text()
        if shot := os.environ.get("FEEDBACK_DESK_SCREENSHOT"):
            reviewer.screenshot(path=shot, full_page=True)

        reviewer.check("input[name='link:T-1001'][value='accept']")
        reply = "Thanks! Large CSV exports fail; please use Scheduled export until the fix."
        reviewer.fill("#reply-1", reply)
        submitter.reload()
        assert reply not in submitter.content()  # nothing public before the person acts
        reviewer.click("#publish-1")
        reviewer.wait_for_selector("p.published")
        assert reviewer.locator("input[name='link:T-1001'][value='accept']").is_checked()

        submitter.goto(public_url)
        assert submitter.locator("blockquote.reply").inner_text() == reply
    finally:
        submitter.context.close()
        reviewer.context.close()


def test_kill9_mid_investigation_and_a_desk_restart_in_a_browser(
    browser: Any, tmp_path: Path
) -> None:
    log = tmp_path / "export.log"
    log.write_text("10:00:07 ERROR csv writer failed: buffer overflow\n")
    (tmp_path / "stack").mkdir()
    stack = Stack(tmp_path / "stack", model_delay=1.0)
    submitter = browser.new_context().new_page()
    reviewer = browser.new_context(viewport={"width": 1100, "height": 1400}).new_page()
    try:
        public_url = _submit(submitter, stack, log)
        _log_in(reviewer, stack)
        ticket_id = reviewer.locator("tbody tr").first.locator("a").inner_text()
        reviewer.click(f"a[href='/desk/{ticket_id}']")
        reviewer.click("#dispatch")
        reviewer.wait_for_url(f"**/desk/{ticket_id}")

        # Mid-investigation: the model has been asked, the turn has not ended.
        wait_for(lambda: stack.model.requests, timeout=60, what="the first model request")
        stack.server.kill9()
        before = len(stack.model.requests)
        stack.server.start()  # the execution resumes once its lease (2 s) expired

        def resumed_with_evidence() -> bool:
            later = stack.model.requests[before:]
            return any(m["role"] == "tool" for r in later for m in r["messages"])

        wait_for(resumed_with_evidence, timeout=120, what="the resumed attempt's answer request")
        stack.desk.kill9()  # the result is delivered to a desk that is down
        wait_for(stack.pending_result, timeout=120, what="turn.ended pending at the desk")
        stack.desk.start()

        reviewer.goto(f"{stack.desk.url}/desk/{ticket_id}")  # the login is the desk's own
        _wait_for_draft(reviewer)
        assert "T-1001" in reviewer.locator("ul.evidence").inner_text()
        executions = stack.db.all("SELECT execution_id FROM dispatches")
        assert len(executions) == 1  # dispatched once, across both kills
        with stack.opennua() as nua_http:
            session = stack.db.all("SELECT session_id FROM dispatches")[0]["session_id"]
            state = nua_http.get(f"/v1/sessions/{session}").json()["state"]
        assert [t["execution_id"] for t in state["turns"]] == [executions[0]["execution_id"]]
        assert len(state["turns"][0]["attempts"]) >= 2  # resumed by a new attempt

        reply = "Thanks! Large CSV exports fail; please use Scheduled export until the fix."
        reviewer.fill("#reply-1", reply)
        reviewer.click("#publish-1")
        reviewer.wait_for_selector("p.published")
        submitter.goto(public_url)
        assert submitter.locator("blockquote.reply").all_inner_texts() == [reply]  # one reply
        with stack.reviewer() as http:
            assert len(http.get(f"/api/tickets/{ticket_id}").json()["replies"]) == 1
    finally:
        submitter.context.close()
        reviewer.context.close()
        stack.close()
