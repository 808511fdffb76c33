// The session list: title, status, last activity and a badge for sessions waiting on input,
// plus "New session".
//
// The list route gives ids, titles and each session's last seq, not its status. Status and
// last activity come from each session's snapshot, fetched only when its seq moved since we
// last looked, and refreshed every few seconds while the list is on screen.

import { newId } from "../api.js";
import { fill, h, reconcile } from "./dom.js";
import { SESSION_STATUS, ago, problemText } from "./format.js";

const REFRESH_MS = 4000;
const PARALLEL = 4;

export class ListView {
  constructor({ api, clientId, navigate, onFatal }) {
    this.api = api;
    this.clientId = clientId;
    this.navigate = navigate;
    this.onFatal = onFatal;
    /** session_id → {seq, summary} from the snapshot at that seq. */
    this.summaries = new Map();
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
    await this.refresh();
    document.getElementById("new-title")?.focus();
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
      const moved = page.items.filter(
        (s) => this.summaries.get(s.session_id)?.seq !== s.last_seq,
      );
      await this.summarize(moved);
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

  async summarize(sessions) {
    const queue = [...sessions];
    const worker = async () => {
      while (queue.length && !this.closed) {
        const session = queue.shift();
        try {
          const { seq, state } = await this.api.snapshot(session.session_id);
          this.summaries.set(session.session_id, {
            seq,
            status: state.status,
            lastActivity: state.last_activity_at,
            waiting: state.open_input_requests.length,
          });
        } catch {
          // Shown without status; the next refresh tries again.
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
  }

  render() {
    fill(this.error);
    this.status.textContent = this.items.length ? "" : "No sessions yet. Create one to start.";
    this.status.hidden = this.items.length > 0;
    reconcile(
      this.list,
      this.items.map((item) => {
        const summary = this.summaries.get(item.session_id);
        return {
          key: item.session_id,
          sig: JSON.stringify([item.title, item.last_seq, summary, Math.floor(Date.now() / 30000)]),
          create: () => row(item, summary),
        };
      }),
    );
  }
}

function row(item, summary) {
  const status = summary?.status;
  const last = summary?.lastActivity ?? item.created_at;
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
      summary?.waiting
        ? h(
            "span",
            { class: "badge needs-input", dataset: { needsInput: "true" } },
            `Needs input (${summary.waiting})`,
          )
        : null,
      h("time", { datetime: last, title: last }, `Last activity ${ago(last)}`),
    ),
  );
}
