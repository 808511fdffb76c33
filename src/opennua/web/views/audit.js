// Audit (`#/audit`, admins): the gateway's record of every call it answered — who, which
// execution, which server and tool, the host, the credential by *name*, the outcome and
// its latency — and of every connection sandboxed code made through the egress proxy
// (host, port, bytes each way, allowed or why not), filtered on the server. A record
// holds no header and no value, so neither does this page.

import { fill, h } from "./dom.js";
import { bytes } from "./format.js";
import { Page, field, table, when } from "./kit.js";

const PERIODS = [
  ["", "any time"],
  ["3600", "the last hour"],
  ["86400", "the last 24 hours"],
  ["604800", "the last 7 days"],
];
const OUTCOMES = ["", "ok", "error", "refused", "denied"];
const KINDS = [
  ["", "any"],
  ["tool_call", "tool calls"],
  ["egress", "egress connections"],
];
const KIND_LABEL = { tool_call: "tool call", egress: "egress connection" };

export class AuditPage extends Page {
  constructor(options) {
    super({ ...options, title: "Audit" });
    const input = (id, placeholder) => h("input", { id, placeholder, maxlength: 200 });
    this.filters = {
      kind: h("select", { id: "audit-kind" }, ...KINDS.map(([v, l]) => h("option", { value: v }, l))),
      principal_id: h("select", { id: "audit-principal" }),
      server: input("audit-server", "any server"),
      tool: input("audit-tool", "any tool"),
      outcome: h("select", { id: "audit-outcome" }, ...OUTCOMES.map((o) => h("option", { value: o }, o || "any"))),
      period: h("select", { id: "audit-period" }, ...PERIODS.map(([v, l]) => h("option", { value: v }, l))),
    };
    const f = this.filters;
    this.body.append(
      h(
        "form",
        {
          class: "filters",
          "aria-label": "Filter the audit",
          onsubmit: (event) => {
            event.preventDefault();
            this.refresh();
          },
        },
        field("Kind", f.kind),
        field("Principal", f.principal_id),
        field("Server", f.server),
        field("Tool", f.tool),
        field("Outcome", f.outcome),
        field("Within", f.period),
        h("button", { type: "submit" }, "Filter"),
      ),
    );
    this.table = table({
      caption: { text: "Gateway audit, newest first", hidden: true },
      columns: ["When", "Kind", "Principal", "Execution", "Server", "Tool", "Host", "Credential", "Bytes", "Outcome", "Time"],
      cls: "audit",
    });
    this.count = h("p", { class: "note", role: "status" });
    this.body.append(this.count, this.table.el);
  }

  load() {
    const f = this.filters;
    const principals = this.ctx.people.map((p) => [p.principal_id, this.ctx.nameOf(p.principal_id)]);
    const key = principals.map((p) => p[0]).join("|");
    if (key !== this.principalKey) {
      this.principalKey = key;
      const chosen = f.principal_id.value;
      fill(
        f.principal_id,
        h("option", { value: "" }, "anyone"),
        ...principals.map(([id, name]) => h("option", { value: id }, name)),
      );
      f.principal_id.value = chosen;
    }
    const period = Number(f.period.value);
    return this.api.list("/v1/audit", {
      limit: 200,
      kind: f.kind.value,
      principal_id: f.principal_id.value,
      server: f.server.value.trim(),
      tool: f.tool.value.trim(),
      outcome: f.outcome.value,
      since: period ? Math.floor(Date.now() / 1000) - period : null,
    });
  }

  draw({ items }) {
    this.count.textContent = `${items.length} record${items.length === 1 ? "" : "s"}${items.length === 200 ? " (the newest 200)" : ""}`;
    this.table.rows(
      items.map((a) => {
        const egress = a.kind === "egress";
        return {
          key: a.audit_id,
          data: a,
          dataset: { auditId: a.audit_id, outcome: a.outcome, kind: a.kind },
          cells: [
            when(a.at),
            KIND_LABEL[a.kind] ?? a.kind,
            this.ctx.nameOf(a.principal_id),
            a.execution_id ? h("code", null, a.execution_id) : "—",
            a.server,
            a.tool ?? "—",
            egress && a.port != null ? `${a.host ?? "?"}:${a.port}` : (a.host ?? "—"),
            a.credential ? h("code", null, a.credential) : "—",
            egress ? `up ${bytes(a.bytes_up ?? 0)} · down ${bytes(a.bytes_down ?? 0)}` : "—",
            h(
              "span",
              { class: `badge outcome-${a.outcome}` },
              a.code ? `${a.outcome}: ${a.code}` : a.outcome,
            ),
            // An egress record's time is the connection's whole duration.
            h("span", { title: egress ? "connection duration" : "latency" }, `${a.latency_ms.toFixed(1)} ms`),
          ],
        };
      }),
    );
  }
}
