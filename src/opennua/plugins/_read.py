"""`read_plugin`: a plugin directory in the Claude Code layout, checked and digested.

Every problem is a `PluginError` naming the file (and the line where there is one); a
directory that reads without one is what gets published, byte for byte.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

import opennua
from opennua.plugins._errors import PluginError
from opennua.plugins._frontmatter import key_line, split_front_matter
from opennua.plugins._listing import PluginFile, digest_of, list_files
from opennua.plugins._model import (
    AccessPolicy,
    McpServerSpec,
    Plugin,
    Settings,
    Skill,
    SubAgent,
)

MANIFEST = ".claude-plugin/plugin.json"
MCP_CONFIG = ".mcp.json"
SETTINGS = "opennua.toml"
#: Claude Code components opennua does not run: reported as ignored at publish.
IGNORED_DIRS = ("commands", "hooks", "output-styles")
IGNORED_MANIFEST_KEYS = ("commands", "hooks", "outputStyles", "lspServers", "agents", "skills")

#: https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
#: Plugin, skill and sub-agent names (the Agent Skills rule: lowercase, digits, hyphens).
NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
MAX_DESCRIPTION = 1024


def read_plugin(path: Path | str) -> Plugin:
    """Read and check the plugin directory at `path` (docs/plugins.md)."""
    root = Path(path).resolve()
    files = list_files(root)
    paths = {f.path for f in files}
    manifest = _manifest(root, paths)
    name, version = manifest["name"], manifest["version"]
    settings = _settings(root, paths)
    return Plugin(
        name=name,
        version=version,
        description=manifest.get("description", ""),
        digest=digest_of(files),
        files=files,
        skills=_skills(root, files),
        agents=_agents(root, paths),
        mcp_servers=_mcp_servers(root, paths),
        settings=settings,
        ignored=_ignored(paths, manifest),
        manifest=manifest,
    )


def _text(root: Path, rel: str) -> str:
    try:
        return (root / rel).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PluginError(f"not UTF-8 text ({exc.reason})", file=rel) from None


def _json(root: Path, rel: str) -> tuple[Any, str]:
    text = _text(root, rel)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise PluginError(f"malformed JSON: {exc.msg}", file=rel, line=exc.lineno) from None


def _json_line(text: str, key: str) -> int | None:
    for no, line in enumerate(text.splitlines(), start=1):
        if f'"{key}"' in line:
            return no
    return None


def _manifest(root: Path, paths: set[str]) -> dict[str, Any]:
    if MANIFEST not in paths:
        raise PluginError("missing manifest (name, version, description)", file=MANIFEST)
    data, text = _json(root, MANIFEST)
    if not isinstance(data, dict):
        raise PluginError("the manifest must be a JSON object", file=MANIFEST, line=1)

    def bad(key: str, message: str) -> PluginError:
        return PluginError(message, file=MANIFEST, line=_json_line(text, key))

    name = data.get("name")
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise bad("name", f"name {name!r} must be lowercase letters, digits and hyphens")
    version = data.get("version")
    if not isinstance(version, str) or SEMVER.fullmatch(version) is None:
        if version is None:
            raise bad("name", "version is missing (a semantic version such as 1.0.0)")
        raise bad("version", f"version {version!r} is not a semantic version such as 1.0.0")
    if not isinstance(data.get("description", ""), str):
        raise bad("description", "description must be a string")
    return data


def _settings(root: Path, paths: set[str]) -> Settings:
    data: dict[str, Any] = {}
    text = ""
    if SETTINGS in paths:
        text = _text(root, SETTINGS)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            at = re.search(r"at line (\d+)", str(exc))
            raise PluginError(
                f"malformed TOML: {exc}", file=SETTINGS, line=int(at[1]) if at else None
            ) from None

    def bad(key: str, message: str) -> PluginError:
        line = next(
            (n for n, ln in enumerate(text.splitlines(), 1) if ln.strip().startswith(key)), None
        )
        return PluginError(message, file=SETTINGS, line=line)

    known = {"instructions", "requires-opennua", "access"}
    for key in data:
        if key not in known:
            raise bad(key, f"unknown setting {key!r} (known: {', '.join(sorted(known))})")
    instructions_file = data.get("instructions", "AGENTS.md")
    if not isinstance(instructions_file, str):
        raise bad("instructions", "instructions must be the path of a Markdown file")
    if instructions_file in paths:
        instructions = _text(root, instructions_file)
    elif "instructions" in data:
        raise bad("instructions", f"instructions file {instructions_file!r} is not in the plugin")
    else:
        instructions = ""
    requires = data.get("requires-opennua")
    if requires is not None:
        try:
            spec = SpecifierSet(requires) if isinstance(requires, str) else None
        except InvalidSpecifier:
            spec = None
        if spec is None:
            raise bad("requires-opennua", f"requires-opennua {requires!r} is not a version range")
        if not spec.contains(Version(opennua.__version__), prereleases=True):
            raise bad(
                "requires-opennua",
                f"the plugin requires opennua {requires}; this is {opennua.__version__}",
            )
    access = data.get("access", {})
    if not isinstance(access, dict):
        raise bad("access", "[access] must be a table")
    policy_keys = {"allowed-tools", "approval-required", "egress"}
    for key in access:
        if key not in policy_keys:
            raise bad(
                key, f"unknown access setting {key!r} (known: {', '.join(sorted(policy_keys))})"
            )

    def names(key: str) -> tuple[str, ...] | None:
        value = access.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(key, f"{key} must be a list of names or globs")
        return tuple(value)

    return Settings(
        instructions_file=instructions_file,
        instructions=instructions,
        access=AccessPolicy(
            allowed_tools=names("allowed-tools"),
            approval_required=names("approval-required") or (),
            egress=names("egress"),
        ),
        requires_opennua=requires,
    )


def _tool_list(value: Any, file: str, key: str, text: str) -> tuple[str, ...]:
    """Claude Code writes `Read, Grep`; the Agent Skills spec a space-separated string; YAML
    lists work too."""
    if isinstance(value, str):
        return tuple(t for t in re.split(r"[,\s]+", value) if t)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PluginError(f"{key} must be a list of tool names", file=file, line=key_line(text, key))


def _described(front: dict[str, Any], file: str, text: str) -> tuple[str, str]:
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not name:
        raise PluginError("front matter has no name", file=file, line=key_line(text, "name") or 1)
    if NAME.fullmatch(name) is None:
        raise PluginError(
            f"name {name!r} must be lowercase letters, digits and hyphens (at most 64)",
            file=file,
            line=key_line(text, "name"),
        )
    if not isinstance(description, str) or not description.strip():
        raise PluginError(
            "front matter has no description",
            file=file,
            line=key_line(text, "description") or 1,
        )
    if len(description) > MAX_DESCRIPTION:
        raise PluginError(
            f"description is longer than {MAX_DESCRIPTION} characters",
            file=file,
            line=key_line(text, "description"),
        )
    return name, description.strip()


def _skills(root: Path, files: tuple[PluginFile, ...]) -> tuple[Skill, ...]:
    folders = sorted(
        {
            f.path.split("/")[1]
            for f in files
            if f.path.count("/") >= 2 and f.path.startswith("skills/")
        }
    )
    skills = []
    for folder in folders:
        rel = f"skills/{folder}/SKILL.md"
        if not (root / rel).is_file():
            raise PluginError("a skill folder needs a SKILL.md", file=rel)
        text = _text(root, rel)
        front, body = split_front_matter(text, rel)
        name, description = _described(front, rel, text)
        if name != folder:
            raise PluginError(
                f"skill name {name!r} differs from its folder {folder!r}",
                file=rel,
                line=key_line(text, "name"),
            )
        allowed = front.get("allowed-tools")
        prefix = f"skills/{folder}/"
        skills.append(
            Skill(
                name=name,
                description=description,
                body=body,
                path=f"skills/{folder}",
                resources=tuple(
                    f.path[len(prefix) :]
                    for f in files
                    if f.path.startswith(prefix) and f.path != rel
                ),
                allowed_tools=()
                if allowed is None
                else _tool_list(allowed, rel, "allowed-tools", text),
            )
        )
    return tuple(skills)


def _agents(root: Path, paths: set[str]) -> tuple[SubAgent, ...]:
    agents: dict[str, SubAgent] = {}
    for rel in sorted(p for p in paths if re.fullmatch(r"agents/[^/]+\.md", p)):
        text = _text(root, rel)
        front, body = split_front_matter(text, rel)
        name, description = _described(front, rel, text)
        if name in agents:
            raise PluginError(
                f"sub-agent {name!r} is also defined in {agents[name].path}",
                file=rel,
                line=key_line(text, "name"),
            )
        model = front.get("model")
        if model is not None and not isinstance(model, str):
            raise PluginError("model must be a string", file=rel, line=key_line(text, "model"))
        tools = front.get("tools")
        agents[name] = SubAgent(
            name=name,
            description=description,
            instructions=body,
            path=rel,
            tools=None if tools is None else _tool_list(tools, rel, "tools", text),
            model=None if model in (None, "inherit") else model,
        )
    return tuple(agents.values())


def _mcp_servers(root: Path, paths: set[str]) -> tuple[McpServerSpec, ...]:
    if MCP_CONFIG not in paths:
        return ()
    data, text = _json(root, MCP_CONFIG)
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise PluginError('expected {"mcpServers": {name: {...}}}', file=MCP_CONFIG, line=1)
    specs = []
    for name, entry in servers.items():

        def bad(message: str, _name: str = name) -> PluginError:
            return PluginError(
                f"server {_name!r}: {message}", file=MCP_CONFIG, line=_json_line(text, _name)
            )

        if re.fullmatch(r"[A-Za-z0-9_-]+", name) is None or "__" in name:
            raise bad("a server name is letters, digits, '-' and single '_'")
        if not isinstance(entry, dict):
            raise bad("must be an object")
        command, url = entry.get("command"), entry.get("url")
        if (command is None) == (url is None):
            raise bad("needs exactly one of command (stdio) or url (HTTP)")
        args, env, headers = entry.get("args", []), entry.get("env", {}), entry.get("headers", {})
        if command is not None and not isinstance(command, str):
            raise bad("command must be a string")
        if url is not None and not (isinstance(url, str) and re.match(r"https?://", url)):
            raise bad("url must be an http(s) URL")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise bad("args must be a list of strings")
        for label, table in (("env", env), ("headers", headers)):
            if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
                raise bad(f"{label} must map names to strings")
        specs.append(
            McpServerSpec(
                name=name, command=command, args=tuple(args), env=env, url=url, headers=headers
            )
        )
    return tuple(specs)


def _ignored(paths: set[str], manifest: dict[str, Any]) -> tuple[str, ...]:
    ignored = [f"{d}/" for d in IGNORED_DIRS if any(p.startswith(f"{d}/") for p in paths)]
    ignored += [f"{MANIFEST}#{k}" for k in IGNORED_MANIFEST_KEYS if k in manifest]
    if "mcpServers" in manifest:
        ignored.append(f"{MANIFEST}#mcpServers (opennua reads {MCP_CONFIG})")
    ignored += sorted(p for p in paths if re.fullmatch(r"skills/[^/]+", p))
    return tuple(ignored)
