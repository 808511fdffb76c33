// The session reducer for the web client: a line-for-line port of
// src/opennua/protocol/reducer.py (with the state shape of state.py and the payload
// defaults of actions.py). `previous state + ordered action = next state` (DESIGN.md §3).
//
// Both reducers run tests/conformance/vectors/*.json and must produce byte-identical
// canonical JSON; change them together. Plain ES module, no build step, no dependencies.
//
// Like the Python reducer, `reduce` takes ownership of the state it is given and advances
// it in place; keep a `copyState` if you need the previous one.

/** An action arrived past a hole in the log; the client must resync from `expected`. */
export class SequenceGap extends Error {
  constructor(expected, got) {
    super(`expected seq ${expected}, got ${got}`);
    this.name = "SequenceGap";
    this.expected = expected;
    this.got = got;
  }
}

/** An action that cannot be applied at all (no seq, a missing field): state unchanged. */
export class InvalidAction extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`);
    this.name = "InvalidAction";
    this.field = field;
  }
}

/** Thrown by a handler before it writes anything; becomes an entry in `anomalies`. */
class Anomaly extends Error {}

export const USAGE_FIELDS = Object.freeze([
  "input_tokens",
  "output_tokens",
  "cache_read_input_tokens",
  "cache_creation_input_tokens",
  "reasoning_output_tokens",
]);

export function emptyUsage() {
  return {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    reasoning_output_tokens: 0,
  };
}

/** The state before the first action (seq 0). */
export function initialState() {
  return {
    session_id: null,
    seq: 0,
    title: "",
    status: "idle",
    workspace_id: null,
    principal_id: null,
    plugin: null,
    deployment_digest: null,
    metadata: {},
    created_at: null,
    last_activity_at: null,
    turns: [],
    artifacts: {},
    open_input_requests: [],
    deliveries: {},
    usage: emptyUsage(),
    usage_by_model: {},
    anomalies: [],
  };
}

/** Apply one action (a parsed JSON object). Same rules as reducer.py's `reduce`. */
export function reduce(state, action) {
  const seq = action?.seq;
  if (!Number.isInteger(seq) || seq < 1) {
    throw new InvalidAction("seq", "an action must be appended (have a seq) to be reduced");
  }
  if (seq <= state.seq) return state;
  if (seq !== state.seq + 1) throw new SequenceGap(state.seq + 1, seq);
  const handler = own(HANDLERS, action.type);
  const foreign = state.session_id !== null && action.session_id !== state.session_id;
  if (handler !== undefined || foreign) {
    // Normalised before any write: an action the Python side could not even load
    // throws here and leaves the state as it was.
    const act = handler !== undefined ? normaliseAction(action) : action;
    try {
      if (foreign) throw new Anomaly(`action belongs to session ${act.session_id}`);
      handler(state, act);
      state.last_activity_at = act.ts;
    } catch (error) {
      if (!(error instanceof Anomaly)) throw error;
      state.anomalies.push({ seq, action_id: act.id, type: act.type, reason: error.message });
    }
  }
  state.seq = seq;
  return state;
}

/** Reduce `actions` in order, from `state` (default: the initial state). */
export function replay(actions, state = initialState()) {
  let current = state;
  for (const action of actions) current = reduce(current, action);
  return current;
}

// -- canonical JSON ------------------------------------------------------------------------

/**
 * Canonical JSON, byte-identical to Python's `state_to_json`
 * (`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`).
 */
export function stateToJson(state) {
  return canonicalJson(state);
}

/** Key-sorted, whitespace-free JSON of any JSON value (also used by the tests). */
export function canonicalJson(value) {
  if (value === null || typeof value === "string" || typeof value === "boolean") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    // Python would write NaN/Infinity, which is not JSON; refuse rather than diverge.
    if (!Number.isFinite(value)) throw new TypeError(`not a JSON number: ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const keys = Object.keys(value).sort(compareCodePoints);
    const members = keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`);
    return `{${members.join(",")}}`;
  }
  throw new TypeError(`not a JSON value: ${typeof value}`);
}

/**
 * Python orders str by code point; JS `<` compares UTF-16 code units, which puts astral
 * characters (surrogate pairs, D800–DBFF) before U+E000–U+FFFF. Compare code points instead.
 */
export function compareCodePoints(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n) return a.length - b.length;
  // Step back onto a shared lead surrogate, so codePointAt reads whole characters.
  const previous = i > 0 ? a.charCodeAt(i - 1) : 0;
  if (previous >= 0xd800 && previous <= 0xdbff) i--;
  return a.codePointAt(i) - b.codePointAt(i);
}

/** A state from its canonical JSON (e.g. a snapshot). Checks the outline, not every field. */
export function stateFromJson(text) {
  const state = JSON.parse(text);
  if (state === null || typeof state !== "object" || Array.isArray(state)) {
    throw new TypeError("a session state must be a JSON object");
  }
  if (!Number.isInteger(state.seq) || state.seq < 0 || !Array.isArray(state.turns)) {
    throw new TypeError("not a session state: seq or turns missing");
  }
  return state;
}

/** An independent copy, for callers that must keep a state the reducer will advance. */
export function copyState(state) {
  return clone(state);
}

// -- plain-object maps ---------------------------------------------------------------------
// Entity maps are keyed by ids that come off the wire; `own`/`put` keep a key such as
// "__proto__" or "constructor" an ordinary entry instead of reaching Object.prototype.

function own(map, key) {
  return Object.prototype.hasOwnProperty.call(map, key) ? map[key] : undefined;
}

function put(map, key, value) {
  Object.defineProperty(map, key, { value, writable: true, enumerable: true, configurable: true });
}

function clone(value) {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(clone);
  const copy = {};
  for (const key of Object.keys(value)) put(copy, key, clone(value[key]));
  return copy;
}

// -- payload defaults, mirroring the pydantic models of actions.py --------------------------
// A missing optional field takes its default, unknown fields are dropped (extra="ignore"),
// nested models keep exactly their declared fields. A missing required field throws
// InvalidAction, as the Python side would fail to load the action at all.

const REQUIRED = Symbol("required");

function field(obj, name, path, fallback) {
  const value = obj?.[name];
  if (value !== undefined && Object.prototype.hasOwnProperty.call(obj, name)) return value;
  if (fallback === REQUIRED) throw new InvalidAction(`${path}.${name}`, "field required");
  return fallback;
}

function model(shape) {
  // shape: {field: default | REQUIRED | (raw, path) => normalised}
  return (raw, path) => {
    const out = {};
    for (const [name, spec] of Object.entries(shape)) {
      if (typeof spec === "function") {
        out[name] = spec(field(raw, name, path, null), `${path}.${name}`);
      } else {
        out[name] = field(raw, name, path, spec);
      }
    }
    return out;
  };
}

const nullable = (inner) => (raw, path) => (raw === null ? null : inner(raw, path));
const required = (inner) => (raw, path) => {
  if (raw === null) throw new InvalidAction(path, "field required");
  return inner(raw, path);
};
const listOf = (inner) => (raw, path) => {
  if (!Array.isArray(raw)) throw new InvalidAction(path, "a list is required");
  return raw.map((item, index) => inner(item, `${path}[${index}]`));
};
const jsonValue = (raw) => clone(raw);
const jsonObject = (fallback) => (raw) => (raw === null ? fallback() : clone(raw));

const textPart = model({ type: "text", text: REQUIRED });
const resourceLinkPart = model({
  type: "resource_link",
  uri: REQUIRED,
  name: REQUIRED,
  media_type: null,
});
function contentPart(raw, path) {
  if (raw?.type === "text") return textPart(raw, path);
  if (raw?.type === "resource_link") return resourceLinkPart(raw, path);
  // A part of a type this version does not know is kept as it came (actions.OtherPart).
  if (typeof raw?.type !== "string") throw new InvalidAction(`${path}.type`, "field required");
  return clone(raw);
}
const content = required(listOf(contentPart));
const pluginRef = model({ name: REQUIRED, version: REQUIRED, digest: REQUIRED });
const trigger = model({ kind: REQUIRED, principal_id: REQUIRED, client_id: null, source: null });
const errorInfo = model({ code: REQUIRED, message: REQUIRED });
const permissionOption = model({ option_id: REQUIRED, name: REQUIRED, kind: REQUIRED });
const answeredBy = model({ client_id: null, principal_id: null });
const planEntry = model({ id: REQUIRED, content: REQUIRED, status: REQUIRED, priority: "medium" });

const PAYLOADS = {
  "session.created": model({
    title: "",
    workspace_id: null,
    principal_id: null,
    plugin: nullable(pluginRef),
    deployment_digest: null,
    metadata: jsonObject(() => ({})),
  }),
  "session.updated": model({ title: null, metadata: jsonObject(() => null) }),
  "turn.started": model({
    execution_id: REQUIRED,
    trigger: required(trigger),
    input: content,
    message_id: REQUIRED,
    retry_of: null,
    trace_id: REQUIRED,
  }),
  "turn.state": model({ state: REQUIRED, attempt: null }),
  "turn.ended": model({ stop_reason: REQUIRED, error: nullable(errorInfo) }),
  "execution.attempt_started": model({
    execution_id: REQUIRED,
    attempt: REQUIRED,
    attempt_id: REQUIRED,
    supervisor_id: REQUIRED,
    resumed_from_checkpoint: REQUIRED,
  }),
  "message.added": model({ message_id: REQUIRED, role: REQUIRED, content }),
  "message.started": model({ message_id: REQUIRED, role: REQUIRED }),
  "message.delta": model({ message_id: REQUIRED, delta: REQUIRED }),
  "message.completed": model({ message_id: REQUIRED, text: REQUIRED, status: REQUIRED }),
  "reasoning.delta": model({ message_id: REQUIRED, delta: REQUIRED }),
  "reasoning.completed": model({ message_id: REQUIRED, text: REQUIRED }),
  "tool_call.started": model({
    tool_call_id: REQUIRED,
    name: REQUIRED,
    title: REQUIRED,
    kind: REQUIRED,
    input: jsonValue,
  }),
  "tool_call.updated": model({
    tool_call_id: REQUIRED,
    status: REQUIRED,
    output: null,
    output_ref: null,
    error: nullable(errorInfo),
  }),
  "input_request.opened": model({
    request_id: REQUIRED,
    reason: REQUIRED,
    tool_call_id: null,
    prompt: REQUIRED,
    options: nullable(listOf(permissionOption)),
    response_schema: jsonObject(() => null),
    expires_at: null,
  }),
  "input_request.resolved": model({
    request_id: REQUIRED,
    outcome: REQUIRED,
    option_id: null,
    payload: jsonValue,
    answered_by: nullable(answeredBy),
  }),
  "plan.updated": model({ entries: required(listOf(planEntry)) }),
  "worker.started": model({
    worker_run_id: REQUIRED,
    parent_run_id: REQUIRED,
    parent_tool_call_id: REQUIRED,
    name: REQUIRED,
    task: REQUIRED,
  }),
  "worker.ended": model({ worker_run_id: REQUIRED, status: REQUIRED, summary: null }),
  "artifact.published": model({
    artifact_id: REQUIRED,
    name: REQUIRED,
    media_type: REQUIRED,
    size: REQUIRED,
    sha256: REQUIRED,
    tool_call_id: null,
  }),
  "file.changed": model({ path: REQUIRED, change: REQUIRED, tool_call_id: null, diff_ref: null }),
  "usage.recorded": model({
    provider: REQUIRED,
    model: REQUIRED,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    reasoning_output_tokens: 0,
  }),
  "delivery.updated": model({
    delivery_id: REQUIRED,
    channel: REQUIRED,
    target: REQUIRED,
    status: REQUIRED,
    attempts: 0,
    error: nullable(errorInfo),
  }),
};

const envelope = model({
  v: 1,
  session_id: REQUIRED,
  seq: REQUIRED,
  id: REQUIRED,
  type: REQUIRED,
  ts: REQUIRED,
  turn_id: null,
  run_id: null,
  client_id: null,
  intent_id: null,
});

function normaliseAction(raw) {
  const act = envelope(raw, "action");
  if (act.v !== 1) throw new InvalidAction("action.v", `unsupported protocol version ${act.v}`);
  act.data = PAYLOADS[act.type](field(raw, "data", "action", REQUIRED), "data");
  return act;
}

// -- lookups that throw Anomaly instead of returning undefined ------------------------------

function findTurn(state, turnId) {
  // Newest first: nearly every action belongs to the latest turn.
  for (let i = state.turns.length - 1; i >= 0; i--) {
    if (state.turns[i].turn_id === turnId) return state.turns[i];
  }
  return null;
}

function turnOf(state, action) {
  if (action.turn_id === null) throw new Anomaly("action has no turn_id");
  const turn = findTurn(state, action.turn_id);
  if (turn === null) throw new Anomaly(`unknown turn ${action.turn_id}`);
  return turn;
}

/** The run an item belongs to: a worker's run, or else the turn's root run. */
function container(turn, runId) {
  return (runId !== null && own(turn.workers, runId)) || turn;
}

function place(turn, runId, kind, itemId) {
  container(turn, runId).timeline.push({ kind, id: itemId });
}

function addUsage(total, data) {
  for (const name of USAGE_FIELDS) total[name] += data[name];
}

function deriveStatus(state) {
  if (state.status === "archived") return;
  const states = new Set(state.turns.map((turn) => turn.state));
  if (state.open_input_requests.length > 0 || states.has("requires_action")) {
    state.status = "requires_action";
  } else if (states.has("running") || states.has("queued")) {
    state.status = "running";
  } else {
    state.status = "idle";
  }
}

function textOf(parts) {
  return parts
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

// -- handlers, one per known type (same names and order as reducer.py) ---------------------

function sessionCreated(state, action) {
  if (state.created_at !== null) throw new Anomaly("session already created");
  const d = action.data;
  state.session_id = action.session_id;
  state.title = d.title;
  state.workspace_id = d.workspace_id;
  state.principal_id = d.principal_id;
  state.plugin = d.plugin;
  state.deployment_digest = d.deployment_digest;
  state.metadata = d.metadata;
  state.created_at = action.ts;
}

function sessionUpdated(state, action) {
  if (action.data.title !== null) state.title = action.data.title;
  if (action.data.metadata !== null) state.metadata = action.data.metadata;
}

function turnStarted(state, action) {
  const d = action.data;
  if (action.turn_id === null) throw new Anomaly("action has no turn_id");
  if (findTurn(state, action.turn_id) !== null) {
    throw new Anomaly(`turn ${action.turn_id} already started`);
  }
  const messages = {};
  put(messages, d.message_id, {
    message_id: d.message_id,
    role: "user",
    run_id: null,
    text: textOf(d.input),
    status: "complete",
    content: d.input,
  });
  state.turns.push({
    turn_id: action.turn_id,
    execution_id: d.execution_id,
    state: "queued",
    stop_reason: null,
    error: null,
    trigger: d.trigger,
    trace_id: d.trace_id,
    retry_of: d.retry_of,
    user_message_id: d.message_id,
    started_at: action.ts,
    ended_at: null,
    attempts: [],
    timeline: [{ kind: "message", id: d.message_id }],
    messages,
    reasoning: {},
    tool_calls: {},
    input_requests: {},
    workers: {},
    file_changes: {},
    plan: [],
    usage: emptyUsage(),
    usage_by_model: {},
  });
  deriveStatus(state);
}

function turnState(state, action) {
  const turn = turnOf(state, action);
  if (turn.state === "ended") throw new Anomaly(`turn ${turn.turn_id} has already ended`);
  turn.state = action.data.state;
  deriveStatus(state);
}

function turnEnded(state, action) {
  const turn = turnOf(state, action);
  if (turn.state === "ended") throw new Anomaly(`turn ${turn.turn_id} has already ended`);
  turn.state = "ended";
  turn.stop_reason = action.data.stop_reason;
  turn.error = action.data.error;
  turn.ended_at = action.ts;
  // An ended turn waits for nobody: requests it left open close as cancelled.
  for (const request of Object.values(turn.input_requests)) {
    if (request.status === "open") {
      request.status = "resolved";
      request.outcome = "cancelled";
    }
  }
  state.open_input_requests = state.open_input_requests.filter(
    (entry) => entry.turn_id !== turn.turn_id,
  );
  deriveStatus(state);
}

function attemptStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  turn.attempts.push({
    attempt: d.attempt,
    attempt_id: d.attempt_id,
    supervisor_id: d.supervisor_id,
    resumed_from_checkpoint: d.resumed_from_checkpoint,
    started_at: action.ts,
  });
}

function messageAdded(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.messages, d.message_id)) throw new Anomaly(`message ${d.message_id} already exists`);
  put(turn.messages, d.message_id, {
    message_id: d.message_id,
    role: d.role,
    run_id: action.run_id,
    text: textOf(d.content),
    status: "complete",
    content: d.content,
  });
  place(turn, action.run_id, "message", d.message_id);
}

function messageStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.messages, d.message_id)) throw new Anomaly(`message ${d.message_id} already exists`);
  put(turn.messages, d.message_id, {
    message_id: d.message_id,
    role: d.role,
    run_id: action.run_id,
    text: "",
    status: "streaming",
    content: null,
  });
  place(turn, action.run_id, "message", d.message_id);
}

function streamingMessage(turn, messageId) {
  const message = own(turn.messages, messageId);
  if (message === undefined) throw new Anomaly(`unknown message ${messageId}`);
  if (message.status !== "streaming") throw new Anomaly(`message ${messageId} is not streaming`);
  return message;
}

function messageDelta(state, action) {
  const turn = turnOf(state, action);
  streamingMessage(turn, action.data.message_id).text += action.data.delta;
}

function messageCompleted(state, action) {
  const turn = turnOf(state, action);
  const message = streamingMessage(turn, action.data.message_id);
  message.text = action.data.text;
  message.status = action.data.status;
}

function reasoningDelta(state, action) {
  const turn = turnOf(state, action);
  const mid = action.data.message_id;
  const reasoning = own(turn.reasoning, mid);
  if (reasoning === undefined) {
    put(turn.reasoning, mid, {
      message_id: mid,
      run_id: action.run_id,
      text: action.data.delta,
      status: "streaming",
    });
    place(turn, action.run_id, "reasoning", mid);
  } else if (reasoning.status !== "streaming") {
    throw new Anomaly(`reasoning of ${mid} is already complete`);
  } else {
    reasoning.text += action.data.delta;
  }
}

function reasoningCompleted(state, action) {
  const turn = turnOf(state, action);
  const mid = action.data.message_id;
  const reasoning = own(turn.reasoning, mid);
  if (reasoning === undefined) {
    put(turn.reasoning, mid, {
      message_id: mid,
      run_id: action.run_id,
      text: action.data.text,
      status: "complete",
    });
    place(turn, action.run_id, "reasoning", mid);
  } else if (reasoning.status !== "streaming") {
    throw new Anomaly(`reasoning of ${mid} is already complete`);
  } else {
    reasoning.text = action.data.text;
    reasoning.status = "complete";
  }
}

function toolCallStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.tool_calls, d.tool_call_id)) {
    throw new Anomaly(`tool call ${d.tool_call_id} already exists`);
  }
  put(turn.tool_calls, d.tool_call_id, {
    tool_call_id: d.tool_call_id,
    run_id: action.run_id,
    name: d.name,
    title: d.title,
    kind: d.kind,
    input: d.input,
    status: "pending",
    output: null,
    output_ref: null,
    error: null,
  });
  place(turn, action.run_id, "tool_call", d.tool_call_id);
}

function toolCallUpdated(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  const call = own(turn.tool_calls, d.tool_call_id);
  if (call === undefined) throw new Anomaly(`unknown tool call ${d.tool_call_id}`);
  call.status = d.status;
  if (d.output !== null) call.output = d.output;
  if (d.output_ref !== null) call.output_ref = d.output_ref;
  if (d.error !== null) call.error = d.error;
}

function inputRequestOpened(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.input_requests, d.request_id)) {
    throw new Anomaly(`input request ${d.request_id} already exists`);
  }
  if (turn.state === "ended") throw new Anomaly(`turn ${turn.turn_id} has already ended`);
  put(turn.input_requests, d.request_id, {
    request_id: d.request_id,
    run_id: action.run_id,
    reason: d.reason,
    tool_call_id: d.tool_call_id,
    prompt: d.prompt,
    options: d.options,
    response_schema: d.response_schema,
    expires_at: d.expires_at,
    status: "open",
    outcome: null,
    option_id: null,
    payload: null,
    answered_by: null,
  });
  place(turn, action.run_id, "input_request", d.request_id);
  state.open_input_requests.push({ request_id: d.request_id, turn_id: turn.turn_id });
  deriveStatus(state);
}

function inputRequestResolved(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  const request = own(turn.input_requests, d.request_id);
  if (request === undefined) throw new Anomaly(`unknown input request ${d.request_id}`);
  if (request.status !== "open") {
    throw new Anomaly(`input request ${d.request_id} is already resolved`);
  }
  request.status = "resolved";
  request.outcome = d.outcome;
  request.option_id = d.option_id;
  request.payload = d.payload;
  request.answered_by = d.answered_by;
  state.open_input_requests = state.open_input_requests.filter(
    (entry) => entry.request_id !== d.request_id,
  );
  deriveStatus(state);
}

function planUpdated(state, action) {
  const turn = turnOf(state, action);
  container(turn, action.run_id).plan = action.data.entries;
}

function workerStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.workers, d.worker_run_id)) {
    throw new Anomaly(`worker ${d.worker_run_id} already exists`);
  }
  // Placed before registering the worker, so a worker never lands in its own timeline.
  place(turn, action.run_id, "worker", d.worker_run_id);
  put(turn.workers, d.worker_run_id, {
    worker_run_id: d.worker_run_id,
    parent_run_id: d.parent_run_id,
    parent_tool_call_id: d.parent_tool_call_id,
    name: d.name,
    task: d.task,
    status: "running",
    summary: null,
    timeline: [],
    plan: [],
    usage: emptyUsage(),
  });
}

function workerEnded(state, action) {
  const turn = turnOf(state, action);
  const worker = own(turn.workers, action.data.worker_run_id);
  if (worker === undefined) throw new Anomaly(`unknown worker ${action.data.worker_run_id}`);
  worker.status = action.data.status;
  worker.summary = action.data.summary;
}

function artifactPublished(state, action) {
  const d = action.data;
  if (own(state.artifacts, d.artifact_id)) {
    throw new Anomaly(`artifact ${d.artifact_id} already published`);
  }
  const turn = action.turn_id !== null ? turnOf(state, action) : null;
  put(state.artifacts, d.artifact_id, {
    artifact_id: d.artifact_id,
    turn_id: action.turn_id,
    run_id: action.run_id,
    name: d.name,
    media_type: d.media_type,
    size: d.size,
    sha256: d.sha256,
    tool_call_id: d.tool_call_id,
  });
  if (turn !== null) place(turn, action.run_id, "artifact", d.artifact_id);
}

function fileChanged(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  // A file change has no id of its own; the id of the action that reported it is stable.
  put(turn.file_changes, action.id, {
    id: action.id,
    run_id: action.run_id,
    path: d.path,
    change: d.change,
    tool_call_id: d.tool_call_id,
    diff_ref: d.diff_ref,
  });
  place(turn, action.run_id, "file_change", action.id);
}

function usageRecorded(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  const modelKey = `${d.provider}:${d.model}`;
  for (const byModel of [turn.usage_by_model, state.usage_by_model]) {
    if (!own(byModel, modelKey)) put(byModel, modelKey, emptyUsage());
    addUsage(byModel[modelKey], d);
  }
  addUsage(turn.usage, d);
  addUsage(state.usage, d);
  // A worker's usage includes that of the workers it started. `seen` only stops a
  // parent_run_id cycle, where reducer.py would loop forever; acyclic results are equal.
  const seen = new Set();
  let worker = action.run_id !== null ? own(turn.workers, action.run_id) : undefined;
  while (worker !== undefined && !seen.has(worker)) {
    seen.add(worker);
    addUsage(worker.usage, d);
    worker = own(turn.workers, worker.parent_run_id);
  }
}

function deliveryUpdated(state, action) {
  const d = action.data;
  put(state.deliveries, d.delivery_id, {
    delivery_id: d.delivery_id,
    channel: d.channel,
    target: d.target,
    status: d.status,
    attempts: d.attempts,
    error: d.error,
  });
}

const HANDLERS = {
  "session.created": sessionCreated,
  "session.updated": sessionUpdated,
  "turn.started": turnStarted,
  "turn.state": turnState,
  "turn.ended": turnEnded,
  "execution.attempt_started": attemptStarted,
  "message.added": messageAdded,
  "message.started": messageStarted,
  "message.delta": messageDelta,
  "message.completed": messageCompleted,
  "reasoning.delta": reasoningDelta,
  "reasoning.completed": reasoningCompleted,
  "tool_call.started": toolCallStarted,
  "tool_call.updated": toolCallUpdated,
  "input_request.opened": inputRequestOpened,
  "input_request.resolved": inputRequestResolved,
  "plan.updated": planUpdated,
  "worker.started": workerStarted,
  "worker.ended": workerEnded,
  "artifact.published": artifactPublished,
  "file.changed": fileChanged,
  "usage.recorded": usageRecorded,
  "delivery.updated": deliveryUpdated,
};

/** Every action type this version reduces; any other type only advances seq. */
export const ACTION_TYPES = Object.freeze(Object.keys(HANDLERS));

const payloadTypes = Object.keys(PAYLOADS);
if (payloadTypes.length !== ACTION_TYPES.length || payloadTypes.some((t) => !own(HANDLERS, t))) {
  throw new Error("every action type needs both a handler and its payload defaults");
}
