// The session page: turns with their timelines, the messages on their way, the composer,
// and a side panel with the plan, usage and artifacts.
//
// Built once per open session; `render()` then brings it up to date with the store. Turns
// redraw only when their change token moved, so a streamed delta touches one card.

import { details, fill, h, reconcile } from "./dom.js";
import {
  SESSION_STATUS,
  STOP_REASON,
  TURN_STATE,
  USAGE_FIELDS,
  USAGE_LABELS,
  attemptLabel,
  clock,
  count,
  countdown,
  modelRetryText,
  problemText,
  waitingForModel,
} from "./format.js";
import { downloadLink, planList, timelineEntries } from "./timeline.js";

export class SessionView {
  /**
   * @param {import("../controller.js").SessionController} controller
   * @param {{artifact(id): string, link(id): Promise<string>,
   *   retryArtifact(id): Promise<object>, toolOutput(callId): string}} urls
   * @param {(text: string) => void} announce   polite screen-reader announcements
   */
  constructor(controller, urls, announce, { readOnly = false } = {}) {
    this.controller = controller;
    /** A viewer's page: nothing is offered that the server would refuse them. */
    this.readOnly = readOnly;
    this.store = controller.store;
    this.urls = urls;
    this.announce = announce;
    /** Whether a loaded state has been drawn (the first draw focuses nothing). */
    this.drawn = false;
    this.sideSig = null;
    this.headSig = null;
    /** Moves retry countdowns once a second, while any is on screen. */
    this.ticker = null;
    this.build();
  }

  build() {
    this.title = h("h1", { id: "session-title" });
    this.status = h("span", { class: "badge", id: "session-status" });
    this.meta = h("p", { class: "session-meta" });
    this.turns = h("ol", { class: "turns", "aria-label": "Turns" });
    this.pending = h("ol", { class: "pending", "aria-label": "Messages being sent" });
    this.notices = h("div", { class: "notices", role: "alert" });
    this.empty = h("p", { class: "empty" }, "No turns yet. Send a message to start.");
    this.composer = this.buildComposer();
    this.plan = h("section", { class: "panel plan-panel", "aria-labelledby": "plan-h" });
    this.usage = h("section", { class: "panel usage-panel", "aria-labelledby": "usage-h" });
    this.artifacts = h("section", { class: "panel artifacts-panel", "aria-labelledby": "art-h" });
    this.deliveries = h("section", {
      class: "panel deliveries-panel",
      "aria-labelledby": "dlv-h",
      hidden: true,
    });
    this.root = h(
      "div",
      { class: "session", dataset: { sessionId: this.store.sessionId } },
      h(
        "section",
        { class: "conversation", "aria-labelledby": "session-title" },
        h("header", { class: "session-head" }, this.title, this.status, this.meta),
        this.empty,
        this.turns,
        this.pending,
        this.notices,
        this.readOnly
          ? h("p", { class: "note read-only" }, "Your role lets you follow this session, not act in it.")
          : this.composer.form,
      ),
      h(
        "aside",
        { class: "side", "aria-label": "Plan, usage and artifacts" },
        this.plan,
        this.usage,
        this.artifacts,
        this.deliveries,
      ),
    );
  }

  buildComposer() {
    const text = h("textarea", {
      id: "composer-text",
      name: "text",
      rows: 3,
      placeholder: "Message the agent — Enter to send, Shift+Enter for a new line",
    });
    const ifBusy = h(
      "select",
      { id: "composer-if-busy", name: "if_busy" },
      h("option", { value: "enqueue" }, "queue it after the running turn"),
      h("option", { value: "interrupt" }, "interrupt the running turn"),
      h("option", { value: "reject" }, "don't send it"),
    );
    const cancel = h(
      "button",
      { type: "button", class: "cancel", hidden: true, onclick: () => this.controller.cancel() },
      "Cancel running turn",
    );
    const send = h("button", { type: "submit", class: "primary" }, "Send");
    const commands = h("p", { class: "composer-commands", hidden: true, "aria-label": "Commands" });
    const form = h(
      "form",
      { class: "composer", "aria-label": "Send a message", onsubmit: (e) => this.submit(e) },
      h("label", { for: "composer-text", class: "sr-only" }, "Message"),
      commands,
      text,
      h(
        "div",
        { class: "composer-bar" },
        h("label", { for: "composer-if-busy" }, "If a turn is running: "),
        ifBusy,
        h("span", { class: "spacer" }),
        cancel,
        send,
      ),
    );
    text.addEventListener("keydown", (event) => {
      // Enter sends; Shift+Enter is a new line; never while an IME is composing a character.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    return { form, text, ifBusy, cancel, send, commands, commandsOf: null };
  }

  /** The plugin's slash commands, once per plugin version: each fills the composer. */
  async renderCommands(plugin) {
    const key = plugin ? `${plugin.name}@${plugin.version}` : "";
    if (this.readOnly || this.composer.commandsOf === key) return;
    this.composer.commandsOf = key;
    const found = await this.controller.commands(plugin);
    const box = this.composer.commands;
    box.hidden = found.length === 0;
    fill(
      box,
      "Commands: ",
      ...found.map((c) =>
        h(
          "button",
          {
            type: "button",
            class: "link command",
            title: [c.description, c.argument_hint].filter(Boolean).join(" — "),
            onclick: () => {
              this.composer.text.value = `/${c.name} `;
              this.composer.text.focus();
            },
          },
          `/${c.name}`,
        ),
      ),
    );
  }

  submit(event) {
    event.preventDefault();
    const text = this.composer.text.value.trim();
    if (!text) return;
    this.composer.text.value = "";
    this.controller.sendMessage(text, this.composer.ifBusy.value);
  }

  /** A refused intent: say why; put a refused message's text back if the box is empty. */
  notice({ kind, error, text }) {
    if (kind === "message" && text && !this.composer.text.value) this.composer.text.value = text;
    const what = {
      message: "Message not sent",
      answer: "Answer not sent",
      cancel: "Cancel refused",
      retry: "Retry refused",
    }[kind];
    const line = h(
      "p",
      { class: "notice", dataset: { code: error.code } },
      h("strong", null, `${what}: `),
      problemText(error),
      " ",
      h("button", { type: "button", class: "link", onclick: () => line.remove() }, "Dismiss"),
    );
    this.notices.append(line);
  }

  render() {
    const state = this.store.state;
    this.renderHead(state);
    this.renderCommands(state.plugin);
    const ctxBase = {
      overlay: this.store.overlay,
      clientId: this.controller.clientId,
      urls: this.urls,
      artifacts: state.artifacts,
      act: this.readOnly
        ? null
        : { answer: (requestId, answer) => this.controller.answer(requestId, answer) },
    };
    const index = new Map(state.turns.map((turn, i) => [turn.turn_id, i + 1]));
    reconcile(
      this.turns,
      state.turns.map((turn, i) => ({
        key: turn.turn_id,
        sig: this.store.turnToken(turn.turn_id),
        create: () => turnShell(turn, i + 1),
        update: (node) =>
          updateTurn(node, turn, i + 1, index, {
            ...ctxBase,
            turn,
            token: this.store.turnToken(turn.turn_id),
            controller: this.controller,
          }),
      })),
    );
    this.empty.hidden = state.turns.length > 0 || this.store.overlay.messages.size > 0;
    this.renderPending();
    this.renderSide(state, ctxBase);
    this.focusNewRequests();
    if (this.ticker === null && this.turns.querySelector(".model-retry")) {
      this.ticker = setInterval(() => this.tick(), 1000);
    }
    if (this.store.loaded && !this.drawn) {
      this.drawn = true;
      this.markRendered();
    }
  }

  /** Count retries down; stop when none is left (or the page moved on). */
  tick() {
    const retries = this.root.isConnected ? this.turns.querySelectorAll(".model-retry") : [];
    if (retries.length === 0) {
      clearInterval(this.ticker);
      this.ticker = null;
      return;
    }
    for (const line of retries) {
      line.querySelector(".countdown").textContent = countdown(line.dataset.retryAt);
    }
  }

  /** Performance marks for benchmarks/ui_render.py: the first full draw, then its frame. */
  markRendered() {
    performance.mark("nua:session-rendered");
    this.root.dataset.rendered = "true";
    requestAnimationFrame(() => setTimeout(() => performance.mark("nua:session-painted"), 0));
  }

  renderHead(state) {
    const active = this.store.activeTurn();
    const sig = JSON.stringify([state.title, state.status, state.seq, active?.turn_id]);
    if (sig === this.headSig) return;
    this.headSig = sig;
    this.title.textContent = state.title || "Untitled session";
    this.status.className = `badge status-${state.status}`;
    this.status.textContent = SESSION_STATUS[state.status] ?? state.status;
    fill(
      this.meta,
      h("code", null, state.session_id ?? this.store.sessionId),
      ` · ${state.turns.length} turn${state.turns.length === 1 ? "" : "s"} · seq `,
      h("span", { class: "seq" }, String(state.seq)),
      ...snapshotMeta(state),
    );
    this.composer.cancel.hidden = active === null;
    this.composer.send.textContent = active === null ? "Send" : "Send (turn running)";
    document.title = `${state.title || "Untitled session"} · opennua`;
  }

  renderPending() {
    const messages = this.store.overlay.pendingMessages();
    reconcile(
      this.pending,
      messages.map((entry) => ({
        key: entry.intent_id,
        sig: entry.status,
        create: () => pendingCard(entry, this.controller),
      })),
    );
  }

  renderSide(state, ctx) {
    const withPlan = [...state.turns].reverse().find((turn) => turn.plan.length > 0);
    const artifactIds = Object.values(state.artifacts).map((a) => `${a.artifact_id}/${a.state}`);
    const deliveries = Object.values(state.deliveries);
    const sig = JSON.stringify([withPlan?.plan, state.usage_by_model, artifactIds, deliveries]);
    if (sig === this.sideSig) return;
    this.sideSig = sig;
    fill(
      this.plan,
      h("h2", { id: "plan-h" }, "Plan"),
      withPlan ? planList(withPlan.plan) : h("p", { class: "empty" }, "No plan yet."),
    );
    fill(
      this.usage,
      h("h2", { id: "usage-h" }, "Session usage"),
      usageByField(state.usage_by_model),
    );
    const artifacts = Object.values(state.artifacts);
    fill(
      this.artifacts,
      h("h2", { id: "art-h" }, "Artifacts"),
      artifacts.length
        ? h("ul", null, artifacts.map((a) => h("li", null, downloadLink(a, ctx))))
        : h("p", { class: "empty" }, "None yet."),
    );
    // Chat and other external deliveries: their own state, apart from the turn's.
    this.deliveries.hidden = deliveries.length === 0;
    fill(
      this.deliveries,
      h("h2", { id: "dlv-h" }, "Deliveries"),
      h("ul", null, deliveries.map(deliveryItem)),
    );
  }

  /** Move focus to an input request that just opened, so keyboard users can answer it. */
  focusNewRequests() {
    const opened = this.store.takeOpened();
    if (!this.drawn || opened.length === 0) return;
    const requestId = opened[opened.length - 1];
    const card = this.turns.querySelector(`[data-request-id="${CSS.escape(requestId)}"]`);
    if (!card || card.dataset.status !== "open") return;
    const typing = document.activeElement === this.composer.text && this.composer.text.value;
    if (!typing) card.focus();
    this.announce(`Input needed: ${card.querySelector(".prompt")?.textContent ?? ""}`);
  }
}

function turnShell(turn, number) {
  const headingId = `turn-${turn.turn_id}`;
  return h(
    "li",
    { class: "turn", "aria-labelledby": headingId, dataset: { turnId: turn.turn_id } },
    h(
      "header",
      { class: "turn-head" },
      h("h2", { id: headingId }, `Turn ${number}`),
      h("span", { class: "badge turn-state" }),
      h("span", { class: "turn-info" }),
      h("span", { class: "spacer" }),
      h("span", { class: "turn-actions" }),
    ),
    h("ol", { class: "attempts", "aria-label": "Attempts" }),
    h("ol", { class: "timeline", "aria-label": `Turn ${number} timeline` }),
    h("div", { class: "turn-activity", role: "status" }),
    h("div", { class: "turn-error" }),
    h("section", { class: "turn-result", "aria-label": `Turn ${number} result` }),
    h("section", { class: "turn-usage", "aria-label": `Turn ${number} usage` }),
  );
}

function updateTurn(node, turn, number, index, ctx) {
  node.dataset.state = turn.state;
  const badge = node.querySelector(".turn-state");
  const ended = turn.state === "ended";
  badge.className = `badge turn-state state-${ended ? turn.stop_reason : turn.state}`;
  badge.textContent = ended
    ? (STOP_REASON[turn.stop_reason] ?? turn.stop_reason)
    : TURN_STATE[turn.state];
  const retried = turn.retry_of ? index.get(turn.retry_of) : null;
  fill(
    node.querySelector(".turn-info"),
    turn.retry_of ? `Retry of turn ${retried ?? turn.retry_of} · ` : "",
    clock(turn.started_at),
  );
  // Rebuilt only when the turn's state changes, so a focused button survives streaming.
  const actions = node.querySelector(".turn-actions");
  if (actions.dataset.sig !== turn.state) {
    actions.dataset.sig = turn.state;
    fill(actions, ctx.act ? turnActions(turn, number, ctx.controller) : null);
  }
  fill(
    node.querySelector(".attempts"),
    turn.attempts.map((attempt, i) => {
      const moved = i > 0 && turn.attempts[i - 1].supervisor_id !== attempt.supervisor_id;
      return h(
        "li",
        { class: moved ? "attempt restarted" : "attempt", dataset: { attempt: attempt.attempt } },
        attemptLabel(turn.attempts, i),
      );
    }),
  );
  reconcile(node.querySelector(".timeline"), timelineEntries(turn.timeline, ctx));
  fill(node.querySelector(".turn-activity"), activityLine(turn));
  fill(
    node.querySelector(".turn-error"),
    turn.error
      ? h("p", { class: "error" }, h("code", null, turn.error.code), " ", turn.error.message)
      : null,
  );
  // The structured result: what the plugin's output schema accepted, whole and as JSON.
  const result = node.querySelector(".turn-result");
  const resultSig = turn.output === null ? "" : JSON.stringify(turn.output);
  if (result.dataset.sig !== resultSig) {
    result.dataset.sig = resultSig;
    fill(
      result,
      turn.output === null
        ? null
        : [
            h("h3", null, "Result"),
            h("pre", { class: "result-json" }, JSON.stringify(turn.output, null, 2)),
          ],
    );
  }
  const usage = node.querySelector(".turn-usage");
  const usageSig = JSON.stringify(turn.usage_by_model);
  if (usage.dataset.sig !== usageSig) {
    usage.dataset.sig = usageSig;
    fill(
      usage,
      Object.keys(turn.usage_by_model).length
        ? details(
            `usage:${turn.turn_id}`,
            true,
            "Usage (sub-agents included)",
            usageTable(turn.usage_by_model, "turn"),
          )
        : null,
    );
  }
}

/** What an active turn waits on that no card shows: a model retry, or the model itself. */
function activityLine(turn) {
  if (turn.state === "ended") return null;
  if (turn.model_retry) {
    const { head, error } = modelRetryText(turn.model_retry);
    return h(
      "p",
      { class: "model-retry", dataset: { retryAt: turn.model_retry.retry_at } },
      head,
      h("span", { class: "countdown" }, countdown(turn.model_retry.retry_at)),
      " — ",
      h("code", null, error),
    );
  }
  const run = waitingForModel(turn);
  if (run === null) return null;
  return h("p", { class: "waiting-model" }, `${run}Waiting for the model…`);
}

function turnActions(turn, number, controller) {
  if (turn.state !== "ended") {
    return h(
      "button",
      { type: "button", class: "cancel", onclick: () => controller.cancel(turn.turn_id) },
      `Cancel turn ${number}`,
    );
  }
  return h(
    "button",
    { type: "button", class: "retry", onclick: () => controller.retry(turn.turn_id) },
    `Retry turn ${number}`,
  );
}

/** Per model, the five token counts (docs/architecture.md §3 usage.recorded), and a total row. */
function usageTable(byModel, scope) {
  const models = Object.keys(byModel).sort();
  if (models.length === 0) return h("p", { class: "empty" }, "No model calls yet.");
  const totals = Object.fromEntries(USAGE_FIELDS.map((f) => [f, 0]));
  for (const model of models) for (const f of USAGE_FIELDS) totals[f] += byModel[model][f];
  const row = (label, usage, cls) =>
    h(
      "tr",
      { class: cls },
      h("th", { scope: "row" }, label),
      USAGE_FIELDS.map((f) => h("td", { dataset: { field: f } }, count(usage[f]))),
    );
  return h(
    "table",
    { class: "usage", dataset: { scope } },
    header("Model", USAGE_FIELDS.map((f) => USAGE_LABELS[f])),
    h(
      "tbody",
      null,
      models.map((model) => row(model, byModel[model], "model")),
      models.length > 1 ? row("Total", totals, "total") : null,
    ),
  );
}

function header(first, names) {
  const th = (text) => h("th", { scope: "col" }, text);
  return h("thead", null, h("tr", null, th(first), names.map(th)));
}

function button(text, onclick) {
  return h("button", { type: "button", onclick }, text);
}

/** The same numbers turned on their side (a row per field), to fit the narrow panel. */
function usageByField(byModel) {
  const models = Object.keys(byModel).sort();
  if (models.length === 0) return h("p", { class: "empty" }, "No model calls yet.");
  return h(
    "table",
    { class: "usage by-field", dataset: { scope: "session" } },
    header("Tokens", models),
    h(
      "tbody",
      null,
      USAGE_FIELDS.map((f) =>
        h(
          "tr",
          null,
          h("th", { scope: "row" }, USAGE_LABELS[f]),
          models.map((m) => h("td", { dataset: { field: f, model: m } }, count(byModel[m][f]))),
        ),
      ),
    ),
  );
}

function pendingCard(entry, controller) {
  const state = {
    sending: "Sending…",
    accepted: "Accepted, waiting for the session…",
    unconfirmed: "The server did not confirm this message.",
  }[entry.status];
  return h(
    "li",
    {
      class: `item msg user pending ${entry.status}`,
      dataset: { intentId: entry.intent_id, status: entry.status },
    },
    h("div", { class: "who" }, "You"),
    h("div", { class: "text" }, entry.text),
    h(
      "p",
      { class: "note", role: "status" },
      state,
      entry.status === "unconfirmed"
        ? [
            " ",
            button("Send again", () => controller.resendMessage(entry.intent_id)),
            " ",
            button("Discard", () => controller.discardMessage(entry.intent_id)),
          ]
        : null,
    ),
  );
}

/** What the session runs, from its execution snapshot: name@version, deployment, model. */
function snapshotMeta(state) {
  if (!state.plugin) return [];
  const digest = (state.snapshot_digest ?? "").replace(/^sha256:/, "").slice(0, 12);
  return [
    " · ",
    h(
      "span",
      { class: "snapshot", title: state.snapshot_digest ?? "" },
      `${state.plugin.name}@${state.plugin.version}`,
      state.deployment ? ` · ${state.deployment}` : "",
      state.model ? ` · ${state.model}` : "",
      digest ? ` · ${digest}` : "",
    ),
  ];
}

function deliveryItem(d) {
  const tries = `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`;
  const error = d.error && d.status !== "sent" ? ` · ${d.error.message}` : "";
  return h(
    "li",
    { class: "delivery", dataset: { deliveryId: d.delivery_id, status: d.status } },
    `${d.channel} ${d.kind ?? "delivery"} → ${d.target}: `,
    h("span", { class: "badge delivery-status" }, d.status),
    ` · ${tries}${error}`,
  );
}
