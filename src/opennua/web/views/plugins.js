// Plugins (`#/plugins`) and one plugin (`#/plugins/<name>[/<version>]`): its channels and
// where they point, every version with its digest and publisher, the release history, and a
// version's files and contents as the plugin format reads them (skills, sub-agents, MCP
// servers and A2A agents, settings, warnings). Release and roll back ask first, and say
// that only later sessions change. Refreshed twice a second, so a release made elsewhere
// (the CLI) shows within a second.

import { fill, h } from "./dom.js";
import { bytes } from "./format.js";
import { Page, confirmAction, digest, field, table, when } from "./kit.js";

const EVERY = 500;
const LATER_ONLY =
  "Later sessions only: sessions already created keep the version they were bound to.";

export class PluginsPage extends Page {
  constructor(options) {
    super({ ...options, title: "Plugins", every: EVERY });
    this.table = table({
      caption: { text: "Plugins of this workspace", hidden: true },
      columns: ["Plugin", "Latest version", "Channels"],
    });
    this.body.append(this.table.el);
  }

  load() {
    return this.api.list("/v1/plugins");
  }

  draw({ items }) {
    this.table.rows(
      items.map((p) => ({
        key: p.name,
        data: p,
        dataset: { plugin: p.name },
        cells: [
          h("a", { href: `#/plugins/${encodeURIComponent(p.name)}` }, p.name),
          p.latest,
          channelList(p.channels),
        ],
      })),
    );
  }
}

function channelList(channels) {
  const names = Object.keys(channels).sort();
  if (!names.length) return h("span", { class: "empty" }, "none");
  return h(
    "span",
    { class: "channels" },
    ...names.map((c) => h("span", { class: "badge", dataset: { channel: c } }, `${c} → ${channels[c]}`)),
  );
}

export class PluginPage extends Page {
  constructor({ name, version, ...options }) {
    super({ ...options, title: `Plugin ${name}`, every: EVERY });
    this.name = name;
    this.selected = version ?? null;
    this.shownVersion = null;
    this.channels = table({
      caption: "Channels",
      columns: ["Channel", "Version", ""],
      cls: "channels-table",
    });
    this.versions = table({
      caption: "Versions",
      columns: ["Version", "Digest", "Publisher", "Published", "Size", "Channels"],
    });
    this.history = table({
      caption: "Release history",
      columns: ["Move", "Channel", "Kind", "Version", "When"],
    });
    this.release = this.ctx.can("manage") ? this.releaseForm() : null;
    this.detail = h("section", { class: "version-detail", "aria-live": "polite" });
    this.body.append(
      h("p", null, h("a", { href: "#/plugins" }, "← All plugins")),
      this.channels.el,
      this.release,
      this.versions.el,
      this.detail,
      this.history.el,
    );
  }

  releaseForm() {
    this.releaseVersion = h("select", { id: "release-version", name: "version" });
    this.releaseChannel = h("input", {
      id: "release-channel",
      name: "channel",
      value: "stable",
      pattern: "[a-z0-9][a-z0-9._-]{0,63}",
      required: true,
    });
    return h(
      "form",
      { class: "inline-form release", onsubmit: (e) => this.onRelease(e) },
      h("h2", null, "Release a version"),
      field("Version", this.releaseVersion),
      field("Channel", this.releaseChannel),
      h("button", { type: "submit", class: "primary" }, "Release…"),
    );
  }

  load() {
    return this.api.json("GET", `/v1/plugins/${encodeURIComponent(this.name)}`);
  }

  draw(doc) {
    this.doc = doc;
    const manage = this.ctx.can("manage");
    const channelsOf = (version) =>
      Object.entries(doc.channels)
        .filter(([, v]) => v === version)
        .map(([c]) => c);
    this.channels.rows(
      Object.entries(doc.channels)
        .sort()
        .map(([channel, version]) => ({
          key: channel,
          data: [channel, version, manage],
          dataset: { channel },
          cells: [
            channel,
            h("span", { class: "channel-version" }, version),
            manage
              ? h(
                  "button",
                  { type: "button", onclick: () => this.onRollback(channel) },
                  `Roll back ${channel}…`,
                )
              : "",
          ],
        })),
    );
    const versions = [...doc.versions].reverse();
    this.versions.rows(
      versions.map((v) => ({
        key: v.version,
        data: [v, channelsOf(v.version), this.ctx.nameOf(v.publisher_id)],
        dataset: { version: v.version },
        cells: [
          h(
            "a",
            { href: `#/plugins/${encodeURIComponent(this.name)}/${encodeURIComponent(v.version)}` },
            v.version,
          ),
          digest(v.digest),
          v.publisher_id ? this.ctx.nameOf(v.publisher_id) : "built in",
          when(v.published_at),
          bytes(v.size),
          channelsOf(v.version).join(", ") || "—",
        ],
      })),
    );
    this.history.rows(
      [...doc.history].reverse().map((m) => ({
        key: `${m.channel}:${m.seq}`,
        data: m,
        cells: [String(m.seq), m.channel, m.kind, m.version, when(m.moved_at)],
      })),
    );
    if (this.releaseVersion) {
      const chosen = this.releaseVersion.value;
      const options = versions.map((v) => v.version);
      if (options.join("\n") !== this.releaseOptions) {
        this.releaseOptions = options.join("\n");
        fill(this.releaseVersion, ...options.map((v) => h("option", { value: v }, v)));
        if (options.includes(chosen)) this.releaseVersion.value = chosen;
      }
    }
    const show = this.selected ?? doc.channels.stable ?? versions[0]?.version;
    if (show && show !== this.shownVersion) {
      this.shownVersion = show;
      this.showVersion(show);
    }
  }

  async showVersion(version) {
    const base = `/v1/plugins/${encodeURIComponent(this.name)}/versions/${encodeURIComponent(version)}`;
    try {
      const [doc, contents] = await Promise.all([
        this.api.json("GET", base),
        this.api.json("GET", `${base}/contents`),
      ]);
      fill(this.detail, ...versionDetail(doc, contents));
      this.detail.dataset.version = version;
    } catch (error) {
      this.report(error, `Could not read version ${version}`);
    }
  }

  async onRelease(event) {
    event.preventDefault();
    const version = this.releaseVersion.value;
    const channel = this.releaseChannel.value.trim();
    const ok = await confirmAction({
      title: `Release ${this.name} ${version} to ${channel}?`,
      detail: LATER_ONLY,
      confirm: "Release",
    });
    if (!ok) return;
    const path = `/v1/plugins/${encodeURIComponent(this.name)}/channels/${encodeURIComponent(channel)}/release`;
    await this.act("Could not release", () => this.api.json("POST", path, { body: { version } }));
  }

  async onRollback(channel) {
    const ok = await confirmAction({
      title: `Roll ${this.name} ${channel} back to its previous version?`,
      detail: LATER_ONLY,
      confirm: "Roll back",
    });
    if (!ok) return;
    const path = `/v1/plugins/${encodeURIComponent(this.name)}/channels/${encodeURIComponent(channel)}/rollback`;
    await this.act("Could not roll back", () => this.api.json("POST", path));
  }
}

function versionDetail(doc, c) {
  return [
    h("h2", null, `Version ${doc.version}`),
    h("p", { class: "meta" }, doc.description || c.description || ""),
    c.warnings.length
      ? h(
          "div",
          { class: "warnings" },
          h("h3", null, "Validation warnings"),
          h("ul", null, ...c.warnings.map((w) => h("li", null, w))),
        )
      : h("p", { class: "note" }, "No validation warnings."),
    h(
      "div",
      { class: "contents" },
      section(
        "Skills",
        c.skills,
        (s) => [h("strong", null, s.name), ` — ${s.description}`, h("details", null, h("summary", null, `${s.path}/SKILL.md`), h("pre", null, s.body))],
      ),
      section(
        "Sub-agents",
        c.agents,
        (a) => [
          h("strong", null, a.name),
          ` — ${a.description}`,
          h("span", { class: "meta" }, ` · tools: ${a.tools ? a.tools.join(", ") || "none" : "the parent's"} · model: ${a.model ?? "the parent's"}`),
          h("details", null, h("summary", null, a.path), h("pre", null, a.instructions)),
        ],
      ),
      section("MCP servers and A2A agents", c.servers, (s) => [
        h("strong", null, s.name),
        ` (${s.kind === "a2a" ? "A2A agent" : s.kind}) `,
        h("code", null, s.url ?? ([s.command, ...s.args].filter(Boolean).join(" ") || "URL set by a deployment")),
        s.description ? ` — ${s.description}` : null,
        s.env.length ? h("span", { class: "meta" }, ` · env: ${s.env.join(", ")}`) : null,
        s.headers.length ? h("span", { class: "meta" }, ` · headers: ${s.headers.join(", ")}`) : null,
      ]),
      h(
        "div",
        null,
        h("h3", null, "Settings"),
        h(
          "dl",
          { class: "settings" },
          h("dt", null, "Allowed tools"),
          h("dd", null, c.settings.allowed_tools ? c.settings.allowed_tools.join(", ") || "none" : "every tool"),
          h("dt", null, "Needs approval"),
          h("dd", null, c.settings.approval_required.join(", ") || "nothing"),
          h("dt", null, "Egress requested"),
          h("dd", null, c.settings.egress ? c.settings.egress.join(", ") || "none" : "not restricted by the plugin"),
          h("dt", null, "Requires opennua"),
          h("dd", null, c.settings.requires_opennua ?? "any"),
        ),
        c.settings.instructions
          ? h("details", null, h("summary", null, `Instructions (${c.settings.instructions_file})`), h("pre", null, c.settings.instructions))
          : null,
      ),
    ),
    h("h3", null, `Files (${doc.files.length})`),
    fileTree(doc.files),
  ];
}

function section(title, items, render) {
  return h(
    "div",
    null,
    h("h3", null, `${title} (${items.length})`),
    items.length
      ? h("ul", { class: "components" }, ...items.map((item) => h("li", null, ...render(item))))
      : h("p", { class: "empty" }, "None."),
  );
}

/** The files as a nested list of folders, each file with its size and short sha256. */
export function fileTree(files) {
  const root = new Map();
  for (const f of files) {
    const parts = f.path.split("/");
    let level = root;
    for (const dir of parts.slice(0, -1)) {
      if (!level.has(`${dir}/`)) level.set(`${dir}/`, new Map());
      level = level.get(`${dir}/`);
    }
    level.set(parts.at(-1), f);
  }
  const list = (level) =>
    h(
      "ul",
      { class: "tree" },
      ...[...level.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, value]) =>
          value instanceof Map
            ? h("li", { class: "dir" }, h("span", null, name), list(value))
            : h(
                "li",
                { class: "file-entry", dataset: { path: value.path } },
                h("code", null, name),
                h("span", { class: "meta" }, ` ${bytes(value.size)} · ${value.sha256.slice(0, 12)}${value.executable ? " · executable" : ""}`),
              ),
        ),
    );
  return list(root);
}
