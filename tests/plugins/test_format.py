"""The plugin format: a Claude Code layout reads as is; every bad input is a PluginError
naming the file (and line); the digest covers paths, bytes and the executable bit only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from opennua.plugins import (
    MAX_FILE_BYTES,
    PluginError,
    builtin_plugin_root,
    read_plugin,
    scaffold_plugin,
)

FIXTURE = Path(__file__).parent / "fixtures" / "claude_layout"


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "writer"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _error(path: Path, **given: str) -> PluginError:
    with pytest.raises(PluginError) as info:
        read_plugin(path, **given)
    return info.value


def test_the_claude_code_layout_reads_as_is(plugin_dir: Path) -> None:
    plugin = read_plugin(plugin_dir)
    assert (plugin.name, plugin.version) == ("writer", "1.2.0")
    assert plugin.description.startswith("Writes release notes")
    assert [s.name for s in plugin.skills] == ["glossary", "release-notes"]
    notes = plugin.skill("release-notes")
    assert notes is not None
    assert notes.resources == ("template.md",)
    assert notes.allowed_tools == ("Read", "Grep")
    assert notes.body.startswith("# Release notes")
    glossary = plugin.skill("glossary")
    assert glossary is not None and glossary.resources == ("terms/list.md",)
    (reviewer,) = plugin.agents
    assert (reviewer.name, reviewer.tools, reviewer.model) == (
        "reviewer",
        ("read_file", "notes__lookup"),
        None,  # inherit
    )
    assert reviewer.instructions == "You review release notes. Reply with remarks only.\n"
    (server,) = plugin.mcp_servers
    assert (server.name, server.command) == ("notes", "python3")
    assert server.args == ("${PLUGIN_ROOT}/servers/notes.py", "${PLUGIN_ROOT}")
    assert plugin.settings.instructions.startswith("You write release notes.")
    policy = plugin.settings.access
    assert policy.allows("notes__lookup") and not policy.allows("notes__secret")
    assert policy.needs_approval("notes__erase") and not policy.needs_approval("notes__lookup")
    (notes_command,) = plugin.commands
    assert (notes_command.name, notes_command.path) == ("notes", "commands/notes.md")
    assert plugin.hooks == ()
    assert plugin.problems == ()  # commands and hooks run; the manifest says nothing else


def test_files_list_path_exec_bit_size_and_sha256(plugin_dir: Path) -> None:
    (plugin_dir / "servers" / "notes.py").chmod(0o755)
    files = {f.path: f for f in read_plugin(plugin_dir).files}
    assert list(files) == sorted(files)
    server = files["servers/notes.py"]
    assert server.executable and not files["AGENTS.md"].executable
    assert server.size == (plugin_dir / "servers" / "notes.py").stat().st_size
    assert len(server.sha256) == 64


def test_the_digest_covers_bytes_paths_and_the_exec_bit_not_mtimes(plugin_dir: Path) -> None:
    first = read_plugin(plugin_dir).digest
    assert first.startswith("sha256:")
    os.utime(plugin_dir / "AGENTS.md", (0, 0))
    assert read_plugin(plugin_dir).digest == first
    (plugin_dir / "servers" / "notes.py").chmod(0o755)
    executable = read_plugin(plugin_dir).digest
    assert executable != first
    (plugin_dir / "AGENTS.md").write_text("Other instructions.\n")
    assert read_plugin(plugin_dir).digest not in (first, executable)
    (plugin_dir / "servers" / "notes.py").rename(plugin_dir / "servers" / "other.py")
    assert read_plugin(plugin_dir).digest not in (first, executable)


def test_version_control_and_byte_code_are_not_part_of_the_plugin(plugin_dir: Path) -> None:
    first = read_plugin(plugin_dir).digest
    (plugin_dir / ".git").mkdir()
    (plugin_dir / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (plugin_dir / "servers" / "__pycache__").mkdir()
    (plugin_dir / "servers" / "__pycache__" / "notes.pyc").write_bytes(b"\0")
    (plugin_dir / "servers" / "old.pyc").write_bytes(b"\0")  # sourceless byte code
    assert read_plugin(plugin_dir).digest == first


def test_a_symlink_inside_the_directory_is_published_as_its_file(plugin_dir: Path) -> None:
    (plugin_dir / "README.md").symlink_to("AGENTS.md")
    files = {f.path: f for f in read_plugin(plugin_dir).files}
    assert files["README.md"].sha256 == files["AGENTS.md"].sha256


def test_a_symlink_leaving_the_directory_is_refused(plugin_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (plugin_dir / "skills" / "glossary" / "leak.md").symlink_to(tmp_path / "outside.txt")
    error = _error(plugin_dir)
    assert error.file == "skills/glossary/leak.md"
    assert "outside the plugin directory" in str(error)


def test_a_symlinked_directory_leaving_it_is_refused(plugin_dir: Path, tmp_path: Path) -> None:
    (plugin_dir / "etc").symlink_to("/etc")
    error = _error(plugin_dir)
    assert error.file == "etc" and "outside the plugin directory" in error.message


def test_a_file_over_the_size_limit_is_refused(plugin_dir: Path) -> None:
    with (plugin_dir / "big.bin").open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no 10 MB written
    error = _error(plugin_dir)
    assert error.file == "big.bin"
    assert f"over the limit of {MAX_FILE_BYTES}" in error.message


@pytest.mark.parametrize("version", ["1.2", "v1.2.0", "1.2.0.0", "01.2.0", "latest"])
def test_a_version_that_is_not_semver_is_refused(plugin_dir: Path, version: str) -> None:
    manifest = plugin_dir / ".claude-plugin" / "plugin.json"
    manifest.write_text(manifest.read_text().replace('"1.2.0"', f'"{version}"'))
    error = _error(plugin_dir)
    assert (error.file, error.line) == (".claude-plugin/plugin.json", 3)
    assert "not a semantic version" in error.message


def test_semver_pre_release_and_build_metadata_are_versions(plugin_dir: Path) -> None:
    manifest = plugin_dir / ".claude-plugin" / "plugin.json"
    manifest.write_text(manifest.read_text().replace('"1.2.0"', '"2.0.0-rc.1+build.5"'))
    assert read_plugin(plugin_dir).version == "2.0.0-rc.1+build.5"


def test_a_manifest_without_version_takes_one_derived_from_the_content(plugin_dir: Path) -> None:
    manifest = plugin_dir / ".claude-plugin" / "plugin.json"
    manifest.write_text('{"name": "writer"}')
    plugin = read_plugin(plugin_dir)
    assert plugin.version == "0.0.0+" + plugin.digest.removeprefix("sha256:")[:12]
    (plugin_dir / "AGENTS.md").write_text("Other instructions.\n")
    assert read_plugin(plugin_dir).version != plugin.version  # other bytes, other version
    # The publisher's version stands in; one that contradicts the manifest is an error.
    assert read_plugin(plugin_dir, version="3.0.0").version == "3.0.0"
    manifest.write_text('{"name": "writer", "version": "1.0.0"}')
    assert "version given is 3.0.0" in _error(plugin_dir, version="3.0.0").message
    assert "not a semantic version" in _error(plugin_dir, version="3").message


def test_malformed_manifest_json_names_its_line(plugin_dir: Path) -> None:
    manifest = plugin_dir / ".claude-plugin" / "plugin.json"
    manifest.write_text('{"name": "writer",\n "version": }')
    error = _error(plugin_dir)
    assert (error.file, error.line) == (".claude-plugin/plugin.json", 2)


def test_without_a_manifest_the_plugin_is_named_after_its_directory(plugin_dir: Path) -> None:
    (plugin_dir / ".claude-plugin" / "plugin.json").unlink()
    plugin = read_plugin(plugin_dir)
    assert plugin.name == "writer" and plugin.version.startswith("0.0.0+")
    assert any(
        p.severity == "warning" and "named 'writer' after its directory" in p.message
        for p in plugin.problems
    )
    assert read_plugin(plugin_dir, name="scribe").name == "scribe"  # the publisher's name
    renamed = plugin_dir.rename(plugin_dir.parent / "Not A Name")
    error = _error(renamed)
    assert error.file == ".claude-plugin/plugin.json" and "not a plugin name" in error.message


def test_an_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "is empty" in _error(tmp_path / "empty").message


def test_a_skill_without_front_matter_is_refused(plugin_dir: Path) -> None:
    (plugin_dir / "skills" / "glossary" / "SKILL.md").write_text("# Glossary\n")
    error = _error(plugin_dir)
    assert (error.file, error.line) == ("skills/glossary/SKILL.md", 1)
    assert "missing YAML front matter" in error.message


def test_malformed_front_matter_names_its_line(plugin_dir: Path) -> None:
    (plugin_dir / "skills" / "glossary" / "SKILL.md").write_text(
        "---\nname: glossary\ndescription: [unclosed\nneither YAML nor a key\n---\nx\n"
    )
    error = _error(plugin_dir)
    assert error.file == "skills/glossary/SKILL.md"
    assert error.line in (3, 4, 5) and "malformed front matter" in error.message
    assert str(error).startswith(f"skills/glossary/SKILL.md:{error.line}: ")


def test_front_matter_without_description_takes_the_first_paragraph(plugin_dir: Path) -> None:
    skill = plugin_dir / "skills" / "glossary" / "SKILL.md"
    skill.write_text("---\nname: glossary\n---\n# Glossary\n\nTerms we use.\nAnd spell.\n\nMore.\n")
    found = read_plugin(plugin_dir).skill("glossary")
    assert found is not None and found.description == "Terms we use. And spell."
    skill.write_text("---\nname: glossary\n---\n# Only a title\n")
    error = _error(plugin_dir)
    assert error.file == "skills/glossary/SKILL.md" and "no description" in error.message


def test_a_skill_whose_name_differs_from_its_folder_is_named_by_its_front_matter(
    plugin_dir: Path,
) -> None:
    skill = plugin_dir / "skills" / "glossary" / "SKILL.md"
    skill.write_text(skill.read_text().replace("name: glossary", "name: terms"))
    plugin = read_plugin(plugin_dir)
    assert [s.name for s in plugin.skills] == ["terms", "release-notes"]
    (warning,) = [p for p in plugin.problems if "differs from its folder" in p.message]
    assert (warning.severity, warning.file, warning.line) == (
        "warning",
        "skills/glossary/SKILL.md",
        2,
    )


def test_a_skill_folder_without_skill_md_is_refused(plugin_dir: Path) -> None:
    (plugin_dir / "skills" / "glossary" / "SKILL.md").rename(
        plugin_dir / "skills" / "glossary" / "README.md"
    )
    assert _error(plugin_dir).file == "skills/glossary/SKILL.md"


def test_bad_mcp_config_names_the_server_line(plugin_dir: Path) -> None:
    (plugin_dir / ".mcp.json").write_text(
        '{"mcpServers": {\n  "ok": {"command": "x"},\n  "both": {"command": "x", "url": "http://h"}\n}}'
    )
    error = _error(plugin_dir)
    assert (error.file, error.line) == (".mcp.json", 3) and "exactly one" in error.message


def test_an_unknown_setting_and_a_newer_opennua_are_refused(plugin_dir: Path) -> None:
    settings = plugin_dir / "opennua.toml"
    text = settings.read_text()
    settings.write_text(text.replace('">=0.1"', '">=99"'))
    error = _error(plugin_dir)
    assert (error.file, error.line) == ("opennua.toml", 2) and "requires opennua" in error.message
    settings.write_text("colour = 'blue'\n" + text)
    assert "unknown setting 'colour'" in _error(plugin_dir).message
    settings.write_text("instructions = \n")
    assert _error(plugin_dir).line == 1


def test_the_builtin_plugin_and_the_scaffold_read_clean(tmp_path: Path) -> None:
    builtin = read_plugin(builtin_plugin_root())
    assert builtin.name == "default" and builtin.settings.instructions
    scaffold = scaffold_plugin(tmp_path / "mine", "my-agent")
    assert scaffold.name == "my-agent"
    assert [s.name for s in scaffold.skills] == ["greeting"]
    assert [a.name for a in scaffold.agents] == ["reviewer"]
    assert [m.name for m in scaffold.mcp_servers] == ["notes"]
    assert scaffold.problems == ()
    with pytest.raises(PluginError, match="not an empty directory"):
        scaffold_plugin(tmp_path / "mine", "my-agent")
    with pytest.raises(PluginError, match="lowercase"):
        scaffold_plugin(tmp_path / "other", "My Agent")
