// Words and numbers for the views. Pure functions; tested by tests/js/ui.test.mjs.

import { USAGE_FIELDS } from "../reducer.js";

export { USAGE_FIELDS };

export const USAGE_LABELS = Object.freeze({
  input_tokens: "Input",
  output_tokens: "Output",
  cache_read_input_tokens: "Cache read",
  cache_creation_input_tokens: "Cache creation",
  reasoning_output_tokens: "Reasoning",
});

const numbers = new Intl.NumberFormat("en");

export function count(n) {
  return numbers.format(n ?? 0);
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** "just now", "5 min ago", "3 h ago", else the date. */
export function ago(ts, now = Date.now()) {
  if (!ts) return "never";
  const then = Date.parse(ts);
  if (Number.isNaN(then)) return ts;
  const seconds = Math.max(0, Math.round((now - then) / 1000));
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(then).toISOString().slice(0, 10);
}

export function clock(ts) {
  if (!ts) return "";
  const date = new Date(ts);
  return Number.isNaN(date.getTime()) ? ts : date.toLocaleTimeString("en-GB");
}

export const SESSION_STATUS = Object.freeze({
  idle: "Idle",
  running: "Running",
  requires_action: "Waiting for input",
  archived: "Archived",
});

export const TURN_STATE = Object.freeze({
  queued: "Queued",
  running: "Running",
  requires_action: "Waiting for input",
  ended: "Ended",
});

export const STOP_REASON = Object.freeze({
  end_turn: "Completed",
  cancelled: "Cancelled",
  failed: "Failed",
  deadline_exceeded: "Deadline exceeded",
  max_steps: "Step limit reached",
  revoked: "Revoked",
});

export const OUTCOME = Object.freeze({
  selected: "Answered",
  answered: "Answered",
  cancelled: "Cancelled",
  expired: "Expired",
});

export const PLAN_MARK = Object.freeze({ pending: "○", in_progress: "◐", completed: "●" });

/** The label of the option a resolution chose, else its id. */
export function optionName(request, optionId) {
  const option = (request.options ?? []).find((o) => o.option_id === optionId);
  return option ? option.name : optionId;
}

/** "cli_… (prn_…)", with "you" when it was this browser. */
export function who(answeredBy, clientId) {
  if (!answeredBy) return "unknown";
  const name = answeredBy.client_id ?? "a client";
  const principal = answeredBy.principal_id ? ` (${answeredBy.principal_id})` : "";
  const mine = answeredBy.client_id && answeredBy.client_id === clientId ? " — you" : "";
  return `${name}${principal}${mine}`;
}

/**
 * What an attempt marker says. A new attempt on a *different* supervisor than the one
 * before means that process went away (crash, kill, restart) and another one picked the
 * execution up from its checkpoint; on the same supervisor it resumed after waiting.
 */
export function attemptLabel(attempts, index) {
  const attempt = attempts[index];
  if (index === 0) return `Attempt ${attempt.attempt} started`;
  const previous = attempts[index - 1];
  if (previous.supervisor_id !== attempt.supervisor_id) {
    return `Attempt ${attempt.attempt}: resumed after restart (${attempt.supervisor_id})`;
  }
  return attempt.resumed_from_checkpoint
    ? `Attempt ${attempt.attempt}: resumed from checkpoint`
    : `Attempt ${attempt.attempt} started`;
}

/** Sum of usage objects. */
export function sumUsage(usages) {
  const total = Object.fromEntries(USAGE_FIELDS.map((name) => [name, 0]));
  for (const usage of usages) for (const name of USAGE_FIELDS) total[name] += usage[name] ?? 0;
  return total;
}

/** Short JSON for a card (pretty, cut at `limit` characters). */
export function preview(value, limit = 4000) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (text === undefined) return "";
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

/** Text to show for a problem the server sent back, by `code`. */
export function problemText(error) {
  const byCode = {
    session_busy: "The session is busy, and this message was set to be refused when busy.",
    turn_not_active: "There is no running turn to cancel.",
    turn_active: "That turn is still running; cancel it before retrying.",
    gone: "That input request is no longer open.",
    network: "The server did not answer.",
    unauthorized: "You are logged out.",
  };
  return byCode[error.code] ?? error.message ?? "The request failed.";
}
