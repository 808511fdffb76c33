"""`read_plugin`: a plugin directory in the Claude Code layout, checked and digested.

Every problem is collected, not only the first: an error refuses the plugin (a
`PluginError` carrying all of them), a warning or an ignored feature is kept on the
`Plugin` it returns. What Claude Code accepts is accepted (with a warning where opennua
reads it differently); only what cannot run or is unsafe is an error.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

import opennua
from opennua.plugins._a2a_config import read_a2a_agents
from opennua.plugins._commands import read_commands
from opennua.plugins._errors import PluginError
from opennua.plugins._files import json_line, read_json, read_text
from opennua.plugins._frontmatter import key_line, split_front_matter
from opennua.plugins._hooks import read_hooks
from opennua.plugins._listing import PluginFile, digest_of, list_files
from opennua.plugins._mcp_config import read_mcp_servers
from opennua.plugins._model import (
    AccessPolicy,
    Plugin,
    Settings,
    Skill,
    SubAgent,
)
from opennua.plugins._output_schema import (
    DEFAULT_OUTPUT_RETRIES,
    MAX_OUTPUT_RETRIES,
    read_output_schema,
)
from opennua.plugins._report import Report
from opennua.plugins._tools import claude_tool, unsupported_tool

MANIFEST = ".claude-plugin/plugin.json"
SETTINGS = "opennua.toml"
#: Claude Code components opennua does not run, and why: reported as ignored.
IGNORED_DIRS = {
    "output-styles": "output styles shape Claude Code's terminal, which opennua does not have",
}
IGNORED_FILES = {
    ".lsp.json": "language servers serve an editor; opennua has none",
    "settings.json": "Claude Code's plugin settings (its default agent) are not read; "
    "opennua's are opennua.toml",
}
IGNORED_MANIFEST_KEYS = {
    "agents": "custom sub-agent paths: opennua reads agents/",
    "skills": "custom skill paths: opennua reads skills/",
    "outputStyles": "output styles shape Claude Code's terminal, which opennua does not have",
    "lspServers": "language servers serve an editor; opennua has none",
    "mcpServers": "inline servers are not read: opennua reads .mcp.json",
}
#: Manifest keys read (`commands` and `hooks`: where more of them are).
READ_MANIFEST_KEYS = frozenset({"name", "version", "description", "commands", "hooks"})
#: Manifest keys that describe the plugin to people: kept in `Plugin.manifest`, not used.
INFORMATIONAL_MANIFEST_KEYS = frozenset(
    {"$schema", "author", "homepage", "repository", "license", "keywords", "displayName",
     "category", "tags"}
)  # fmt: skip
#: Front matter keys read, and those that only describe (the Agent Skills spec's).
SKILL_KEYS = frozenset({"name", "description", "allowed-tools"})
AGENT_KEYS = frozenset({"name", "description", "tools", "model"})
INFORMATIONAL_FRONT_MATTER = frozenset({"license", "compatibility", "metadata", "version"})

#: https://semver.org/#is-there-a-suggested-regular-expression-regex-to-check-a-semver-string
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
#: Plugin, skill and sub-agent names (the Agent Skills rule: lowercase, digits, hyphens).
NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
MAX_DESCRIPTION = 1024


def read_plugin(path: Path | str, *, name: str | None = None, version: str | None = None) -> Plugin:
    """Read and check the plugin directory at `path` (docs/plugins.md). `name` and
    `version` are the publisher's, for a plugin whose manifest does not say them: the
    name defaults to the directory's, the version to `0.0.0+<digest prefix>`. A manifest
    that says otherwise is an error."""
    root = Path(path).resolve()
    files = list_files(root)  # unreadable files: nothing else can be checked reliably
    if not files:
        raise PluginError(f"{root.name} is empty: a plugin has at least its manifest or a skill")
    paths = {f.path for f in files}
    digest = digest_of(files)
    report = Report()
    manifest: dict[str, Any] = {}
    plugin_name, plugin_version = name or root.name, version
    with report.checking():
        manifest, plugin_name, plugin_version = _manifest(root, paths, name, version, report)
    if plugin_version is None:
        # Content-derived, so the same bytes always publish as the same version.
        plugin_version = f"0.0.0+{digest.removeprefix('sha256:')[:12]}"
    settings = Settings()
    with report.checking():
        settings = _settings(root, paths)
    skills = _skills(root, files, report)
    agents = _agents(root, paths, report)
    mcp_servers = read_mcp_servers(root, paths, report)
    a2a_agents = read_a2a_agents(root, paths, mcp_servers, report)
    commands, command_problems = read_commands(root, paths, manifest)
    hooks, hook_problems = read_hooks(root, paths, manifest)
    report.problems += [*command_problems, *hook_problems]
    _ignored(paths, report)
    errors = report.errors()
    if errors:
        first = errors[0]
        raise PluginError(first.message, file=first.file, line=first.line, problems=report.problems)
    return Plugin(
        name=plugin_name,
        version=plugin_version,
        description=str(manifest.get("description", "")),
        digest=digest,
        files=files,
        skills=skills,
        agents=agents,
        mcp_servers=mcp_servers,
        a2a_agents=a2a_agents,
        settings=settings,
        commands=commands,
        hooks=hooks,
        manifest=manifest,
        problems=tuple(report.problems),
    )


def _manifest(
    root: Path, paths: set[str], name: str | None, version: str | None, report: Report
) -> tuple[dict[str, Any], str, str | None]:
    """(the manifest as written, the plugin's name, its version or None: derived)."""
    if version is not None and SEMVER.fullmatch(version) is None:
        raise PluginError(f"version {version!r} is not a semantic version such as 1.0.0")
    if MANIFEST not in paths:
        # Claude Code names a plugin without a manifest after its directory.
        named = name or root.name
        if NAME.fullmatch(named) is None:
            raise PluginError(
                f"missing manifest, and the directory's name {named!r} is not a plugin name "
                "(lowercase letters, digits and hyphens) to use instead",
                file=MANIFEST,
            )
        report.add(
            "warning",
            f"no manifest: the plugin is named {named!r} after its directory, as Claude Code does",
            MANIFEST,
        )
        return {}, named, version
    data, text = read_json(root, MANIFEST)
    if not isinstance(data, dict):
        raise PluginError("the manifest must be a JSON object", file=MANIFEST, line=1)

    def bad(key: str, message: str) -> PluginError:
        return PluginError(message, file=MANIFEST, line=json_line(text, key))

    written = data.get("name")
    if not isinstance(written, str) or NAME.fullmatch(written) is None:
        raise bad("name", f"name {written!r} must be lowercase letters, digits and hyphens")
    if name is not None and name != written:
        raise bad("name", f"the manifest names the plugin {written!r}, not {name!r}")
    stated = data.get("version")
    if stated is not None and (not isinstance(stated, str) or SEMVER.fullmatch(stated) is None):
        raise bad("version", f"version {stated!r} is not a semantic version such as 1.0.0")
    if version is not None and stated is not None and version != stated:
        raise bad("version", f"the manifest says version {stated}; the version given is {version}")
    if not isinstance(data.get("description", ""), str):
        raise bad("description", "description must be a string")
    for key in data:
        if key in READ_MANIFEST_KEYS or key in INFORMATIONAL_MANIFEST_KEYS:
            continue
        reason = IGNORED_MANIFEST_KEYS.get(key, "not a key opennua reads (kept as written)")
        report.add("ignored", f"manifest key {key!r}: {reason}", MANIFEST, json_line(text, key))
    return data, written, stated if stated is not None else version


def _settings(root: Path, paths: set[str]) -> Settings:
    data: dict[str, Any] = {}
    text = ""
    if SETTINGS in paths:
        text = read_text(root, SETTINGS)
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

    known = {"instructions", "requires-opennua", "access", "output-schema", "output-retries"}
    for key in data:
        if key not in known:
            raise bad(key, f"unknown setting {key!r} (known: {', '.join(sorted(known))})")
    instructions_file = data.get("instructions", "AGENTS.md")
    if not isinstance(instructions_file, str):
        raise bad("instructions", "instructions must be the path of a Markdown file")
    if instructions_file in paths:
        instructions = read_text(root, instructions_file)
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

    schema_file = data.get("output-schema")
    if schema_file is not None and not isinstance(schema_file, str):
        raise bad("output-schema", "output-schema must be the path of a JSON Schema file")
    if schema_file is not None and schema_file not in paths:
        raise bad("output-schema", f"output schema file {schema_file!r} is not in the plugin")
    retries = data.get("output-retries", DEFAULT_OUTPUT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int):
        raise bad("output-retries", "output-retries must be a whole number")
    if not 0 <= retries <= MAX_OUTPUT_RETRIES:
        raise bad("output-retries", f"output-retries must be 0 to {MAX_OUTPUT_RETRIES}")
    if "output-retries" in data and schema_file is None:
        raise bad("output-retries", "output-retries needs an output-schema to check answers by")
    return Settings(
        instructions_file=instructions_file,
        instructions=instructions,
        access=AccessPolicy(
            allowed_tools=names("allowed-tools"),
            approval_required=names("approval-required") or (),
            egress=names("egress"),
        ),
        requires_opennua=requires,
        output_schema=None if schema_file is None else read_output_schema(root, schema_file),
        output_schema_file=schema_file,
        output_retries=retries,
    )


def _tool_list(
    value: Any, file: str, key: str, text: str, report: Report, who: str
) -> tuple[str, ...]:
    """Claude Code writes `Read, Grep`; the Agent Skills spec a space-separated string; YAML
    lists work too. A Claude Code tool opennua does not have is reported, once per name."""
    if isinstance(value, str):
        # Commas when there are any (an MCP server's name may hold a space), else spaces
        # outside a rule's parentheses (`Bash(git log:*)`).
        parts = value.split(",") if "," in value else re.split(r"\s+(?![^(]*\))", value)
        tools = tuple(t.strip() for t in parts if t.strip())
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        tools = tuple(value)
    else:
        raise PluginError(
            f"{key} must be a list of tool names", file=file, line=key_line(text, key)
        )
    for tool in tools:
        if unsupported_tool(tool):
            said = f"tool {tool} is not supported by opennua; the {who} naming it run without it"
        elif claude_tool(tool) != tool:
            said = (
                f"tool rule {tool} is read as {claude_tool(tool)}: opennua has no per-argument rule"
            )
        else:
            continue
        report.once("warning", said, file, key_line(text, key))
    return tools


def _unread_keys(front: dict[str, Any], known: frozenset[str], file: str, text: str,
                 report: Report, what: str) -> None:  # fmt: skip
    for key in front:
        if key not in known and key not in INFORMATIONAL_FRONT_MATTER:
            report.once(
                "ignored",
                f"{what} front matter key {key!r} is not used by opennua",
                file,
                key_line(text, key),
            )


def _described(
    front: dict[str, Any], file: str, text: str, body: str, default: str, report: Report
) -> tuple[str, str]:
    """(name, description). A missing name is `default` (the folder or file name); a
    missing description the body's first paragraph, as Claude Code does."""
    name, description = front.get("name"), front.get("description")
    if name is None:
        name = default
        report.add("warning", f"front matter has no name: named {default!r}", file, 1)
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise PluginError("name must be text on one line", file=file, line=key_line(text, "name"))
    if NAME.fullmatch(name) is None:
        # Claude Code takes any name; the model sees it in a listing, no path is made of it.
        report.add(
            "warning",
            f"name {name!r} is not lowercase letters, digits and hyphens (at most 64), as "
            "the Agent Skills spec asks; kept as written",
            file,
            key_line(text, "name"),
        )
    if description is not None and not isinstance(description, str):
        raise PluginError("description must be text", file=file, line=key_line(text, "description"))
    if not description or not description.strip():
        description = _first_paragraph(body)
        if not description:
            raise PluginError(
                "front matter has no description, and the body has no text to use instead",
                file=file,
                line=key_line(text, "description") or 1,
            )
        report.add(
            "warning", "front matter has no description: the body's first paragraph is", file, 1
        )
    if len(description) > MAX_DESCRIPTION:
        report.add(
            "warning",
            f"description is {len(description)} characters, over the {MAX_DESCRIPTION} the "
            "Agent Skills spec allows; kept whole (it is in the model's context every turn)",
            file,
            key_line(text, "description"),
        )
    return name, description.strip()


def _first_paragraph(body: str) -> str:
    lines: list[str] = []
    for line in body.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            if lines:
                break
            continue
        lines.append(text)
    return " ".join(lines)


def _skills(root: Path, files: tuple[PluginFile, ...], report: Report) -> tuple[Skill, ...]:
    folders = sorted(
        {
            f.path.split("/")[1]
            for f in files
            if f.path.count("/") >= 2 and f.path.startswith("skills/")
        }
    )
    skills: dict[str, Skill] = {}
    for folder in folders:
        with report.checking():
            skill = _skill(root, files, folder, report)
            if skill.name in skills:
                raise PluginError(
                    f"skill {skill.name!r} is also defined in {skills[skill.name].path}",
                    file=f"{skill.path}/SKILL.md",
                )
            skills[skill.name] = skill
    return tuple(skills.values())


def _skill(root: Path, files: tuple[PluginFile, ...], folder: str, report: Report) -> Skill:
    rel = f"skills/{folder}/SKILL.md"
    if not (root / rel).is_file():
        raise PluginError("a skill folder needs a SKILL.md", file=rel)
    text = read_text(root, rel)
    front, body = split_front_matter(text, rel, report.problems)
    name, description = _described(front, rel, text, body, folder, report)
    if name != folder:
        # Claude Code names the skill by its front matter; so does opennua.
        report.add(
            "warning",
            f"skill name {name!r} differs from its folder {folder!r}: it is called {name!r}",
            rel,
            key_line(text, "name"),
        )
    _unread_keys(front, SKILL_KEYS, rel, text, report, "skill")
    allowed = front.get("allowed-tools")
    prefix = f"skills/{folder}/"
    return Skill(
        name=name,
        description=description,
        body=body,
        path=f"skills/{folder}",
        resources=tuple(
            f.path[len(prefix) :] for f in files if f.path.startswith(prefix) and f.path != rel
        ),
        allowed_tools=()
        if allowed is None
        else _tool_list(allowed, rel, "allowed-tools", text, report, "skills"),
    )


def _agents(root: Path, paths: set[str], report: Report) -> tuple[SubAgent, ...]:
    agents: dict[str, SubAgent] = {}
    for rel in sorted(p for p in paths if re.fullmatch(r"agents/[^/]+\.md", p)):
        with report.checking():
            text = read_text(root, rel)
            front, body = split_front_matter(text, rel, report.problems)
            stem = rel.removeprefix("agents/").removesuffix(".md")
            name, description = _described(front, rel, text, body, stem, report)
            if name in agents:
                raise PluginError(
                    f"sub-agent {name!r} is also defined in {agents[name].path}",
                    file=rel,
                    line=key_line(text, "name"),
                )
            model = front.get("model")
            if model is not None and not isinstance(model, str):
                raise PluginError("model must be a string", file=rel, line=key_line(text, "model"))
            _unread_keys(front, AGENT_KEYS, rel, text, report, "sub-agent")
            tools = front.get("tools")
            who = "sub-agents"
            agents[name] = SubAgent(
                name=name,
                description=description,
                instructions=body,
                path=rel,
                tools=None if tools is None else _tool_list(tools, rel, "tools", text, report, who),
                model=None if model in (None, "inherit") else model,
            )
    return tuple(agents.values())


def _ignored(paths: set[str], report: Report) -> None:
    for folder, reason in IGNORED_DIRS.items():
        if any(p.startswith(f"{folder}/") for p in paths):
            report.add("ignored", reason, f"{folder}/")
    for file, reason in IGNORED_FILES.items():
        if file in paths:
            report.add("ignored", reason, file)
    for path in sorted(p for p in paths if re.fullmatch(r"skills/[^/]+", p)):
        report.add("ignored", "not a skill: a skill is a folder with a SKILL.md", path)
