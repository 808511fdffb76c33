// The schedules page: each schedule of the workspace with its cron, time zone, deployment,
// next fire (or "paused") and its most recent runs, each linking to the session the fire
// started. One request per refresh (`GET /v1/schedules?runs=5`); read-only: schedules are
// made and changed with `nua schedule` or the API (docs/automation.md).

import { fill, h, reconcile } from "./dom.js";
import { ago, problemText } from "./format.js";

const REFRESH_MS = 4000;
const RUNS = 5;

export class SchedulesView {
  constructor({ api, onFatal }) {
    this.api = api;
    this.onFatal = onFatal;
    this.timer = null;
    this.closed = false;
    this.list = h("ul", { class: "schedules", "aria-labelledby": "schedules-h" });
    this.status = h("p", { class: "empty", role: "status" }, "Loading…");
    this.error = h("div", { role: "alert" });
    this.root = h(
      "section",
      { class: "list-page" },
      h("div", { class: "list-head" }, h("h1", { id: "schedules-h" }, "Schedules")),
      this.error,
      this.status,
      this.list,
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
    try {
      const { schedules } = await this.api.listSchedules(RUNS);
      fill(this.error);
      this.status.textContent = schedules.length
        ? ""
        : "No schedules yet. Create one with `nua schedule create`.";
      this.status.hidden = schedules.length > 0;
      reconcile(
        this.list,
        schedules.map((s) => ({
          key: s.schedule_id,
          sig: JSON.stringify([s, Math.floor(Date.now() / 30000)]),
          create: () => scheduleItem(s),
        })),
      );
    } catch (error) {
      if (error.status === 401) return this.onFatal(error);
      fill(this.error, h("p", { class: "notice" }, `Could not load schedules: ${problemText(error)}`));
    }
    if (!this.closed) this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }
}

function scheduleItem(s) {
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
    ),
    runs.length
      ? h(
          "ol",
          { class: "runs", "aria-label": `Recent runs of ${s.name}` },
          ...runs.map((r) =>
            h(
              "li",
              { dataset: { fireTime: r.fire_time } },
              h(
                "a",
                { href: `#/s/${encodeURIComponent(r.session_id)}` },
                h("time", { datetime: r.fire_time, title: r.fire_time }, `Fired ${ago(r.fired_at)}`),
              ),
              ` · slot ${r.fire_time} · +${r.lag_seconds.toFixed(2)} s · `,
              h("span", { class: "run-status" }, r.status ?? "?"),
            ),
          ),
        )
      : h("p", { class: "empty" }, "No runs yet."),
  );
}
