// Automation (`#/automation`): each schedule with its cron, time zone, deployment, next
// fire (or "paused") and most recent runs, each linking to the session the fire started;
// each webhook with its URL, recent deliveries (linking to their sessions) and recent
// refusals (when, the problem code, the webhook-id as sent — never the payload).
// Schedules and hooks are made with `nua schedule` / `nua hook` or the API
// (docs/automation.md); admins pause and resume schedules here.

import { h, reconcile } from "./dom.js";
import { ago } from "./format.js";
import { Page, when } from "./kit.js";

const RUNS = 5;

export class AutomationPage extends Page {
  constructor(options) {
    super({ ...options, title: "Automation" });
    this.schedules = h("ul", { class: "schedules", "aria-labelledby": "schedules-h" });
    this.hooks = h("ul", { class: "hooks", "aria-labelledby": "hooks-h" });
    this.noSchedules = h("p", { class: "empty" });
    this.noHooks = h("p", { class: "empty" });
    this.body.append(
      h("h2", { id: "schedules-h" }, "Schedules"),
      this.noSchedules,
      this.schedules,
      h("h2", { id: "hooks-h" }, "Webhooks"),
      this.noHooks,
      this.hooks,
    );
  }

  async load() {
    const [{ schedules }, { hooks }] = await Promise.all([
      this.api.listSchedules(RUNS),
      this.api.list("/v1/hooks"),
    ]);
    const seen = await Promise.all(
      hooks.map((hook) =>
        this.api.json("GET", `/v1/hooks/${encodeURIComponent(hook.hook_id)}/deliveries?limit=5`),
      ),
    );
    return { schedules, hooks: hooks.map((hook, i) => ({ ...hook, ...seen[i] })) };
  }

  draw({ schedules, hooks }) {
    const manage = this.ctx.can("manage");
    const minute = Math.floor(Date.now() / 30000); // "3 min ago" moves on
    this.noSchedules.textContent = schedules.length
      ? ""
      : "No schedules yet. Create one with `nua schedule create`.";
    this.noSchedules.hidden = schedules.length > 0;
    reconcile(
      this.schedules,
      schedules.map((s) => ({
        key: s.schedule_id,
        sig: JSON.stringify([s, minute, manage]),
        create: () => this.scheduleItem(s, manage),
      })),
    );
    this.noHooks.textContent = hooks.length ? "" : "No webhooks yet. Create one with `nua hook create`.";
    this.noHooks.hidden = hooks.length > 0;
    reconcile(
      this.hooks,
      hooks.map((hook) => ({
        key: hook.hook_id,
        sig: JSON.stringify([hook, minute]),
        create: () => hookItem(hook),
      })),
    );
  }

  scheduleItem(s, manage) {
    const next = s.paused
      ? h("span", { class: "badge", dataset: { paused: "true" } }, "Paused")
      : h(
          "span",
          { class: "next-fire" },
          "Next fire ",
          s.next_fire_time
            ? h("time", { datetime: s.next_fire_time, title: s.next_fire_time }, s.next_fire_time)
            : "—",
        );
    const runs = s.recent_runs ?? [];
    const path = `/v1/schedules/${encodeURIComponent(s.schedule_id)}/${s.paused ? "resume" : "pause"}`;
    const toggle = manage
      ? h(
          "button",
          {
            type: "button",
            class: "toggle",
            onclick: () => this.act("Could not change the schedule", () => this.api.json("POST", path)),
          },
          `${s.paused ? "Resume" : "Pause"} ${s.name}`,
        )
      : null;
    return h(
      "li",
      { class: "schedule", dataset: { scheduleId: s.schedule_id } },
      h(
        "div",
        { class: "schedule-head" },
        h("span", { class: "title" }, s.name),
        h("code", { class: "cron" }, s.cron),
        h("span", { class: "tz" }, s.timezone),
        h("span", { class: "agent" }, s.deployment),
        next,
        toggle,
      ),
      runs.length
        ? h(
            "ol",
            { class: "runs", "aria-label": `Recent runs of ${s.name}` },
            ...runs.map((r) => {
              const when = h(
                "time",
                { datetime: r.fire_time, title: r.fire_time },
                `Fired ${ago(r.fired_at)}`,
              );
              return h(
                "li",
                { dataset: { fireTime: r.fire_time } },
                // A refused fire started no session: there is nothing to link to.
                r.session_id ? h("a", { href: `#/s/${encodeURIComponent(r.session_id)}` }, when) : when,
                ` · slot ${r.fire_time} · +${r.lag_seconds.toFixed(2)} s · `,
                h("span", { class: "run-status" }, r.status ?? "?"),
                r.error ? h("span", { class: "run-error" }, ` — ${r.error.code}: ${r.error.message}`) : null,
              );
            }),
          )
        : h("p", { class: "empty" }, "No runs yet."),
    );
  }
}

function hookItem(hook) {
  const item = h(
    "li",
    { class: "hook schedule", dataset: { hookId: hook.hook_id } },
    h(
      "div",
      { class: "schedule-head" },
      h("span", { class: "title" }, hook.name),
      h("span", { class: "agent" }, hook.deployment),
      h("code", { class: "url" }, hook.url),
    ),
  );
  const deliveries = hook.deliveries ?? [];
  const refusals = hook.refusals ?? [];
  item.append(
    h("h3", null, "Recent deliveries"),
    deliveries.length
      ? h(
          "ol",
          { class: "runs deliveries", "aria-label": `Recent deliveries of ${hook.name}` },
          ...deliveries.map((d) =>
            h(
              "li",
              { dataset: { deliveryId: d.delivery_id } },
              h("a", { href: `#/s/${encodeURIComponent(d.session_id)}` }, d.delivery_id),
              " · ",
              when(d.received_at),
            ),
          ),
        )
      : h("p", { class: "empty" }, "No deliveries yet."),
    h("h3", null, "Recent refusals"),
    refusals.length
      ? h(
          "ol",
          { class: "runs refusals", "aria-label": `Recent refusals of ${hook.name}` },
          ...refusals.map((r) =>
            h(
              "li",
              { dataset: { code: r.code } },
              h("span", { class: "badge status-failed" }, r.code),
              ` · ${r.delivery_id ?? "no webhook-id"} · ${r.body_bytes} bytes · `,
              when(r.refused_at),
            ),
          ),
        )
      : h("p", { class: "empty" }, "None refused."),
  );
  return item;
}
