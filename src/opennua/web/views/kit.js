// What every console page shares: a page that refreshes itself, tables, labelled fields,
// a confirmation dialog, and the short forms of digests and times.

import { fill, h, reconcile } from "./dom.js";
import { ago, problemText } from "./format.js";

/**
 * A page of the console: a heading, a toolbar, an alert region and a body, refreshed
 * every `every` ms while it is on screen. Subclasses implement `load()` (fetch) and
 * `draw(data)` (update the DOM); `refresh()` runs both and reports failures.
 */
export class Page {
  constructor({ title, every = 4000, onFatal, ctx, api }) {
    this.api = api;
    this.ctx = ctx;
    this.onFatal = onFatal;
    this.every = every;
    this.closed = false;
    this.timer = null;
    this.toolbar = h("div", { class: "toolbar" });
    this.error = h("div", { role: "alert", class: "alerts" });
    this.body = h("div", { class: "page-body" });
    const id = `h-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
    this.heading = h("h1", { id }, title);
    this.root = h(
      "section",
      { class: "list-page console-page", "aria-labelledby": id, dataset: { page: title } },
      h("div", { class: "list-head" }, this.heading, this.toolbar),
      this.error,
      this.body,
    );
  }

  start() {
    return this.refresh();
  }

  stop() {
    this.closed = true;
    clearTimeout(this.timer);
  }

  async refresh() {
    if (this.closed) return;
    clearTimeout(this.timer);
    try {
      const data = await this.load();
      if (this.closed) return;
      this.draw(data);
      this.root.dataset.loaded = "true";
      fill(this.error);
    } catch (error) {
      if (!this.report(error)) return;
    }
    if (!this.closed && this.every) this.timer = setTimeout(() => this.refresh(), this.every);
  }

  /** Show a failure; false when the page cannot go on (logged out). */
  report(error, what = "Could not load this page") {
    if (error.status === 401) {
      this.onFatal(error);
      return false;
    }
    const text =
      error.code === "insufficient_role"
        ? `${what}: your role in this workspace does not allow it.`
        : `${what}: ${problemText(error)}`;
    fill(this.error, h("p", { class: "notice" }, text));
    return true;
  }

  /** Run a change (a button's action), then refresh; failures go to the alert region. */
  async act(what, change) {
    try {
      const result = await change();
      fill(this.error);
      await this.refresh();
      return result;
    } catch (error) {
      this.report(error, what);
      return undefined;
    }
  }
}

/**
 * A table with a caption and column headers whose rows are reconciled by key (a row whose
 * data did not change keeps its node, and focus inside it).
 */
export function table({ caption, columns, cls = "" }) {
  const tbody = h("tbody");
  const el = h(
    "table",
    { class: `grid ${cls}` },
    h("caption", { class: caption.hidden ? "sr-only" : null }, caption.text ?? caption),
    h("thead", null, h("tr", null, ...columns.map((c) => h("th", { scope: "col" }, c)))),
    tbody,
  );
  return {
    el,
    /** rows: [{key, sig?, cells: [Node|string, …], data?}] */
    rows(rows) {
      reconcile(
        tbody,
        rows.map((r) => ({
          key: r.key,
          sig: r.sig ?? JSON.stringify(r.data ?? r.cells.map((c) => (c?.textContent ?? c) ?? "")),
          create: () =>
            h("tr", { dataset: r.dataset ?? null }, ...r.cells.map((c, i) => cell(c, i === 0))),
        })),
      );
      return el;
    },
  };
}

function cell(content, first) {
  return first ? h("th", { scope: "row" }, content) : h("td", null, content);
}

/** A labelled control: `<label for=id>text</label>` + the control (which gets the id). */
export function field(text, control, hint = null) {
  const hintId = hint ? `${control.id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, text),
    control,
    hint ? h("small", { id: hintId, class: "hint" }, hint) : null,
  );
}

/**
 * Ask before a change: a modal `<dialog>` (Esc or Cancel: false). `detail` says what will
 * happen, e.g. "Later sessions only: running sessions keep their version."
 */
export function confirmAction({ title, detail, confirm = "Confirm" }) {
  return new Promise((resolve) => {
    const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const yes = h("button", { type: "button", class: "primary", onclick: () => done(true) }, confirm);
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": titleId, "aria-describedby": `${titleId}-d` },
      h("h2", { id: titleId }, title),
      h("p", { id: `${titleId}-d` }, detail),
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
        yes,
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    yes.focus();
  });
}

/** `sha256:abcdef…` → `abcdef012345` (12 hex digits: enough to tell versions apart). */
export function shortDigest(digest) {
  return (digest ?? "").replace(/^sha256:/, "").slice(0, 12);
}

/** A `<time>` that reads "3 min ago" and shows the exact stamp on hover. */
export function when(stamp) {
  if (!stamp) return "—";
  return h("time", { datetime: stamp, title: stamp }, ago(stamp));
}

/** A `<code>` digest, short, with the whole one on hover and for screen readers' copy. */
export function digest(value) {
  if (!value) return "—";
  return h("code", { class: "digest", title: value }, shortDigest(value));
}
