// The People page's section for server admins: every principal of the server (people and
// agent principals, `GET /v1/principals`), making a person a server admin or no longer
// one (`PUT|DELETE /v1/admins/{pid}`), and disabling a person everywhere (`POST
// /v1/users/{pid}/disable`). Whether the caller is a server admin is the server's answer
// (`whoami`); the server refuses everyone else all the same.

import { h } from "./dom.js";
import { confirmAction, table, when } from "./kit.js";

export class Everyone {
  /** `page`: the People page, whose `act()` runs a change and refreshes it. */
  constructor(page) {
    this.page = page;
    this.ctx = page.ctx;
    this.api = page.api;
    this.table = table({
      caption: "Everyone on this server",
      columns: ["Name", "Kind", "Workspace", "Since", "State", ""],
    });
    this.el = h(
      "section",
      { class: "everyone", "aria-labelledby": "h-everyone", hidden: true },
      h("h2", { id: "h-everyone" }, "Server admin"),
      h(
        "p",
        { class: "note" },
        "You are a server admin: you manage the people of this server, in every workspace. " +
          "Being one opens no workspace's sessions by itself.",
      ),
      this.table.el,
    );
  }

  /** Every principal, or null when the caller is not a server admin (nothing is asked). */
  async load() {
    if (!this.ctx.serverAdmin) return null;
    return (await this.api.json("GET", "/v1/principals")).items;
  }

  draw(principals) {
    this.el.hidden = principals === null;
    this.table.rows(
      (principals ?? []).map((p) => ({
        key: p.principal_id,
        data: p,
        dataset: { principalId: p.principal_id },
        cells: [
          h("span", { title: p.principal_id }, p.name),
          p.kind,
          p.workspace_id ? this.workspaceName(p.workspace_id) : "—",
          when(p.created_at),
          state(p),
          p.kind === "user" && !p.disabled && p.principal_id !== this.ctx.me.principal_id
            ? h("span", { class: "actions" }, this.adminButton(p), this.disableButton(p))
            : "",
        ],
      })),
    );
  }

  workspaceName(workspaceId) {
    const known = this.ctx.me.workspaces.find((w) => w.workspace_id === workspaceId);
    return known ? known.name : h("code", null, workspaceId);
  }

  adminButton(p) {
    const path = `/v1/admins/${encodeURIComponent(p.principal_id)}`;
    const change = p.server_admin
      ? {
          label: `No longer server admin: ${p.name}…`,
          title: `${p.name} no longer a server admin?`,
          detail: "They stop managing the server's people. Their roles in workspaces stay as they are.",
          confirm: "No longer server admin",
          method: "DELETE",
        }
      : {
          label: `Make ${p.name} a server admin…`,
          title: `Make ${p.name} a server admin?`,
          detail:
            "They will see every principal of the server, disable people everywhere and make " +
            "or unmake server admins. It opens no workspace's sessions by itself.",
          confirm: "Make server admin",
          method: "PUT",
        };
    return h(
      "button",
      {
        type: "button",
        onclick: async () => {
          if (await confirmAction(change)) {
            await this.page.act("Could not change who is a server admin", () => this.api.json(change.method, path));
          }
        },
      },
      change.label,
    );
  }

  disableButton(p) {
    return h(
      "button",
      {
        type: "button",
        onclick: async () => {
          const ok = await confirmAction({
            title: `Disable ${p.name} everywhere?`,
            detail:
              "Every token of theirs is refused from now on, in every workspace; their open " +
              "streams close, and their running or waiting work ends revoked within a second. " +
              "A disabled person cannot be enabled again.",
            confirm: "Disable",
          });
          const path = `/v1/users/${encodeURIComponent(p.principal_id)}/disable`;
          if (ok) await this.page.act("Could not disable the user", () => this.api.json("POST", path));
        },
      },
      `Disable ${p.name}…`,
    );
  }
}

function state(p) {
  if (p.disabled) return h("span", { class: "badge status-failed" }, "disabled");
  if (p.server_admin) return h("span", { class: "badge", dataset: { serverAdmin: "" } }, "server admin");
  return "active";
}
