// The session list: title, status, last activity, the agent (name@version) and a badge for
// sessions waiting on input, plus "New session" on a chosen deployment.
//
// Everything a row shows comes from the list route itself (one request per refresh,
// whatever the number of sessions): no per-session snapshot is fetched.

import { newId } from "../api.js";
import { fill, h, reconcile } from "./dom.js";
import { SESSION_STATUS, ago, problemText } from "./format.js";

const REFRESH_MS = 4000;

export class ListView {
  constructor({ api, clientId, navigate, onFatal }) {
    this.api = api;
    this.clientId = clientId;
    this.navigate = navigate;
    this.onFatal = onFatal;
    this.items = [];
    this.timer = null;
    this.closed = false;
    this.build();
  }

  build() {
    const title = h("input", {
      id: "new-title",
      name: "title",
      maxlength: 200,
      placeholder: "Untitled",
    });
    this.deployment = h(
      "select",
      { id: "new-deployment", name: "deployment" },
      h("option", { value: "default" }, "default"),
    );
    this.createButton = h("button", { type: "submit", class: "primary" }, "New session");
    this.list = h("ul", { class: "sessions", "aria-labelledby": "sessions-h" });
    this.status = h("p", { class: "empty", role: "status" }, "Loading…");
    this.error = h("div", { role: "alert" });
    this.root = h(
      "section",
      { class: "list-page" },
      h(
        "div",
        { class: "list-head" },
        h("h1", { id: "sessions-h" }, "Sessions"),
        h(
          "form",
          { class: "new-session", onsubmit: (event) => this.create(event, title) },
          h("label", { for: "new-title" }, "Title"),
          title,
          h("label", { for: "new-deployment" }, "Deployment"),
          this.deployment,
          this.createButton,
        ),
      ),
      this.error,
      this.status,
      this.list,
    );
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
      if (error.status === 401) return this.onFatal(error);
      this.showError(`Could not create a session: ${problemText(error)}`);
    } finally {
      this.createButton.disabled = false;
    }
  }

  async start() {
    await Promise.all([this.refresh(), this.loadDeployments()]);
    document.getElementById("new-title")?.focus();
  }

  async loadDeployments() {
    try {
      const { items } = await this.api.listDeployments();
      const chosen = this.deployment.value;
      fill(
        this.deployment,
        ...items.map((d) => h("option", { value: d.name, title: d.digest }, deploymentLabel(d))),
      );
      if (items.some((d) => d.name === chosen)) this.deployment.value = chosen;
    } catch (error) {
      if (error.status === 401) return this.onFatal(error);
      // Keep "default": a session can still be created.
    }
  }

  stop() {
    this.closed = true;
    clearTimeout(this.timer);
  }

  async refresh() {
    if (this.closed) return;
    try {
      const page = await this.api.listSessions();
      this.items = page.items;
      this.render();
    } catch (error) {
      if (error.status === 401) return this.onFatal(error);
      this.showError(`Could not load sessions: ${problemText(error)}`);
    }
    if (!this.closed) this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  showError(text) {
    fill(this.error, h("p", { class: "notice" }, text));
  }

  render() {
    fill(this.error);
    this.status.textContent = this.items.length ? "" : "No sessions yet. Create one to start.";
    this.status.hidden = this.items.length > 0;
    reconcile(
      this.list,
      this.items.map((item) => ({
        key: item.session_id,
        sig: JSON.stringify([item, Math.floor(Date.now() / 30000)]),
        create: () => row(item),
      })),
    );
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
        ? h("span", { class: "agent", title: item.snapshot_digest ?? "" }, item.plugin)
        : null,
      h("time", { datetime: last, title: last }, `Last activity ${ago(last)}`),
    ),
  );
}
