// People and access (`#/people`): the workspace's members — people and agent principals —
// with their roles, and API tokens (yours, and those of the agent principals you manage).
// A new token's value is shown once, in this page only, and never again. Owners and admins
// also see every member's tokens (ids, never secrets) and revoke one for this workspace's
// work; server admins see everyone on the server (views/everyone.js).

import { fill, h } from "./dom.js";
import { Everyone } from "./everyone.js";
import { Page, confirmAction, field, table, when } from "./kit.js";

const ROLES = ["viewer", "member", "admin", "owner"];
const EXPIRY = [
  ["", "never (until revoked)"],
  ["86400", "in a day"],
  ["2592000", "in 30 days"],
  ["31536000", "in a year"],
];

export class PeoplePage extends Page {
  constructor(options) {
    super({ ...options, title: "People and access" });
    this.manage = this.ctx.can("manage");
    this.members = table({
      caption: "Members",
      columns: ["Name", "Kind", "Role", "May", "Since", ""],
    });
    this.tokens = table({
      caption: "Tokens",
      columns: ["Name", "Token", "Created", "Expires", "State", ""],
    });
    this.owner = h("select", { id: "token-owner", onchange: () => this.refresh() });
    this.reveal = h("div", { class: "reveal", "aria-live": "polite" });
    this.memberTokens = this.manage
      ? table({
          caption: `Tokens of the members of ${this.ctx.name}`,
          columns: ["Name", "Token", "Whose", "Created", "Expires", "State", ""],
          cls: "member-tokens",
        })
      : null;
    this.everyone = new Everyone(this);
    this.body.append(
      this.members.el,
      this.manage ? this.agentForm() : null,
      h("h2", null, "API tokens"),
      field("Tokens of", this.owner),
      this.tokens.el,
      this.tokenForm(),
      this.reveal,
      this.manage ? h("h2", null, "Members' tokens in this workspace") : null,
      this.manage
        ? h(
            "p",
            { class: "note" },
            "Revoking a token here closes this workspace to it: what it started here ends revoked; " +
              "its holder's other workspaces are untouched.",
          )
        : null,
      this.memberTokens?.el,
      this.everyone.el,
    );
  }

  agentForm() {
    const name = h("input", { id: "agent-name", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9._@-]*" });
    const role = roleSelect("agent-role", "member");
    return h(
      "form",
      {
        class: "inline-form",
        onsubmit: async (event) => {
          event.preventDefault();
          const path = `/v1/workspaces/${encodeURIComponent(this.ctx.id)}/agent-principals`;
          const made = await this.act("Could not create the agent principal", () =>
            this.api.json("POST", path, { body: { name: name.value.trim(), role: role.value } }),
          );
          if (made) name.value = "";
        },
      },
      h("h2", null, "New agent principal"),
      field("Name", name),
      field("Role", role),
      h("button", { type: "submit" }, "Create agent principal"),
    );
  }

  tokenForm() {
    const name = h("input", { id: "token-name", maxlength: 100, placeholder: "what it is for" });
    const expires = h(
      "select",
      { id: "token-expires" },
      ...EXPIRY.map(([value, label]) => h("option", { value }, label)),
    );
    return h(
      "form",
      {
        class: "inline-form",
        onsubmit: async (event) => {
          event.preventDefault();
          const body = { principal_id: this.owner.value || null, name: name.value.trim() || null };
          if (expires.value) body.expires_in = Number(expires.value);
          const made = await this.act("Could not create the token", () =>
            this.api.json("POST", "/v1/tokens", { body }),
          );
          if (made) {
            name.value = "";
            this.showOnce(made);
          }
        },
      },
      h("h3", null, "New token"),
      field("Name", name),
      field("Expires", expires),
      h("button", { type: "submit" }, "Create token"),
    );
  }

  showOnce(made) {
    const value = h("input", {
      id: "new-token-value",
      readonly: true,
      value: made.token,
      autocomplete: "off",
      spellcheck: "false",
    });
    fill(
      this.reveal,
      h(
        "div",
        { class: "once", dataset: { tokenId: made.token_id } },
        h("p", null, h("strong", null, "Copy this token now: it is shown once and never again.")),
        field(`Token ${made.name ?? made.token_id}`, value),
        h(
          "button",
          {
            type: "button",
            onclick: () => {
              value.select();
              navigator.clipboard?.writeText(made.token).catch(() => {});
            },
          },
          "Copy",
        ),
        h("button", { type: "button", onclick: () => fill(this.reveal) }, "Done"),
      ),
    );
    value.focus();
    value.select();
  }

  async load() {
    // Whoami again too: whether the caller is (still) a server admin is the server's answer.
    await Promise.all([this.ctx.refreshMe(), this.ctx.refreshPeople()]);
    const owners = [
      [this.ctx.me.principal_id, `you (${this.ctx.me.name})`],
      ...(this.manage
        ? this.ctx.people.filter((p) => p.kind === "agent" && !p.disabled).map((p) => [p.principal_id, `${p.name} (agent)`])
        : []),
    ];
    const chosen = this.owner.value || this.ctx.me.principal_id;
    const key = owners.map((o) => o.join("=")).join("|");
    if (key !== this.ownerKey) {
      this.ownerKey = key;
      fill(this.owner, ...owners.map(([id, label]) => h("option", { value: id }, label)));
      this.owner.value = owners.some(([id]) => id === chosen) ? chosen : this.ctx.me.principal_id;
    }
    const workspace = `/v1/workspaces/${encodeURIComponent(this.ctx.id)}/tokens`;
    const [tokens, memberTokens, everyone] = await Promise.all([
      this.api.json("GET", `/v1/tokens?principal_id=${encodeURIComponent(this.owner.value)}`),
      this.manage ? this.api.json("GET", workspace) : null,
      this.everyone.load(),
    ]);
    return { people: this.ctx.people, tokens: tokens.items, memberTokens: memberTokens?.items, everyone };
  }

  draw({ people, tokens, memberTokens, everyone }) {
    this.everyone.draw(everyone);
    if (memberTokens) this.drawMemberTokens(memberTokens);
    this.members.rows(
      people.map((p) => ({
        key: p.principal_id,
        data: [p, this.manage],
        dataset: { principalId: p.principal_id },
        cells: [
          h("span", { title: p.principal_id }, p.name ?? p.principal_id),
          p.kind ?? "?",
          this.manage && p.principal_id !== this.ctx.me.principal_id ? this.roleEditor(p) : p.role,
          p.permissions.join(", "),
          p.disabled ? h("span", { class: "badge status-failed" }, "disabled") : when(p.created_at),
          this.manage && p.principal_id !== this.ctx.me.principal_id ? this.memberActions(p) : "",
        ],
      })),
    );
    this.tokens.rows(
      tokens.map((t) => ({
        key: t.token_id,
        data: t,
        dataset: { tokenId: t.token_id },
        cells: [
          t.name ?? "—",
          h("code", null, t.token_id),
          when(t.created_at),
          t.expires_at ? h("time", { datetime: t.expires_at }, t.expires_at) : "never",
          t.revoked_at ? h("span", { class: "badge status-failed" }, "revoked") : "active",
          t.revoked_at
            ? ""
            : h(
                "button",
                { type: "button", onclick: () => this.revoke(t) },
                `Revoke ${t.name ?? t.token_id}…`,
              ),
        ],
      })),
    );
  }

  drawMemberTokens(tokens) {
    const holders = new Map(this.ctx.people.map((p) => [p.principal_id, p]));
    const now = Date.now();
    this.memberTokens.rows(
      tokens.map((t) => {
        const holder = holders.get(t.principal_id);
        const mine = t.token_id === this.ctx.me.token_id;
        // Only an owner revokes an owner's token here (the server refuses anyone else).
        const may = holder?.role !== "owner" || this.ctx.can("own");
        const active =
          !t.revoked_at && !t.revoked_here_at && !holder?.disabled && !(t.expires_at && Date.parse(t.expires_at) <= now);
        return {
          key: t.token_id,
          data: [t, mine, may, active, holder?.disabled],
          dataset: { memberTokenId: t.token_id },
          cells: [
            t.name ?? "—",
            h("code", null, t.token_id),
            this.ctx.nameOf(t.principal_id),
            when(t.created_at),
            t.expires_at ? h("time", { datetime: t.expires_at }, t.expires_at) : "never",
            tokenState(t, mine, active, holder?.disabled),
            active && may && !mine ? this.revokeHereButton(t) : "",
          ],
        };
      }),
    );
  }

  revokeHereButton(t) {
    const label = t.name ?? t.token_id;
    const whose = this.ctx.nameOf(t.principal_id);
    const path = `/v1/workspaces/${encodeURIComponent(this.ctx.id)}/tokens/${encodeURIComponent(t.token_id)}`;
    return h(
      "button",
      {
        type: "button",
        onclick: async () => {
          const ok = await confirmAction({
            title: `Revoke ${whose}'s token ${label} for ${this.ctx.name}?`,
            detail:
              `It opens nothing in ${this.ctx.name} from now on, and what it started here ends ` +
              `revoked. ${whose}'s other workspaces are not this workspace's business: there it still works.`,
            confirm: "Revoke here",
          });
          if (ok) await this.act("Could not revoke the token", () => this.api.json("DELETE", path));
        },
      },
      `Revoke ${label} of ${whose} here…`,
    );
  }

  roleEditor(p) {
    const select = roleSelect(`role-${p.principal_id}`, p.role);
    return h(
      "span",
      { class: "role-edit" },
      h("label", { for: select.id, class: "sr-only" }, `Role of ${p.name}`),
      select,
      h(
        "button",
        {
          type: "button",
          onclick: () =>
            this.act("Could not change the role", () =>
              this.api.json("PUT", this.memberPath(p), { body: { role: select.value } }),
            ),
        },
        `Save role of ${p.name}`,
      ),
    );
  }

  memberActions(p) {
    const buttons = [
      h("button", { type: "button", onclick: () => this.remove(p) }, `Remove ${p.name}…`),
    ];
    if (p.kind === "agent" && !p.disabled) {
      buttons.push(h("button", { type: "button", onclick: () => this.disable(p) }, `Disable ${p.name}…`));
    }
    return h("span", { class: "actions" }, ...buttons);
  }

  memberPath(p) {
    return `/v1/workspaces/${encodeURIComponent(this.ctx.id)}/members/${encodeURIComponent(p.principal_id)}`;
  }

  async remove(p) {
    const ok = await confirmAction({
      title: `Remove ${p.name} from ${this.ctx.name}?`,
      detail: "They lose access to this workspace at once; work that runs as them stops.",
      confirm: "Remove",
    });
    if (ok) await this.act("Could not remove the member", () => this.api.request("DELETE", this.memberPath(p)));
  }

  async disable(p) {
    const ok = await confirmAction({
      title: `Disable the agent principal ${p.name}?`,
      detail: "Its tokens stop working and executions that run as it are ended.",
      confirm: "Disable",
    });
    const path = `/v1/agent-principals/${encodeURIComponent(p.principal_id)}/disable`;
    if (ok) await this.act("Could not disable the agent principal", () => this.api.json("POST", path));
  }

  async revoke(t) {
    const ok = await confirmAction({
      title: `Revoke the token ${t.name ?? t.token_id}?`,
      detail: "Whatever uses it is refused from now on.",
      confirm: "Revoke",
    });
    const path = `/v1/tokens/${encodeURIComponent(t.token_id)}`;
    if (ok) await this.act("Could not revoke the token", () => this.api.json("DELETE", path));
  }
}

function tokenState(t, mine, active, disabled) {
  if (t.revoked_at) return h("span", { class: "badge status-failed" }, "revoked");
  if (t.revoked_here_at) return h("span", { class: "badge status-failed" }, "revoked here");
  if (disabled) return h("span", { class: "badge status-failed" }, "refused: holder disabled");
  if (!active) return "expired";
  return mine ? "active (this login)" : "active";
}

function roleSelect(id, value) {
  return h(
    "select",
    { id },
    ...ROLES.map((r) => h("option", { value: r, selected: r === value }, r)),
  );
}
