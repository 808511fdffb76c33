"""`nua plugin …`, `nua deploy`, `nua deployments`, `nua deployment show`, `nua run
--deployment` against a real `nua serve`; refusals with their documented exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests._support.polling import wait_for

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

    # A credential travels only through the gateway: on a local (stdio) server it would be
    # shown and never sent, so it is refused, and the message says what to use instead.
    local = nua(
        "deploy", "notes", "--plugin", "notes-helper", "--model", "scripted:demo",
        "--credential", "notes=notes-token",
    )  # fmt: skip
    assert local.exit_code == 7 and "notes is a local (stdio) server" in local.output
    assert "--sandbox-secret notes:ENV=notes-token" in local.output
    # `--tool SERVER=COMMAND …` starts a local server with another command.
    other = nua(
        "deploy", "notes-alt", "--plugin", "notes-helper", "--model", "scripted:demo",
        "--tool", "notes=python3 -u '${PLUGIN_ROOT}/servers/notes.py' --verbose", "--json",
    )  # fmt: skip
    assert other.exit_code == 0, other.output
    assert json.loads(other.output)["spec"]["tools"] == {
        "notes": {
            "command": "python3",
            "args": ["-u", "${PLUGIN_ROOT}/servers/notes.py", "--verbose"],
        }
    }
    unquoted = nua(
        "deploy", "x", "--plugin", "notes-helper", "--model", "m:x", "--tool", "notes='a"
    )
    assert unquoted.exit_code != 0 and "--tool" in unquoted.output

    args = (
        "deploy", "notes", "--plugin", "notes-helper", "--model", "scripted:demo",
        "--sandbox-secret", "notes:NOTES_TOKEN=notes-token", "--confirm-sandbox-exposure",
        "--max-steps", "40", "--json",
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
    assert "notes: NOTES_TOKEN <- secret notes-token" in detail.output
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
    assert missing.exit_code == 7 and "empty is empty" in missing.output
    bad = tmp_path / "bad"
    (bad / ".claude-plugin").mkdir(parents=True)
    (bad / ".claude-plugin/plugin.json").write_text('{"name": "bad", "version": "one"}')
    result = nua("plugin", "publish", str(bad))
    assert result.exit_code == 7
    assert ".claude-plugin/plugin.json:1: error: version 'one' is not a semantic" in result.output
    (bad / ".claude-plugin/plugin.json").write_text('{"name": "bad", "version": "1.0.0"}')
    (bad / "leak").symlink_to("/etc/passwd")
    leaked = nua("plugin", "validate", str(bad))
    assert leaked.exit_code == 7 and "leak: error: symlink points outside" in leaked.output
    assert nua("plugin", "versions", "no-such-plugin").exit_code == 3
    nowhere = nua("deploy", "x", "--plugin", "no-such-plugin", "--model", "scripted:demo")
    assert nowhere.exit_code == 4 and "deployment_unresolvable" in nowhere.output
    assert nua("deployment", "show", "no-such").exit_code == 3
    unknown = nua("run", "--deployment", "no-such", "--detach", "hi")
    assert unknown.exit_code == 3 and "no deployment named" in unknown.output


FIXTURES = Path(__file__).parent.parent / "plugins" / "fixtures"


def test_validate_prints_every_problem_with_severity_and_location(nua: Nua, tmp_path: Path) -> None:
    root = tmp_path / "as-published"
    shutil.copytree(FIXTURES / "as_published", root)
    checked = nua("plugin", "validate", str(root))
    assert checked.exit_code == 0, checked.output
    lines = checked.output.splitlines()
    assert lines[0].startswith("as-published@0.0.0+") and ": ok (" in lines[0]
    # The servers whose tools are renamed or which need a URL, then one problem a line.
    assert "server 'google calendar': tools named google_calendar_2__*" in lines
    assert "skills/digest/SKILL.md:3: warning: front matter is not strict YAML" in checked.output
    assert "output-styles/: ignored: output styles shape" in checked.output
    assert lines[-1] == "7 warnings, 6 ignored"
    as_json = json.loads(nua("plugin", "validate", str(root), "--json").output)
    assert as_json["valid"] and len(as_json["problems"]) == 13
    assert {"name": "paypal", "prefix": "paypal", "transport": "sse", "configured": True} in (
        as_json["servers"]
    )
    # Errors: every one of them (not only the first), then a summary; exit 7.
    (root / ".mcp.json").write_text('{"a": {"type": "ws", "url": "x"}, "b": {"command": 1}}')
    (root / "agents" / "x.md").write_text("no front matter\n")
    refused = nua("plugin", "validate", str(root))
    assert refused.exit_code == 7
    assert "agents/x.md:1: error: missing YAML front matter" in refused.output
    assert ".mcp.json:1: error: server 'a': type 'ws' is not one of" in refused.output
    assert ".mcp.json:1: error: server 'b': command must be a string" in refused.output
    assert refused.output.splitlines()[-1].startswith("error: invalid plugin: 3 errors, ")
    failed = nua("plugin", "validate", str(root), "--json")
    doc = json.loads(failed.output)
    assert failed.exit_code == 7 and not doc["valid"]
    assert [p["severity"] for p in doc["problems"]].count("error") == 3


def test_publish_without_a_version_and_show_say_what_needs_configuring(
    nua: Nua, tmp_path: Path
) -> None:
    root = tmp_path / "cal-helper"
    shutil.copytree(FIXTURES / "as_published", root)
    (root / ".claude-plugin" / "plugin.json").unlink()  # no manifest: named after DIR
    published = nua("plugin", "publish", str(root))
    assert published.exit_code == 0, published.output
    first = published.output.splitlines()[0]
    assert first.startswith("published cal-helper@0.0.0+")
    assert "named 'cal-helper' after its directory" in published.output
    version = first.split()[1].partition("@")[2]
    pinned = nua("plugin", "publish", str(root), "--version", "1.0.0")
    assert pinned.exit_code == 0 and "published cal-helper@1.0.0" in pinned.output
    bad = nua("plugin", "publish", str(root), "--version", "one")
    assert bad.exit_code == 7 and "'one' is not a semantic version" in bad.output
    shown = nua("plugin", "show", f"cal-helper@{version}")
    assert shown.exit_code == 0, shown.output
    assert "server 'google calendar': tools named google_calendar_2__*" in shown.output
    assert ".mcp.json:2: warning: server 'google calendar' has no URL" in shown.output


def test_publish_a_marketplace_publishes_each_local_plugin_with_a_summary(
    nua: Nua, tmp_path: Path
) -> None:
    root = tmp_path / "market"
    shutil.copytree(FIXTURES / "marketplace", root)
    result = nua("plugin", "publish", "--marketplace", str(root))
    assert result.exit_code == 7, result.output  # one plugin failed
    lines = result.output.splitlines()
    assert lines[0].startswith("published notes@0.0.0+")
    assert lines[1].startswith("published bare@2.0.0 ")  # the entry's version stands in
    assert lines[1].endswith("(1 warning)")
    assert lines[2].startswith("failed broken: .mcp.json:1: error: server 'ws': type")
    assert lines[2].endswith("(2 errors)")
    assert lines[3].startswith("skipped remote: github source example/remote-plugin")
    assert lines[4].startswith("skipped subdir: git-subdir source")
    assert lines[5] == "2 published, 0 already published, 2 skipped, 1 failed"
    # Fixed, again: what was published is already, and the exit is 0.
    (root / "plugins" / "broken" / ".mcp.json").write_text('{"ws": {"command": "x"}}')
    again = nua("plugin", "publish", "--marketplace", str(root))
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[-1] == (
        "1 published, 2 already published, 2 skipped, 0 failed"
    )
    assert nua("plugin", "publish").exit_code == 2  # a DIR or --marketplace
    both = nua("plugin", "publish", "--marketplace", str(root), "--version", "1.0.0")
    assert both.exit_code == 2
    assert nua("plugin", "publish", "--marketplace", str(tmp_path)).exit_code == 7


def test_a_plugins_slash_command_runs_from_nua_run_and_an_unknown_one_is_refused(
    nua: Nua, tmp_path: Path
) -> None:
    root = tmp_path / "reviewer"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin/plugin.json").write_text('{"name": "reviewer", "version": "1.0.0"}')
    (root / "commands").mkdir()
    (root / "commands/review-pr.md").write_text(
        "---\ndescription: Review a pull request\nargument-hint: PR\n---\nReview #$1.\n"
    )
    assert nua("plugin", "publish", str(root)).exit_code == 0
    shown = nua("plugin", "show", "reviewer")
    assert "command /review-pr PR: Review a pull request" in shown.output
    deployed = nua(
        "deploy", "review", "--plugin", "reviewer", "--version", "1.0.0", "--model", "scripted:demo"
    )
    assert deployed.exit_code == 0, deployed.output

    ran = nua("run", "--deployment", "review", "--detach", "/review-pr", "123")
    assert ran.exit_code == 0, ran.output
    sid = _session_id(ran.output)
    # The runtime expanded it and ran: the turn gets to the model (the demo's script).
    turn = wait_for(
        lambda: next(
            (t for t in nua.state(sid)["turns"] if t["state"] not in ("queued", "running")), None
        ),
        timeout=30,
    )
    assert turn["error"] is None, turn["error"]
    assert turn["messages"][turn["user_message_id"]]["text"] == "/review-pr 123"

    refused = nua("run", "--deployment", "review", "--detach", "/nope")
    assert refused.exit_code == 7
    assert "unknown_command" in refused.output and "its commands: /review-pr" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
