"""Schemathesis over `/openapi.json` of a real `nua serve` (issue 12): no 5xx, and every
status, content type, header and body the server returns is the one the spec documents.

The SSE route is excluded (a stream never ends, so there is no response to check), and so
are the AG-UI runs (a stream that lasts as long as the turn it follows: each fuzzed message
would be a turn of the demo agent; tests/protocols/test_agui.py sends them bad input);
every check schemathesis has for responses runs. Bounded examples keep it under ~60 s; for a
longer run: `schemathesis run <url>/openapi.json -H "Authorization: Bearer <token>"
--checks all --exclude-path-regex '/events$|^/v1/agui/' --max-examples 500`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._serve_proc import nua_serve

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = str(Path(__file__).resolve().parents[2])
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
]


def _schemathesis(
    url: str, token: str, checks: list[str], cwd: Path, **env: str
) -> subprocess.CompletedProcess[bytes]:
    args = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        ",".join(checks),
        "--exclude-path-regex",
        "/events$|^/v1/agui/",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "25",
        "--seed",
        "1",
        # One worker: with two, hypothesis's lambda-source cache races between threads
        # and schemathesis reports a "Runtime Error" of its own, not of the server.
        "--workers",
        "1",
        "--request-timeout",
        "10",
        "--no-color",
    ]
    hooks = {"SCHEMATHESIS_HOOKS": "tests.server._schemathesis_hooks", "PYTHONPATH": ROOT}
    return subprocess.run(
        args,
        capture_output=True,
        timeout=200,
        check=False,
        cwd=cwd,
        env={**os.environ, **hooks, **env},
    )


def _report(done: subprocess.CompletedProcess[bytes]) -> str:
    out = done.stdout.decode(errors="replace")
    # The ERRORS/FAILURES sections come before the summary: keep both ends of a long report.
    return out if len(out) <= 30_000 else f"{out[:20_000]}\n[…]\n{out[-10_000:]}"


@pytest.mark.timeout(240)
def test_the_api_matches_its_openapi_document(tmp_path: Path) -> None:
    with nua_serve(tmp_path / "data") as served:
        done = _schemathesis(served.url, served.token, CHECKS, tmp_path)
    assert done.returncode == 0, _report(done)


@pytest.mark.timeout(300)
def test_another_workspaces_member_reads_nothing_and_breaks_nothing(tmp_path: Path) -> None:
    """Every generated request names workspace A's objects, sent with a member of B."""
    leaks = tmp_path / "leaks.txt"
    leaks.touch()
    with nua_serve(tmp_path / "data") as served, served.client() as owner:
        me = owner.get("/v1/whoami").json()
        a = me["workspaces"][0]["workspace_id"]
        sid = owner.post("/v1/sessions", json={"title": "secret"}).json()["session_id"]
        sent = owner.post(
            f"/v1/sessions/{sid}/messages",
            json={"content": [{"type": "text", "text": "write the report"}]},
        ).json()
        mallory = owner.post("/v1/users", json={"name": "mallory"}).json()
        bearer = {"Authorization": f"Bearer {mallory['token']}"}
        b = owner.post("/v1/workspaces", json={"name": "b"}, headers=bearer).json()
        # B's owner is a server admin too, so nothing of A's names eve (her `created_by`).
        owner.put(f"/v1/admins/{mallory['principal_id']}").raise_for_status()
        eve = owner.post("/v1/users", json={"name": "eve"}, headers=bearer).json()
        owner.put(
            f"/v1/workspaces/{b['workspace_id']}/members/{eve['principal_id']}",
            json={"role": "member"},
            headers=bearer,
        ).raise_for_status()
        subscription = owner.post(
            "/v1/subscriptions",
            json={"url": "https://example.org/hooks", "events": ["turn.ended"]},
        ).json()["subscription_id"]
        foreign = {
            "subscription_id": subscription,
            "workspace_id": a,
            "session_id": sid,
            "execution_id": sent["execution_id"],
            "turn_id": sent["turn_id"],
            "principal_id": me["principal_id"],
        }
        done = _schemathesis(
            served.url,
            eve["token"],
            ["not_a_server_error"],
            tmp_path,
            NUA_FUZZ_FOREIGN=json.dumps(foreign),
            NUA_FUZZ_LEAKS=str(leaks),
        )
        title = owner.get(f"/v1/sessions/{sid}").json()["state"]["title"]
        kept = owner.get(f"/v1/subscriptions/{subscription}").status_code
    assert done.returncode == 0, _report(done)
    assert leaks.read_text() == "", "a member of B read A's objects:\n" + leaks.read_text()
    assert title == "secret", "a member of B changed A's session"
    assert kept == 200, "a member of B deleted A's subscription"
