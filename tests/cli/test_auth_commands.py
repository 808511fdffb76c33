"""`nua login/whoami/workspace/user/member/agent-principal/token/usage` against a real
`nua serve`; refusals exit 8."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from opennua.cli._context import ExitCode
from opennua.cli._read import parse_since

from .conftest import Nua


def _json(result: object) -> dict:  # type: ignore[type-arg]
    output = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 0, output  # type: ignore[attr-defined]
    value: dict = json.loads(output.strip().splitlines()[-1])  # type: ignore[type-arg]
    return value


def test_people_roles_tokens_and_login(nua: Nua, tmp_path: Path) -> None:
    creds = str(tmp_path / "creds" / "credentials.json")
    me = _json(nua("whoami", "--json", NUA_CREDENTIALS=creds))
    assert me["kind"] == "user" and me["workspaces"][0]["role"] == "owner"

    team = _json(nua("workspace", "create", "team", "--json", NUA_CREDENTIALS=creds))
    listed = _json(nua("workspace", "list", "--json", NUA_CREDENTIALS=creds))
    assert team["workspace_id"] in {w["workspace_id"] for w in listed["items"]}

    alice = _json(nua("user", "add", "alice", "--json", NUA_CREDENTIALS=creds))
    assert alice["token"].startswith("nua.tok_")
    users = _json(nua("user", "list", "--json", NUA_CREDENTIALS=creds))
    assert "alice" in {u["name"] for u in users["items"]}
    added = nua(
        "member", "add", team["workspace_id"], alice["principal_id"], "--role", "viewer",
        NUA_CREDENTIALS=creds,
    )  # fmt: skip
    assert added.exit_code == 0, added.output

    # alice logs in: her token is stored for this server, 0600; whoami is now her.
    url = nua.server.url
    logged = nua("login", url, "--token", alice["token"], NUA_CREDENTIALS=creds)
    assert logged.exit_code == 0, logged.output
    assert stat.S_IMODE(Path(creds).stat().st_mode) == 0o600
    assert alice["token"] not in logged.output
    who = _json(nua("whoami", "--json", NUA_CREDENTIALS=creds))
    assert who["principal_id"] == alice["principal_id"]
    assert [w["role"] for w in who["workspaces"]] == ["viewer"]
    # A viewer may not start work: 403 → exit 8, one line saying why.
    refused = nua("run", "hello", "--detach", NUA_CREDENTIALS=creds)
    assert refused.exit_code == ExitCode.UNAUTHORIZED, refused.output
    assert "insufficient_role" in refused.output
    # NUA_TOKEN wins over the stored login.
    owner = nua.server.token
    assert _json(nua("whoami", "--json", NUA_CREDENTIALS=creds, NUA_TOKEN=owner))["name"] == (
        "owner"
    )

    # Tokens: create, list (ids only), revoke → 401 → exit 8.
    made = _json(nua("token", "create", "--name", "ci", "--json", NUA_TOKEN=owner))
    tokens = nua("token", "list", "--json", NUA_TOKEN=owner)
    assert made["token_id"] in tokens.output and made["token"] not in tokens.output
    assert nua("whoami", NUA_TOKEN=made["token"]).exit_code == 0
    assert nua("token", "revoke", made["token_id"], NUA_TOKEN=owner).exit_code == 0
    gone = nua("whoami", NUA_TOKEN=made["token"])
    assert gone.exit_code == ExitCode.UNAUTHORIZED and "token_revoked" in gone.output

    # Agent principals: their own identity; disabling one locks its token out.
    bot = _json(
        nua("agent-principal", "create", team["workspace_id"], "bot", "--json", NUA_TOKEN=owner)
    )
    bot_token = _json(
        nua("token", "create", "--principal", bot["principal_id"], "--json", NUA_TOKEN=owner)
    )
    assert _json(nua("whoami", "--json", NUA_TOKEN=bot_token["token"]))["kind"] == "agent"
    assert nua("agent-principal", "disable", bot["principal_id"], NUA_TOKEN=owner).exit_code == 0
    assert nua("whoami", NUA_TOKEN=bot_token["token"]).exit_code == ExitCode.UNAUTHORIZED

    # The owner starts work in the team workspace; alice (a viewer there) sees it listed.
    started = nua(
        "run", "hello team", "--detach", "--json", "--workspace", team["workspace_id"],
        NUA_TOKEN=owner,
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    team_sid = json.loads(started.stdout.splitlines()[-1])["session_id"]
    with nua.http() as http:
        seen = http.get(
            "/v1/sessions",
            params={"workspace_id": team["workspace_id"]},
            headers={"Authorization": f"Bearer {alice['token']}"},
        ).json()["items"]
    assert [s["session_id"] for s in seen] == [team_sid]
    removed = nua("member", "remove", team["workspace_id"], alice["principal_id"], NUA_TOKEN=owner)
    assert removed.exit_code == 0, removed.output
    assert _json(nua("whoami", "--json", NUA_CREDENTIALS=creds))["workspaces"] == []


def test_server_admins_people_and_workspace_token_revocation(nua: Nua) -> None:
    """`nua admin grant|revoke|principals`, `nua user disable`, `nua token list|revoke
    --workspace`: what only server admins may (others exit 8), and the last admin stays
    (exit 4)."""
    owner = nua.server.token
    me = _json(nua("whoami", "--json", NUA_TOKEN=owner))
    assert me["server_admin"] is True
    workspace = me["workspaces"][0]["workspace_id"]
    erin = _json(nua("user", "add", "erin", "--json", NUA_TOKEN=owner))
    frank = _json(nua("user", "add", "frank", "--json", NUA_TOKEN=owner))
    for person in (erin, frank):
        added = nua("member", "add", workspace, person["principal_id"], NUA_TOKEN=owner)
        assert added.exit_code == 0, added.output
    # Not a server admin: no people management (8).
    refused = nua("user", "add", "mallory", NUA_TOKEN=erin["token"])
    assert refused.exit_code == ExitCode.UNAUTHORIZED and "insufficient_role" in refused.output
    assert nua("admin", "principals", NUA_TOKEN=erin["token"]).exit_code == ExitCode.UNAUTHORIZED
    # Every principal, to a server admin.
    listed = nua("admin", "principals", NUA_TOKEN=owner)
    assert listed.exit_code == 0 and "erin" in listed.output and "server admin" in listed.output
    assert nua("admin", "principals", "--kind", "robot", NUA_TOKEN=owner).exit_code == (
        ExitCode.USAGE
    )
    # The last server admin stays one (4); with a second, the first may go.
    last = nua("admin", "revoke", me["principal_id"], NUA_TOKEN=owner)
    assert last.exit_code == ExitCode.CONFLICT and "last_server_admin" in last.output
    assert nua("admin", "grant", erin["principal_id"], NUA_TOKEN=owner).exit_code == 0
    assert _json(nua("whoami", "--json", NUA_TOKEN=erin["token"]))["server_admin"] is True
    assert nua("admin", "revoke", erin["principal_id"], NUA_TOKEN=owner).exit_code == 0
    # A member's token, revoked for this workspace's work: it opens nothing here.
    tokens = _json(nua("token", "list", "--workspace", workspace, "--json", NUA_TOKEN=owner))
    franks = [t for t in tokens["items"] if t["principal_id"] == frank["principal_id"]]
    revoked = nua("token", "revoke", franks[0]["token_id"], "--workspace", workspace,
                  NUA_TOKEN=owner)  # fmt: skip
    assert revoked.exit_code == 0, revoked.output
    assert _json(nua("whoami", "--json", NUA_TOKEN=frank["token"]))["workspaces"] == []
    # A person disabled everywhere: every token of theirs is refused (8).
    assert nua("user", "disable", erin["principal_id"], NUA_TOKEN=owner).exit_code == 0
    gone = nua("whoami", NUA_TOKEN=erin["token"])
    assert gone.exit_code == ExitCode.UNAUTHORIZED and "principal_disabled" in gone.output
    assert nua("user", "disable", "prn_nobody", NUA_TOKEN=owner).exit_code == ExitCode.NOT_FOUND


def test_usage_by_principal_and_show_names_principal_trigger_workload(nua: Nua) -> None:
    answering = nua.answer_when_open(title="usage-by-principal")
    ran = nua("run", "write the report", "--json", "--title", "usage-by-principal")
    answering.join(5)
    assert ran.exit_code == 0, ran.output
    sid = json.loads(ran.stdout.splitlines()[0])["session_id"]
    report = _json(nua("usage", "--by", "principal", "--since", "1h", "--json"))
    me = _json(nua("whoami", "--json"))
    by_principal = {item["key"]: item for item in report["items"]}
    assert by_principal[me["principal_id"]]["output_tokens"] > 0
    models = _json(nua("usage", "--by", "model", "--json"))
    assert any(item["key"].startswith("scripted:") for item in models["items"])
    shown = nua("show", sid)
    assert shown.exit_code == 0, shown.output
    assert f"principal {me['principal_id']}" in shown.output
    assert "trigger message by" in shown.output and "ran on sup_" in shown.output
    assert nua("usage", "--by", "nobody").exit_code == ExitCode.USAGE


def test_since_accepts_ages_dates_and_seconds() -> None:
    now = 1_800_000_000.0
    assert parse_since("30m", now) == now - 1800
    assert parse_since("2d", now) == now - 2 * 86400
    assert parse_since("1700000000", now) == 1_700_000_000.0
    assert parse_since("2026-01-01", now) == 1_767_225_600.0
