// The session list: title, status, a badge for sessions waiting on input, the execution
// snapshot (name@version, deployment, digest) and last activity; filters (status,
// deployment, principal, needs input, creation time, title), keyset pages, and "New
// session" on a chosen deployment for those who may act.
//
// Everything a row shows comes from the list route itself (one request per refresh,
// whatever the number of sessions): no per-session snapshot is fetched. The page on
// screen is fetched again every 2 s, so status and input badges move without a reload.

import { newId } from "../api.js";
import { fill, h, reconcile } from "./dom.js";
import { SESSION_STATUS, ago } from "./format.js";
import { Page, field, shortDigest } from "./kit.js";

const REFRESH_MS = 2000;
const PAGE = 50;

export class ListView extends Page {
  constructor({ api, ctx, clientId, navigate, onFatal }) {
    super({ api, ctx, onFatal, title: "Sessions", every: REFRESH_MS });
    this.clientId = clientId;
    this.navigate = navigate;
    this.items = [];
    this.cursors = [null]; // the cursor of each page up to the one on screen
    this.next = null;
    this.build();
  }

  build() {
    this.list = h("ul", { class: "sessions", "aria-labelledby": this.heading.id });
    this.status = h("p", { class: "empty", role: "status" }, "Loading…");
    this.older = h("button", { type: "button", onclick: () => this.page(+1) }, "Older sessions");
    this.newer = h("button", { type: "button", onclick: () => this.page(-1) }, "Newer sessions");
    this.pageLabel = h("span", { class: "note", "aria-live": "polite" });
    if (this.ctx?.can("act") !== false) this.toolbar.append(this.createForm());
    this.body.append(
      this.filterForm(),
      this.status,
      this.list,
      h("nav", { class: "pager", "aria-label": "Pages of sessions" }, this.newer, this.pageLabel, this.older),
    );
  }

  createForm() {
    const title = h("input", { id: "new-title", name: "title", maxlength: 200, placeholder: "Untitled" });
    this.deployment = h(
      "select",
      { id: "new-deployment", name: "deployment" },
      h("option", { value: "default" }, "default"),
    );
    this.createButton = h("button", { type: "submit", class: "primary" }, "New session");
    return h(
      "form",
      { class: "new-session", onsubmit: (event) => this.create(event, title) },
      h("label", { for: "new-title" }, "Title"),
      title,
      h("label", { for: "new-deployment" }, "Deployment"),
      this.deployment,
      this.createButton,
    );
  }

  filterForm() {
    const changed = () => {
      this.cursors = [null];
      this.refresh();
    };
    this.filters = {
      q: h("input", { id: "filter-q", type: "search", maxlength: 200, placeholder: "in the title" }),
      status: h(
        "select",
        { id: "filter-status", onchange: changed },
        h("option", { value: "" }, "any"),
        ...Object.entries(SESSION_STATUS)
          .filter(([k]) => k !== "archived")
          .map(([k, label]) => h("option", { value: k }, label)),
      ),
      needs_input: h("input", { id: "filter-needs-input", type: "checkbox", onchange: changed }),
      deployment: h("select", { id: "filter-deployment", onchange: changed }, h("option", { value: "" }, "any")),
      principal_id: h("select", { id: "filter-principal", onchange: changed }, h("option", { value: "" }, "anyone")),
      since: h("input", { id: "filter-since", type: "datetime-local", onchange: changed }),
      until: h("input", { id: "filter-until", type: "datetime-local", onchange: changed }),
    };
    const f = this.filters;
    return h(
      "form",
      {
        class: "filters",
        role: "search",
        "aria-label": "Filter sessions",
        onsubmit: (event) => {
          event.preventDefault();
          changed();
        },
      },
      field("Search", f.q),
      field("Status", f.status),
      h("div", { class: "field check" }, f.needs_input, h("label", { for: f.needs_input.id }, "Needs input")),
      field("Deployment", f.deployment),
      field("Started by", f.principal_id),
      field("Created from", f.since),
      field("Created before", f.until),
      h("button", { type: "submit" }, "Search"),
    );
  }

  query() {
    const f = this.filters;
    const seconds = (input) => (input.value ? Math.floor(Date.parse(input.value) / 1000) : null);
    return {
      q: f.q.value.trim(),
      status: f.status.value,
      needs_input: f.needs_input.checked ? "true" : null,
      deployment: f.deployment.value,
      principal_id: f.principal_id.value,
      since: seconds(f.since),
      until: seconds(f.until),
    };
  }

  page(step) {
    if (step > 0 && this.next) this.cursors.push(this.next);
    if (step < 0 && this.cursors.length > 1) this.cursors.pop();
    this.refresh();
  }

  async create(event, titleInput) {
    event.preventDefault();
    this.createButton.disabled = true;
    try {
      const { session_id } = await this.api.createSession({
        title: titleInput.value.trim(),
        clientId: this.clientId,
        intentId: newId("int_"),
        deployment: this.deployment.value || null,
      });
      this.navigate(session_id);
    } catch (error) {
      this.report(error, "Could not create a session");
    } finally {
      this.createButton.disabled = false;
    }
  }

  async start() {
    this.fillPrincipals();
    await Promise.all([this.refresh(), this.loadDeployments()]);
    document.getElementById("new-title")?.focus();
  }

  fillPrincipals() {
    const people = this.ctx?.people ?? [];
    fill(
      this.filters.principal_id,
      h("option", { value: "" }, "anyone"),
      ...people.map((p) => h("option", { value: p.principal_id }, this.ctx.nameOf(p.principal_id))),
    );
  }

  async loadDeployments() {
    try {
      const { items } = await this.api.listDeployments();
      const options = (withTarget) =>
        items.map((d) => h("option", { value: d.name, title: d.digest }, withTarget ? deploymentLabel(d) : d.name));
      if (this.deployment) {
        const chosen = this.deployment.value;
        fill(this.deployment, ...options(true));
        if (items.some((d) => d.name === chosen)) this.deployment.value = chosen;
      }
      fill(this.filters.deployment, h("option", { value: "" }, "any"), ...options(false));
    } catch (error) {
      if (error.status === 401) this.onFatal(error);
      // Otherwise keep "default": a session can still be created.
    }
  }

  load() {
    return this.api.listSessions({ cursor: this.cursors.at(-1), limit: PAGE, ...this.query() });
  }

  draw(page) {
    this.items = page.items;
    this.next = page.next_cursor;
    const filtered = Object.values(this.query()).some((v) => v !== null && v !== "");
    this.status.textContent = this.items.length
      ? ""
      : filtered
        ? "No session matches these filters."
        : "No sessions yet. Create one to start.";
    this.status.hidden = this.items.length > 0;
    this.older.disabled = !this.next;
    this.newer.disabled = this.cursors.length <= 1;
    this.pageLabel.textContent = `Page ${this.cursors.length}`;
    reconcile(
      this.list,
      this.items.map((item) => ({
        key: item.session_id,
        sig: JSON.stringify([item, Math.floor(Date.now() / 30000)]),
        create: () => row(item),
      })),
    );
    if (!this.marked) {
      // What benchmarks/ui_render.py --sessions times: the first page drawn, and its frame.
      this.marked = true;
      performance.mark("nua:list-rendered");
      requestAnimationFrame(() => setTimeout(() => performance.mark("nua:list-painted"), 0));
    }
  }
}

function deploymentLabel(d) {
  const target = d.spec.version ? `@${d.spec.version}` : `:${d.spec.channel ?? "stable"}`;
  return `${d.name} (${d.spec.plugin}${target})`;
}

function row(item) {
  const status = item.status;
  const last = item.last_activity_at ?? item.created_at;
  return h(
    "li",
    { dataset: { sessionId: item.session_id, status: status ?? "" } },
    h(
      "a",
      { class: "session-row", href: `#/s/${encodeURIComponent(item.session_id)}` },
      h("span", { class: "title" }, item.title || "Untitled session"),
      status
        ? h("span", { class: `badge status-${status}` }, SESSION_STATUS[status] ?? status)
        : h("span", { class: "badge" }, "…"),
      item.open_input_requests
        ? h(
            "span",
            { class: "badge needs-input", dataset: { needsInput: "true" } },
            `Needs input (${item.open_input_requests})`,
          )
        : null,
      item.plugin
        ? h(
            "span",
            { class: "agent", title: item.snapshot_digest ?? "" },
            `${item.plugin}${item.deployment ? ` · ${item.deployment}` : ""}`,
            item.snapshot_digest ? h("code", { class: "digest" }, ` ${shortDigest(item.snapshot_digest)}`) : null,
          )
        : null,
      h("time", { datetime: last, title: last }, `Last activity ${ago(last)}`),
    ),
  );
}
