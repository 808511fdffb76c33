"""`nua plugin …`, `nua deploy`, `nua deployments`, `nua deployment show`, `nua run
--deployment` against a real `nua serve`; refusals with their documented exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Nua


def test_init_validate_publish_release_deploy_and_run(nua: Nua, tmp_path: Path) -> None:
    root = tmp_path / "notes-helper"
    made = nua("plugin", "init", "notes-helper", "--dir", str(root))
    assert made.exit_code == 0, made.output
    for rel in ("AGENTS.md", ".claude-plugin/plugin.json", ".mcp.json", "servers/notes.py"):
        assert (root / rel).is_file(), rel
    checked = nua("plugin", "validate", str(root))
    assert checked.exit_code == 0 and "notes-helper@0.1.0: ok" in checked.output

    published = nua("plugin", "publish", str(root), "--json")
    assert published.exit_code == 0, published.output
    version = json.loads(published.output)
    assert version["created"] and version["version"] == "0.1.0"
    again = nua("plugin", "publish", str(root))
    assert again.exit_code == 0 and "already published notes-helper@0.1.0" in again.output

    # Same version, other content: refused as a conflict, nothing changes.
    (root / "AGENTS.md").write_text("Changed.\n")
    clash = nua("plugin", "publish", str(root))
    assert clash.exit_code == 4 and "version_exists" in clash.output
    manifest = root / ".claude-plugin/plugin.json"
    manifest.write_text(manifest.read_text().replace('"0.1.0"', '"0.2.0"'))
    assert nua("plugin", "publish", str(root)).exit_code == 0

    assert nua("plugin", "release", "notes-helper", "0.1.0", "--channel", "stable").exit_code == 0
    assert nua("plugin", "release", "notes-helper", "0.2.0").exit_code == 0
    rolled = nua("plugin", "rollback", "notes-helper")
    assert rolled.exit_code == 0 and "-> 0.1.0" in rolled.output
    listed = nua("plugin", "versions", "notes-helper")
    assert listed.exit_code == 0
    assert "0.1.0" in listed.output and "rollback" in listed.output
    shown = nua("plugin", "show", "notes-helper@0.1.0")
    assert shown.exit_code == 0 and "servers/notes.py" in shown.output

    args = (
        "deploy", "notes", "--plugin", "notes-helper", "--model", "scripted:demo",
        "--credential", "notes=notes-token", "--max-steps", "40", "--json",
    )  # fmt: skip
    missing = nua(*args)
    assert missing.exit_code == 7 and "secret_missing" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    assert nua("secret", "set", "notes-token", input="v\n").exit_code == 0
    deployed = nua(*args)
    assert deployed.exit_code == 0, deployed.output
    digest = json.loads(deployed.output)["digest"]
    assert "notes" in nua("deployments").output
    detail = nua("deployment", "show", "notes")
    assert detail.exit_code == 0
    assert "notes: Authorization <- secret notes-token" in detail.output
    assert "max_steps=40" in detail.output
    assert digest in detail.output

    ran = nua("run", "--deployment", "notes", "--detach", "hello")
    assert ran.exit_code == 0, ran.output
    sid = _session_id(ran.output)
    state = nua.state(sid)
    assert state["plugin"]["name"] == "notes-helper" and state["plugin"]["version"] == "0.1.0"
    assert state["deployment"] == "notes"
    short = state["snapshot_digest"].removeprefix("sha256:")[:12]
    shown_session = nua("show", sid)
    assert shown_session.exit_code == 0
    assert f"notes-helper@0.1.0 · deployment notes · model scripted:demo · snapshot {short}" in (
        shown_session.output
    )
    row = next(line for line in nua("sessions").output.splitlines() if sid in line)
    assert "notes-helper@0.1.0" in row and short in row


def _session_id(output: str) -> str:
    return next(word for word in output.split() if word.startswith("ses_"))


def test_bad_plugins_and_deployments_fail_with_one_line_and_their_exit_code(
    nua: Nua, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = nua("plugin", "validate", str(empty))
    assert missing.exit_code == 7 and ".claude-plugin/plugin.json" in missing.output
    bad = tmp_path / "bad"
    (bad / ".claude-plugin").mkdir(parents=True)
    (bad / ".claude-plugin/plugin.json").write_text('{"name": "bad", "version": "one"}')
    result = nua("plugin", "publish", str(bad))
    assert result.exit_code == 7
    assert ".claude-plugin/plugin.json:1: version 'one' is not a semantic version" in result.output
    (bad / ".claude-plugin/plugin.json").write_text('{"name": "bad", "version": "1.0.0"}')
    (bad / "leak").symlink_to("/etc/passwd")
    leaked = nua("plugin", "validate", str(bad))
    assert leaked.exit_code == 7 and "leak: symlink points outside" in leaked.output
    assert nua("plugin", "versions", "no-such-plugin").exit_code == 3
    nowhere = nua("deploy", "x", "--plugin", "no-such-plugin", "--model", "scripted:demo")
    assert nowhere.exit_code == 4 and "deployment_unresolvable" in nowhere.output
    assert nua("deployment", "show", "no-such").exit_code == 3
    unknown = nua("run", "--deployment", "no-such", "--detach", "hi")
    assert unknown.exit_code == 3 and "no deployment named" in unknown.output
