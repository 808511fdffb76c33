"""Blobs follow an execution to another machine (issue 17): a task runs on one `nua serve`
and publishes an artifact; a second `nua serve` with a data directory of its own and the
same PostgreSQL database serves the artifact's bytes, read from the
database itself, or from a real S3-compatible server."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests._support.polling import wait_for
from tests.e2e._proc import Server
from tests.store._s3_server import CREDENTIALS, make_bucket, s3_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(180)]


def _state(client: httpx.Client, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()["state"]
    return state


def _run_the_demo(server: Server) -> tuple[str, dict[str, Any]]:
    with server.client() as client:
        sid = client.post("/v1/sessions", json={"client_id": "cli_t"}).json()["session_id"]
        client.post(
            f"/v1/sessions/{sid}/messages",
            json={"client_id": "cli_t", "content": [{"type": "text", "text": "report"}]},
        )
        opened = wait_for(lambda: _state(client, sid)["open_input_requests"], timeout=60)
        client.post(
            f"/v1/sessions/{sid}/input-requests/{opened[0]['request_id']}/answer",
            json={"client_id": "cli_t", "option_id": "allow_once"},
        )
        wait_for(lambda: _state(client, sid)["turns"][0]["state"] == "ended", timeout=90)
        return sid, _state(client, sid)


@pytest.mark.parametrize("backend", ["database", "s3"])
def test_a_second_machine_serves_what_the_first_stored(
    backend: str, pg_url: str, tmp_path: Path
) -> None:
    with s3_server() as endpoint:
        blobs = None
        if backend == "s3":
            make_bucket(endpoint, "nua-e2e")
            blobs = f"s3://nua-e2e/team?endpoint_url={endpoint}"
        env = CREDENTIALS if backend == "s3" else {}
        for machine in ("a", "b"):
            (tmp_path / machine).mkdir()
        first = Server(tmp_path / "a", db=pg_url, step_delay="0", blobs=blobs, env=env).start()
        try:
            _, state = _run_the_demo(first)
        finally:
            first.stop()
        turn = state["turns"][0]
        assert turn["stop_reason"] == "end_turn", turn["error"]
        (artifact,) = state["artifacts"].values()
        assert not (tmp_path / "a" / "blobs").exists()  # nothing kept on machine a's disk

        # One PostgreSQL, one set of principals and secrets: machine b's operator uses the
        # token the first host registered (docs/auth.md) and the same secret key
        # (docs/secrets.md: processes on one database share it), not ones of its own.
        for name in ("token", "secret.key"):
            (tmp_path / "b" / name).write_bytes((tmp_path / "a" / name).read_bytes())
            (tmp_path / "b" / name).chmod(0o600)
        second = Server(tmp_path / "b", db=pg_url, blobs=blobs, env=env).start()
        try:
            with second.client() as client:
                content = client.get(f"/v1/artifacts/{artifact['artifact_id']}/content")
                assert content.status_code == 200, content.text
                meta = client.get(f"/v1/artifacts/{artifact['artifact_id']}").json()
                assert hashlib.sha256(content.content).hexdigest() == meta["sha256"]
                assert len(content.content) == meta["size"] > 0
        finally:
            second.stop()
        if backend == "s3":
            s3 = boto3.client("s3", endpoint_url=endpoint, **_credentials())
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket="nua-e2e")["Contents"]]
            s3.close()
            assert f"team/sha256/{meta['sha256'][:2]}/{meta['sha256'][2:]}" in keys


def _credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }
