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

/**
 * "cli_… (prn_…)", with "you" when it was this browser; a person a client answered for
 * (a chat bridge's "@alice:example.org") comes first: "@alice:example.org (via cli_…, prn_…)".
 */
export function who(answeredBy, clientId) {
  if (!answeredBy) return "unknown";
  const name = answeredBy.client_id ?? "a client";
  const mine = answeredBy.client_id && answeredBy.client_id === clientId ? " — you" : "";
  if (answeredBy.on_behalf_of) {
    const via = [`via ${name}`, answeredBy.principal_id].filter(Boolean).join(", ");
    return `${answeredBy.on_behalf_of} (${via})${mine}`;
  }
  const principal = answeredBy.principal_id ? ` (${answeredBy.principal_id})` : "";
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

// -- what a person decides on, and what a turn waits for -----------------------------------

// Bidi embeddings, overrides, isolates and marks: they reorder what the eye reads.
const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e]);
for (let cp = 0x2066; cp <= 0x2069; cp++) BIDI.add(cp);
// Letters and marks that draw nothing, or restyle the character before them unseen.
const INVISIBLE = new Set([0x034f, 0x115f, 0x1160, 0x2800, 0x3164, 0xffa0]);
for (let cp = 0xfe00; cp <= 0xfe0f; cp++) INVISIBLE.add(cp);
for (let cp = 0xe0100; cp <= 0xe01ef; cp++) INVISIBLE.add(cp);
// The zero-width joiner and the emoji/text variation selectors, kept between symbols.
const EMOJI_GLUE = new Set([0x200d, 0xfe0e, 0xfe0f]);
const HIDDEN_CATEGORY = /^[\p{Zs}\p{Zl}\p{Zp}\p{Cf}\p{Co}\p{Cn}\p{Cs}]$/u;
const MARK = /^[\p{Mn}\p{Me}]$/u;
const SYMBOL = /^\p{So}$/u;
const ASCII_ALNUM = /^[A-Za-z0-9]$/;

const codePoint = (cp) => `<U+${cp.toString(16).toUpperCase().padStart(4, "0")}>`;

function control(cp) {
  if (cp < 0x20) return String.fromCodePoint(0x2400 + cp); // ␀ … ␟ (ESC is ␛)
  if (cp === 0x7f) return "␡";
  if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xdfff) || BIDI.has(cp)) {
    return codePoint(cp);
  }
  if (cp === 0x2028 || cp === 0x2029) return codePoint(cp);
  return null;
}

function hidden(char, before, after) {
  const cp = char.codePointAt(0);
  if (cp < 0x80) return false;
  if (EMOJI_GLUE.has(cp) && SYMBOL.test(before) && (cp !== 0x200d || SYMBOL.test(after))) {
    return false; // an emoji sequence (👩‍💻, ❤️) joins or styles symbols, and shows as one
  }
  if (HIDDEN_CATEGORY.test(char) || INVISIBLE.has(cp)) return true;
  // A combining mark drawn onto an ASCII character disguises it ("a" + U+0301).
  return MARK.test(char) && ASCII_ALNUM.test(before);
}

/**
 * Text for a person to approve, with nothing that matters invisible — the same rules as
 * the CLI's `visible()` (src/opennua/cli/_safe.py), checked on the same cases
 * (tests/js/visible_text.json). A single space between two other characters stays; every
 * other space is `·`, a tab `→`, a newline `⏎` before the line break, a CR `␍`; control,
 * bidi, zero-width and format characters, other spaces, private-use and unassigned code
 * points, fillers and combining marks on ASCII show as `<U+XXXX>`. Nothing is cut.
 */
export function visible(value) {
  const chars = [...(typeof value === "string" ? value : String(value))];
  const last = chars.length - 1;
  let out = "";
  chars.forEach((char, index) => {
    const before = index > 0 ? chars[index - 1] : "";
    const after = index < last ? chars[index + 1] : "";
    if (char === " ") {
      out += index > 0 && index < last && before !== " " && after !== " " ? " " : "·";
    } else if (char === "\t") out += "→";
    else if (char === "\n") out += "⏎\n";
    else if (char === "\r") out += "␍";
    else {
      const standIn = control(char.codePointAt(0));
      if (standIn !== null) out += standIn;
      else out += hidden(char, before, after) ? codePoint(char.codePointAt(0)) : char;
    }
  });
  return out;
}

/** A tool call's input as `{name, value}` fields, each value whole and `visible()`. */
export function inputFields(input) {
  const named = input !== null && typeof input === "object" && !Array.isArray(input);
  const entries = named && Object.keys(input).length ? Object.entries(input) : [["input", input]];
  return entries.map(([name, value]) => ({
    name: visible(name),
    value: visible(typeof value === "string" ? value : (JSON.stringify(value) ?? "null")),
  }));
}

/** "Retrying the model (attempt 2) at 14:03:07" and its error, from `turn.model_retry`. */
export function modelRetryText(retry) {
  return {
    head: `Retrying the model (attempt ${retry.attempt}) at ${clock(retry.retry_at)}`,
    error: `${retry.error.code}: ${retry.error.message}`,
  };
}

/** ", in 4 s" until `retryAt`, then ", now". */
export function countdown(retryAt, now = Date.now()) {
  const at = Date.parse(retryAt);
  if (Number.isNaN(at)) return "";
  const left = Math.max(0, Math.ceil((at - now) / 1000));
  return left ? `, in ${left} s` : ", now";
}

/**
 * The run whose model was asked and has not answered yet: "" for the turn's own run,
 * "<name>: " for a sub-agent, else null. A projection of the state, as the CLI's
 * `waiting_for_model`: a running turn whose newest item is an assistant message still
 * streaming with no text, or nothing after its user message; a running sub-agent with no
 * item yet or the same kind of message. A model retry says more, and wins.
 */
export function waitingForModel(turn) {
  if (turn.state !== "running" || turn.model_retry) return null;
  for (const worker of Object.values(turn.workers)) {
    if (worker.status === "running" && asked(turn, worker.timeline, true)) {
      return `${worker.name}: `;
    }
  }
  return asked(turn, turn.timeline, false) ? "" : null;
}

function asked(turn, timeline, worker) {
  if (timeline.length === 0) return worker;
  const newest = timeline[timeline.length - 1];
  if (newest.kind !== "message") return false;
  if (!worker && timeline.length === 1 && newest.id === turn.user_message_id) return true;
  const message = Object.prototype.hasOwnProperty.call(turn.messages, newest.id)
    ? turn.messages[newest.id]
    : undefined;
  return message?.role === "assistant" && message.status === "streaming" && !message.text;
}
