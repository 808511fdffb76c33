"""`nua secret set|list|delete|rotate-key` against real `nua serve` processes: a value goes
in through stdin and never comes out (not in output, not in an API answer, not in the
database file); a wrong key stops the server at startup with one clear line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from opennua.cli._context import ExitCode
from opennua.secrets import KEY_ENV, SecretKey, open_secret_store
from opennua.store import open_store
from tests.e2e._proc import Server

from .conftest import Nua

CANARY = "canary-7d1e0b5c-secret-cli-93a4"


def test_set_list_delete_never_show_the_value(nua: Nua) -> None:
    saved = nua("secret", "set", "notes-token", "--json", input=CANARY + "\n")
    assert saved.exit_code == 0, saved.output
    assert json.loads(saved.output)["name"] == "notes-token" and CANARY not in saved.output
    listed = nua("secret", "list", "--json")
    assert listed.exit_code == 0, listed.output
    [item] = [json.loads(line) for line in listed.output.splitlines()]
    assert item["name"] == "notes-token" and item["last_used_at"] is None
    assert set(item) == {"name", "created_at", "updated_at", "last_used_at"}
    human = nua("secret", "list")
    assert "notes-token" in human.output and "never used" in human.output
    with nua.http() as http:
        answered = http.get("/v1/secrets")
        assert answered.status_code == 200 and CANARY not in answered.text
        put = http.put("/v1/secrets/other", json={"value": CANARY})
        assert put.status_code == 200 and CANARY not in put.text
        bad = http.put("/v1/secrets/bad%20name", json={"value": "x"})
        assert bad.status_code == 422 and bad.headers["content-type"].startswith(
            "application/problem+json"
        )
        assert http.put("/v1/secrets/other", json={"value": ""}).status_code == 422
    # The value is sealed in the database file.
    assert CANARY.encode() not in (nua.server.data / "nua.db").read_bytes()

    empty = nua("secret", "set", "empty", input="")
    assert empty.exit_code == ExitCode.USAGE and "no value" in empty.output
    assert nua("secret", "delete", "notes-token").exit_code == 0
    gone = nua("secret", "delete", "notes-token")
    assert gone.exit_code == ExitCode.NOT_FOUND, gone.output
    assert nua("secret", "delete", "other").exit_code == 0


def test_a_value_is_never_taken_from_argv(nua: Nua) -> None:
    # There is no VALUE argument: an extra argument is a usage error, not a secret.
    result = nua("secret", "set", "notes-token", CANARY)
    assert result.exit_code == ExitCode.USAGE
    assert CANARY not in nua("secret", "list").output


def _secret(data: Path, name: str, env: dict[str, str]) -> str:
    async def read() -> str:
        async with await open_store(f"sqlite:///{data}/nua.db", data_dir=data) as store:
            secrets = await open_secret_store(store, data, env)
            workspace = (await store.list_workspaces())[0].workspace_id
            return await secrets.get(workspace, name)

    return asyncio.run(read())


def test_rotate_key_then_a_wrong_key_is_a_startup_error(tmp_path: Path) -> None:
    data = tmp_path
    server = Server(data).start()
    try:
        with server.client() as http:
            assert http.put("/v1/secrets/gh", json={"value": CANARY}).status_code == 200
    finally:
        server.stop()
    old_key = (data / "secret.key").read_text()
    nua = Nua(server)
    rotated = nua("secret", "rotate-key")
    assert rotated.exit_code == 0, rotated.output
    assert "re-encrypted 1 secret" in rotated.output
    assert (data / "secret.key").read_text() != old_key
    assert _secret(data, "gh", {}) == CANARY

    # The server starts on the rotated key file; a wrong NUA_SECRET_KEY stops it at once.
    Server(data).start().stop()
    wrong = SecretKey.generate().encoded()
    done = subprocess.run(
        [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data), "--port", "0"],
        env={**_env(), KEY_ENV: wrong},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 78, done
    err = done.stderr.decode()
    assert "NUA_SECRET_KEY" in err and "not the key this store" in err
    assert "Traceback" not in err and wrong not in err and len(err.strip().splitlines()) == 1
    malformed = subprocess.run(
        [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data), "--port", "0"],
        env={**_env(), KEY_ENV: "short"},
        capture_output=True,
        timeout=120,
    )
    assert malformed.returncode == 78 and b"32 bytes" in malformed.stderr


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != KEY_ENV}
