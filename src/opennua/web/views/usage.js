// Usage and cost (`#/usage`): over a chosen period, tokens by kind and cost over time
// (charts: the vendored uPlot), and the totals per deployment, principal or model — the
// same request `nua usage --by … --since …` makes, so the table's numbers are the CLI's.

import uPlot from "../vendor/uPlot.esm.js";
import { fill, h } from "./dom.js";
import { USAGE_FIELDS, USAGE_LABELS, count } from "./format.js";
import { Page, field, table } from "./kit.js";

// period → [seconds, bucket seconds]
const PERIODS = {
  "1h": [3600, 300],
  "24h": [86400, 3600],
  "7d": [7 * 86400, 6 * 3600],
  "30d": [30 * 86400, 86400],
};
const PERIOD_LABELS = { "1h": "Last hour", "24h": "Last 24 hours", "7d": "Last 7 days", "30d": "Last 30 days" };
const BY_LABELS = { deployment: "Deployment", principal: "Principal", model: "Model" };
// Distinguishable on white and by people with the common colour deficiencies (Okabe–Ito).
const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000"];

export class UsagePage extends Page {
  constructor(options) {
    super({ ...options, title: "Usage and cost", every: 15000 });
    this.period = h(
      "select",
      { id: "usage-period", onchange: () => this.refresh() },
      ...Object.entries(PERIOD_LABELS).map(([v, l]) => h("option", { value: v, selected: v === "24h" }, l)),
    );
    this.by = h(
      "select",
      { id: "usage-by", onchange: () => this.refresh() },
      ...Object.entries(BY_LABELS).map(([v, l]) => h("option", { value: v }, l)),
    );
    this.toolbar.append(field("Period", this.period), field("Per", this.by));
    this.tokensChart = h("figure", { class: "chart", role: "img", id: "chart-tokens" });
    this.costChart = h("figure", { class: "chart", role: "img", id: "chart-cost" });
    this.totals = table({
      caption: "Totals",
      columns: ["Key", ...USAGE_FIELDS.map((f) => USAGE_LABELS[f]), "Responses", "Cost (USD)"],
      cls: "usage totals",
    });
    this.body.append(
      h("h2", null, "Tokens by kind"),
      this.tokensChart,
      h("h2", null, "Cost"),
      this.costChart,
      this.totals.el,
    );
    this.charts = [];
  }

  async load() {
    const [seconds, bucket] = PERIODS[this.period.value];
    // Whole seconds: the CLI takes the same number (`nua usage --since S`).
    const since = Math.floor(Date.now() / 1000) - seconds;
    const by = this.by.value;
    const [series, totals] = await Promise.all([
      this.api.list("/v1/usage/series", { by, since, bucket }),
      this.api.list("/v1/usage", { by, since }),
    ]);
    return { since, by, series, totals };
  }

  draw({ since, by, series, totals }) {
    this.totals.el.dataset.since = String(since);
    this.totals.el.dataset.by = by;
    const label = (key) => (by === "principal" ? this.ctx.nameOf(key) : (key ?? "(none)"));
    this.totals.rows(
      totals.items.map((item) => ({
        key: String(item.key),
        data: item,
        dataset: { key: String(item.key) },
        cells: [
          label(item.key),
          ...USAGE_FIELDS.map((f) => h("span", { dataset: { field: f } }, count(item[f]))),
          h("span", { dataset: { field: "responses" } }, count(item.responses)),
          h(
            "span",
            { dataset: { field: "cost_usd" }, title: item.cost_usd },
            `${Number(item.cost_usd).toFixed(4)}${item.unpriced_responses ? ` (+${item.unpriced_responses} unpriced)` : ""}`,
          ),
        ],
      })),
    );
    for (const chart of this.charts) chart.destroy();
    const xs = series.buckets.map((b) => Date.parse(b) / 1000);
    const sum = (field) => xs.map((_, i) => series.series.reduce((n, s) => n + s[field][i], 0));
    this.charts = [
      chart(
        this.tokensChart,
        `Tokens by kind per ${bucketText(series.bucket_seconds)}, ${PERIOD_LABELS[this.period.value].toLowerCase()}`,
        xs,
        USAGE_FIELDS.map((f) => ({ label: USAGE_LABELS[f], values: sum(f) })),
      ),
      chart(
        this.costChart,
        `Cost in USD per ${BY_LABELS[by].toLowerCase()} per ${bucketText(series.bucket_seconds)}`,
        xs,
        series.series.map((s) => ({ label: label(s.key), values: s.cost_usd.map(Number) })),
      ),
    ];
  }

  stop() {
    super.stop();
    for (const chart of this.charts) chart.destroy();
  }
}

function bucketText(seconds) {
  if (seconds % 86400 === 0) return seconds === 86400 ? "day" : `${seconds / 86400} days`;
  if (seconds % 3600 === 0) return seconds === 3600 ? "hour" : `${seconds / 3600} hours`;
  return `${seconds / 60} minutes`;
}

/** A step chart of `lines` over `xs` in `figure`, its own legend below (text, not canvas). */
function chart(figure, title, xs, lines) {
  const total = lines.reduce((n, l) => n + l.values.reduce((a, b) => a + b, 0), 0);
  figure.setAttribute("aria-label", `${title}. The totals table below holds the numbers.`);
  const plot = h("div", { class: "plot" });
  fill(
    figure,
    plot,
    h(
      "figcaption",
      null,
      h(
        "ul",
        { class: "legend" },
        ...lines.map((l, i) =>
          h("li", null, h("span", { class: `swatch swatch-${i % COLOURS.length}` }), l.label),
        ),
      ),
      total ? null : h("p", { class: "empty" }, lines.length ? "All zero in this period." : "Nothing in this period."),
    ),
  );
  const width = Math.max(320, (figure.clientWidth || 900) - 16);
  const steps = uPlot.paths.stepped({ align: 1 });
  return new uPlot(
    {
      width,
      height: 220,
      legend: { show: false },
      cursor: { show: true, points: { show: false } },
      scales: { x: { time: true } },
      axes: [{}, { size: 60 }],
      series: [
        {},
        ...lines.map((l, i) => ({
          label: l.label,
          stroke: COLOURS[i % COLOURS.length],
          width: 2,
          paths: steps,
          points: { show: false },
        })),
      ],
    },
    [xs, ...lines.map((l) => l.values)],
    plot,
  );
}
