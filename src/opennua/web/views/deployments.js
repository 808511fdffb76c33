// Deployments (`#/deployments`), one deployment (`#/deployments/<name>`) and its form
// (`#/deployments/new`, `#/deployments/<name>/edit`). The form sends what `nua deploy`
// sends (`PUT /v1/deployments/{name}`): the server validates it exactly as it does for
// the CLI and the page shows its refusal as it comes (no validation is copied here).

import { fill, h } from "./dom.js";
import { SESSION_STATUS } from "./format.js";
import { Page, digest, field, table, when } from "./kit.js";

function target(spec) {
  if (spec.version) return `${spec.plugin} pinned at ${spec.version}`;
  return `${spec.plugin} on channel ${spec.channel ?? "stable"}`;
}

export class DeploymentsPage extends Page {
  constructor(options) {
    super({ ...options, title: "Deployments" });
    if (this.ctx.can("manage")) {
      this.toolbar.append(h("a", { class: "button primary", href: "#/deployments/new" }, "New deployment"));
    }
    this.table = table({
      caption: { text: "Deployments of this workspace", hidden: true },
      columns: ["Deployment", "Plugin", "Model", "Runs as", "Digest", "Saved"],
    });
    this.body.append(this.table.el);
  }

  load() {
    return this.api.list("/v1/deployments");
  }

  draw({ items }) {
    this.table.rows(
      items.map((d) => ({
        key: d.name,
        data: d,
        dataset: { deployment: d.name },
        cells: [
          h("a", { href: `#/deployments/${encodeURIComponent(d.name)}` }, d.name),
          target(d.spec),
          h("code", null, d.spec.model),
          runAs(d.spec, this.ctx),
          digest(d.digest),
          when(d.created_at),
        ],
      })),
    );
  }
}

/** What sandboxed code may reach: the deployment's list, the one the egress proxy enforces. */
function egressList(entries) {
  if (!entries?.length) return h("span", { class: "egress", dataset: { egress: "" } }, "none: sandboxed code has no network");
  return h(
    "span",
    { class: "egress", dataset: { egress: entries.join(" ") } },
    ...entries.flatMap((e, i) => [i ? ", " : null, h("code", null, e)]),
  );
}

/** A plugin's own egress list: a request shown beside the deployment's, never enforced. */
function requested(entries, plugin) {
  const note = "a request: the deployment's list above is what is enforced";
  if (entries === null || entries === undefined) return `${plugin} asks for nothing (${note})`;
  const shown = entries.length ? entries.join(", ") : "nothing";
  return h("span", { class: "egress-requested" }, `${shown} (${note})`);
}

function runAs(spec, ctx) {
  const principal = spec.principal_id === "prn_owner" ? "the workspace owner" : ctx.nameOf(spec.principal_id);
  return spec.run_as === "principal" ? `${principal} (every turn)` : `the caller (automation: ${principal})`;
}

export class DeploymentPage extends Page {
  constructor({ name, ...options }) {
    super({ ...options, title: `Deployment ${name}` });
    this.name = name;
    if (this.ctx.can("manage")) {
      this.toolbar.append(
        h("a", { class: "button", href: `#/deployments/${encodeURIComponent(name)}/edit` }, "Edit"),
      );
    }
    this.spec = h("div", { class: "spec" });
    this.sessions = table({
      caption: "Sessions running on it",
      columns: ["Session", "Status", "Snapshot", "Created"],
    });
    this.body.append(
      h("p", null, h("a", { href: "#/deployments" }, "← All deployments")),
      this.spec,
      this.sessions.el,
    );
  }

  async load() {
    const path = `/v1/deployments/${encodeURIComponent(this.name)}`;
    const [doc, running, waiting] = await Promise.all([
      this.api.json("GET", path),
      this.api.listSessions({ deployment: this.name, status: "running", limit: 50 }),
      this.api.listSessions({ deployment: this.name, status: "requires_action", limit: 50 }),
    ]);
    return { doc, sessions: [...waiting.items, ...running.items] };
  }

  draw({ doc, sessions }) {
    const s = doc.spec;
    const limits = Object.entries(s.limits ?? {}).filter(([, v]) => v != null);
    const dl = [
      ["Plugin", target(s)],
      ["Model", h("code", null, s.model)],
      ["Runs as", runAs(s, this.ctx)],
      ["Limits", limits.length ? limits.map(([k, v]) => `${k.replaceAll("_", " ")}: ${v}`).join(" · ") : "the defaults"],
      [
        "Credentials",
        s.credentials?.length
          ? h("ul", null, ...s.credentials.map((c) => h("li", null, `${c.server}: header ${c.header} from secret `, h("code", null, c.secret))))
          : "none",
      ],
      [
        "Secrets in the sandbox",
        s.sandbox_env?.length
          ? h("ul", null, ...s.sandbox_env.map((e) => h("li", null, `${e.server}: ${e.env} from secret `, h("code", null, e.secret))))
          : "none",
      ],
      [
        "Tool overrides",
        Object.keys(s.tools ?? {}).length
          ? h("ul", null, ...Object.entries(s.tools).map(([server, o]) => h("li", null, `${server}: `, h("code", null, o.url ?? [o.command, ...(o.args ?? [])].join(" ")))))
          : "none",
      ],
      ["Egress (enforced)", egressList(s.egress)],
      ["Egress the plugin requests", requested(doc.egress_requested, s.plugin)],
      ["Digest", h("code", { class: "digest" }, doc.digest)],
      ["Saved", when(doc.created_at)],
    ];
    fill(this.spec, h("dl", { class: "settings" }, ...dl.flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)])));
    this.sessions.rows(
      sessions.map((item) => ({
        key: item.session_id,
        data: item,
        dataset: { sessionId: item.session_id },
        cells: [
          h("a", { href: `#/s/${encodeURIComponent(item.session_id)}` }, item.title || "Untitled session"),
          h("span", { class: `badge status-${item.status}` }, SESSION_STATUS[item.status] ?? item.status),
          h("span", null, item.plugin ?? "—", " ", digest(item.snapshot_digest)),
          when(item.created_at),
        ],
      })),
    );
    if (!sessions.length) this.sessions.el.dataset.empty = "true";
  }
}

/** Create (`name` null) or edit a deployment. */
export class DeploymentForm extends Page {
  constructor({ name, navigate, ...options }) {
    super({ ...options, title: name ? `Edit deployment ${name}` : "New deployment", every: 0 });
    this.name = name;
    this.navigate = navigate;
  }

  async load() {
    const plugins = await this.api.list("/v1/plugins");
    const current = this.name
      ? await this.api.json("GET", `/v1/deployments/${encodeURIComponent(this.name)}`)
      : null;
    return { plugins: plugins.items, current };
  }

  draw({ plugins, current }) {
    if (this.form) return;
    const s = current?.spec ?? {};
    const input = (id, value = "", extra = {}) => h("input", { id, name: id, value: value ?? "", ...extra });
    const name = input("dep-name", this.name ?? "", {
      required: true,
      pattern: "[a-z0-9][a-z0-9._-]{0,63}",
      readonly: this.name ? true : null,
    });
    const plugin = h(
      "select",
      { id: "dep-plugin", name: "plugin", required: true },
      ...plugins.map((p) => h("option", { value: p.name, selected: p.name === s.plugin }, p.name)),
    );
    const channel = input("dep-channel", s.version ? "" : (s.channel ?? ""), { placeholder: "stable" });
    const version = input("dep-version", s.version ?? "", { placeholder: "follow the channel" });
    const model = input("dep-model", s.model ?? "", { required: true, placeholder: "provider:model" });
    const runAs = h(
      "select",
      { id: "dep-run-as" },
      h("option", { value: "caller", selected: s.run_as !== "principal" }, "the person who starts a turn"),
      h("option", { value: "principal", selected: s.run_as === "principal" }, "the deployment's principal"),
    );
    const principal = input("dep-principal", s.principal_id ?? "prn_owner");
    const limit = (id, key, step) =>
      input(id, s.limits?.[key] ?? "", { type: "number", min: "0", step, inputmode: "decimal" });
    const deadline = limit("dep-deadline", "deadline_seconds", "any");
    const steps = limit("dep-steps", "max_steps", "1");
    const tokens = limit("dep-tokens", "max_tokens", "1");
    const cost = limit("dep-cost", "max_cost_usd", "any");
    const json = (id, value) =>
      h("textarea", { id, rows: 3, spellcheck: "false", class: "code" }, JSON.stringify(value ?? [], null, 1));
    const credentials = json("dep-credentials", s.credentials ?? []);
    const tools = json("dep-tools", s.tools ?? {});
    const sandbox = json("dep-sandbox", s.sandbox_env ?? []);
    const egress = h("textarea", { id: "dep-egress", rows: 3, spellcheck: "false", class: "code" }, (s.egress ?? []).join("\n"));
    const confirmed = h("input", { id: "dep-sandbox-ok", type: "checkbox", checked: s.sandbox_env_confirmed ?? false });
    this.problems = h("div", { class: "problems", role: "alert" });
    const submit = h("button", { type: "submit", class: "primary" }, this.name ? "Save" : "Create");
    this.form = h(
      "form",
      {
        class: "deployment-form",
        novalidate: true, // the server is the one validator; its answer is shown below
        onsubmit: async (event) => {
          event.preventDefault();
          submit.disabled = true;
          try {
            await this.save(name.value.trim(), () => ({
              plugin: plugin.value,
              channel: channel.value.trim() || null,
              version: version.value.trim() || null,
              model: model.value.trim(),
              run_as: runAs.value,
              principal_id: principal.value.trim() || "prn_owner",
              limits: numbers({
                deadline_seconds: deadline.value,
                max_steps: steps.value,
                max_tokens: tokens.value,
                max_cost_usd: cost.value,
              }),
              credentials: parse(credentials, "Credentials"),
              tools: parse(tools, "Tool overrides"),
              sandbox_env: parse(sandbox, "Secrets in the sandbox"),
              sandbox_env_confirmed: confirmed.checked,
              egress: egress.value.split(/[\s,]+/).filter(Boolean),
            }));
          } finally {
            submit.disabled = false;
          }
        },
      },
      field("Name", name),
      field("Plugin", plugin),
      h(
        "fieldset",
        null,
        h("legend", null, "Which version"),
        field("Channel", channel, "New sessions use what this channel points at (default stable)."),
        field("Or a pinned version", version),
      ),
      field("Model", model, "provider:model, e.g. openai:gpt-4o or scripted:demo"),
      field("Turns run as", runAs),
      field("Principal (automation, or every turn)", principal),
      h(
        "fieldset",
        null,
        h("legend", null, "Limits per execution (empty: the default)"),
        field("Deadline (seconds)", deadline),
        field("Steps", steps),
        field("Tokens", tokens),
        field("Cost (USD)", cost),
      ),
      field("Credentials (JSON: server, secret, header, prefix)", credentials, "Secrets by name only: their values never appear here."),
      field("Tool overrides (JSON: server → url or command)", tools),
      field("Secrets in the sandbox (JSON: server, env, secret)", sandbox),
      field(
        "Egress (HOST:PORT, one a line)",
        egress,
        `Where sandboxed code may connect through the egress proxy: this list is what is enforced; empty, no network. ${
          current ? `${s.plugin} (as saved) requests: ${current.egress_requested?.join(", ") || "nothing"}.` : "The plugin's own list is only a request."
        }`,
      ),
      h("div", { class: "field check" }, confirmed, h("label", { for: "dep-sandbox-ok" }, "I confirm that these secrets are readable by code in the sandbox")),
      this.problems,
      submit,
    );
    fill(this.body, this.form);
  }

  async save(name, spec) {
    fill(this.problems);
    let body;
    try {
      body = spec();
    } catch (error) {
      fill(this.problems, h("p", { class: "notice" }, error.message));
      return;
    }
    for (const key of Object.keys(body)) if (body[key] === null) delete body[key];
    try {
      const saved = await this.api.json("PUT", `/v1/deployments/${encodeURIComponent(name)}`, { body });
      this.navigate(`#/deployments/${encodeURIComponent(saved.name)}`);
    } catch (error) {
      if (error.status === 401) return this.onFatal(error);
      fill(this.problems, ...problemList(error));
    }
  }
}

function parse(textarea, label) {
  try {
    return JSON.parse(textarea.value || "null") ?? undefined;
  } catch {
    throw new Error(`${label}: not valid JSON`);
  }
}

function numbers(fields) {
  const out = {};
  for (const [k, v] of Object.entries(fields)) if (v !== "") out[k] = Number(v);
  return out;
}

/** The server's refusal as it is: its detail and, for a 422, each invalid field. */
function problemList(error) {
  const p = error.problem ?? {};
  const items = (p.errors ?? []).map((e) =>
    h("li", null, h("code", null, (e.loc ?? []).filter((x) => x !== "body").join(".") || "body"), `: ${e.msg}`),
  );
  return [
    h("p", { class: "notice", dataset: { code: error.code } }, `Not saved (${error.code}): ${p.detail ?? error.message}`),
    items.length ? h("ul", { class: "errors" }, ...items) : null,
  ];
}
