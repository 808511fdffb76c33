// Secrets (`#/secrets`): each secret's name, creation, last change and last use. A value
// is write-only: typed into a password field, sent once (`PUT /v1/secrets/{name}`), never
// read back — no route answers with one.

import { h } from "./dom.js";
import { Page, confirmAction, field, table, when } from "./kit.js";

export class SecretsPage extends Page {
  constructor(options) {
    super({ ...options, title: "Secrets" });
    this.manage = this.ctx.can("manage");
    this.table = table({
      caption: { text: "Secrets of this workspace", hidden: true },
      columns: ["Name", "Created", "Last changed", "Last used", ""],
    });
    this.body.append(
      h(
        "p",
        { class: "note" },
        "Deployments name secrets; the gateway puts their values into the calls that need them. ",
        "A value can be replaced, never read.",
      ),
      this.table.el,
      this.manage ? this.form() : null,
    );
  }

  form() {
    this.name = h("input", { id: "secret-name", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9._-]{0,63}" });
    this.value = h("input", { id: "secret-value", type: "password", required: true, autocomplete: "new-password" });
    return h(
      "form",
      { class: "inline-form", onsubmit: (event) => this.save(event) },
      h("h2", { id: "secret-form-h" }, "Set a secret"),
      field("Name", this.name),
      field("Value", this.value, "Write-only: it is never shown again."),
      h("button", { type: "submit", class: "primary" }, "Save secret"),
    );
  }

  load() {
    return this.api.list("/v1/secrets");
  }

  draw({ items }) {
    this.table.rows(
      items.map((s) => ({
        key: s.name,
        data: s,
        dataset: { secret: s.name },
        cells: [
          h("code", null, s.name),
          when(s.created_at),
          when(s.updated_at),
          s.last_used_at ? when(s.last_used_at) : "never",
          this.manage
            ? h(
                "span",
                { class: "actions" },
                h("button", { type: "button", onclick: () => this.rotate(s.name) }, `Rotate ${s.name}`),
                h("button", { type: "button", onclick: () => this.remove(s.name) }, `Delete ${s.name}…`),
              )
            : "",
        ],
      })),
    );
  }

  rotate(name) {
    this.name.value = name;
    this.value.value = "";
    this.value.focus();
  }

  async save(event) {
    event.preventDefault();
    const name = this.name.value.trim();
    const value = this.value.value;
    const path = this.api.scoped(`/v1/secrets/${encodeURIComponent(name)}`);
    const saved = await this.act(`Could not save ${name}`, () =>
      this.api.json("PUT", path, { body: { value } }),
    );
    if (saved) {
      this.value.value = "";
      this.name.value = "";
    }
  }

  async remove(name) {
    const ok = await confirmAction({
      title: `Delete the secret ${name}?`,
      detail: "Deployments that name it fail to reach their tools until it is set again.",
      confirm: "Delete",
    });
    const path = this.api.scoped(`/v1/secrets/${encodeURIComponent(name)}`);
    if (ok) await this.act(`Could not delete ${name}`, () => this.api.request("DELETE", path));
  }
}
