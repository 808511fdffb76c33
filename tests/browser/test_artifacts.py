"""Artifacts and file changes in the web UI (issue 17): the blob store refusing writes when
the demo publishes its report leaves a completed turn with a *failed* artifact — the card
says so, and so do the CLI and a reload (history) — the card's retry publishes it, and the
download is a single-use link: opened once by the browser, 410 after. The file the demo
wrote shows its diff, live and after a reload."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from tests._support.polling import wait_for
from tests.browser._ui import (
    nua,
    open_request,
    open_session,
    server_state,
    start_demo,
    ui_state_json,
    wait_converged,
)
from tests.e2e._proc import Server

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_failed_upload_is_shown_retried_and_downloaded_once(
    ui: Callable[..., Page], server: Server
) -> None:
    sid = start_demo(server)
    page = ui()
    open_session(page, server, sid)
    request_id = open_request(server, sid)
    page.click(f'[data-request-id="{request_id}"] button[data-option-id=allow_once]')
    # Once the sub-agent runs, every file the turn writes is committed; from now on the
    # blob directory takes no writes (its upload folder is a file: as root, a mode would
    # not stop the server), as a full or read-only disk would.
    wait_for(lambda: server_state(server, sid)["turns"][0]["workers"], timeout=30)
    uploads = server.data / "blobs" / "tmp"
    shutil.rmtree(uploads)
    uploads.write_text("not a directory")

    card = page.wait_for_selector(".artifact [data-state=failed]", timeout=30_000)
    assert "report.md: upload failed: the blob" in card.inner_text()
    final = wait_converged(page, server, sid)
    (turn,) = json.loads(final)["turns"]
    assert turn["stop_reason"] == "end_turn"
    [artifact] = json.loads(final)["artifacts"].values()
    assert artifact["state"] == "failed"
    assert page.locator(".artifact a.download").count() == 0
    shown = nua(server, "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert "▣ artifact report.md" in shown.stdout and "upload failed" in shown.stdout
    # The file change carries its diff; the card shows it, the same after a reload.
    (change,) = turn["file_changes"].values()
    notes = page.locator("[data-kind=file_change]:has-text('notes.md') pre.diff")
    assert notes.text_content() == change["diff"]
    page.reload()
    page.wait_for_selector(f'.session[data-session-id="{sid}"][data-rendered]')
    assert page.locator(".artifact [data-state=failed]").count() == 1
    assert ui_state_json(page) == final
    assert notes.text_content() == change["diff"]

    uploads.unlink()
    uploads.mkdir(mode=0o700)
    page.click(".artifact button.retry-upload")
    link = page.wait_for_selector(".artifact a.download", timeout=30_000)
    assert json.loads(ui_state_json(page))["artifacts"][artifact["artifact_id"]]["state"] == (
        "published"
    )

    with page.expect_download() as download:
        link.click()
    assert "/v1/downloads/" in download.value.url, download.value.url
    data = Path(download.value.path()).read_bytes()
    assert hashlib.sha256(data).hexdigest() == artifact["sha256"]
    # The link the browser used is spent.
    again = httpx.get(download.value.url, timeout=10)
    assert again.status_code == 410, again.text
    assert again.json()["code"] == "link_used"
    assert page.errors == []  # type: ignore[attr-defined]
