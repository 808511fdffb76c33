// The session reducer for the web client: the rules of src/opennua/protocol/reducer.py,
// handler for handler, over the state shape of state.py. `previous state + ordered action =
// next state`. Canonical JSON lives in canonical.js, the payload defaults of actions.py in
// payloads.js (checked against docs/schema/ by tests/js/payloads.test.mjs).
//
// Both reducers run tests/conformance/vectors/*.json and must produce byte-identical
// canonical JSON; change them together. Plain ES modules, no build step, no dependencies.
//
// Like the Python reducer, `reduce` takes ownership of the state it is given and advances
// it in place; keep a `copyState` if you need the previous one.

import { canonicalJson, clone, own, put } from "./canonical.js";
import { InvalidAction, PAYLOADS, normaliseAction } from "./payloads.js";

/** An action arrived past a hole in the log; the client must resync from `expected`. */
export class SequenceGap extends Error {
  constructor(expected, got) {
    super(`expected seq ${expected}, got ${got}`);
    this.name = "SequenceGap";
    this.expected = expected;
    this.got = got;
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
    deployment: null,
    model: null,
    snapshot_digest: null,
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

// -- state as JSON ------------------------------------------------------------------------

/** Canonical JSON of a state, byte-identical to Python's `state_to_json`. */
export function stateToJson(state) {
  return canonicalJson(state);
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
  state.deployment = d.deployment;
  state.model = d.model;
  state.snapshot_digest = d.snapshot_digest;
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
    model_retry: null,
    output: null,
    user_message_id: d.message_id,
    client_tools: d.client_tools,
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
    workspace: { manifest: null, files: 0, bytes: 0 },
    workspace_restores: {},
    unavailable_servers: {},
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
  turn.model_retry = action.data.model_retry;
  deriveStatus(state);
}

function turnEnded(state, action) {
  const turn = turnOf(state, action);
  if (turn.state === "ended") throw new Anomaly(`turn ${turn.turn_id} has already ended`);
  turn.state = "ended";
  turn.model_retry = null;
  turn.stop_reason = action.data.stop_reason;
  turn.error = action.data.error;
  turn.output = action.data.output;
  turn.ended_at = action.ts;
  settle(turn);
  state.open_input_requests = state.open_input_requests.filter(
    (entry) => entry.turn_id !== turn.turn_id,
  );
  deriveStatus(state);
}

// Whatever the turn left open ends with it (docs/protocol.md, "An ended turn is settled").
function settle(turn) {
  for (const request of Object.values(turn.input_requests)) {
    if (request.status === "open") {
      request.status = "resolved";
      request.outcome = "cancelled";
    }
  }
  for (const call of Object.values(turn.tool_calls)) {
    if (call.status === "pending") call.status = "cancelled"; // it never ran
    else if (call.status === "in_progress") call.status = "unknown"; // it may have taken effect
  }
  for (const message of Object.values(turn.messages)) {
    if (message.status === "streaming") message.status = "interrupted";
  }
  for (const item of Object.values(turn.reasoning)) {
    if (item.status === "streaming") item.status = "interrupted";
  }
  const plans = [turn.plan];
  for (const worker of Object.values(turn.workers)) {
    plans.push(worker.plan);
    if (worker.status === "running") worker.status = "cancelled";
  }
  for (const plan of plans) {
    for (const entry of plan) {
      if (entry.status === "in_progress") entry.status = "pending"; // nobody is doing it
    }
  }
}

// An ended turn takes no item that would be open again: it stays settled.
function stillOpen(turn) {
  if (turn.state === "ended") throw new Anomaly(`turn ${turn.turn_id} has already ended`);
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
  if (turn.state !== "ended") {
    // An attempt runs its turn: no `turn.state running` says so again (logs written
    // before that hold both, and fold the same).
    turn.state = "running";
    turn.model_retry = null;
    deriveStatus(state);
  }
}

// A message of the action's turn, placed in its run's timeline; ids never repeat.
function newMessage(state, action, text, status, content) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.messages, d.message_id)) throw new Anomaly(`message ${d.message_id} already exists`);
  put(turn.messages, d.message_id, {
    message_id: d.message_id,
    role: d.role,
    run_id: action.run_id,
    text,
    status,
    content,
  });
  place(turn, action.run_id, "message", d.message_id);
}

function messageAdded(state, action) {
  newMessage(state, action, textOf(action.data.content), "complete", action.data.content);
}

function messageStarted(state, action) {
  stillOpen(turnOf(state, action));
  newMessage(state, action, "", "streaming", null);
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

// A reasoning delta (complete = false) or its completion: either may come first.
function reasoning(state, action, mid, text, complete) {
  const turn = turnOf(state, action);
  if (!complete) stillOpen(turn);
  const existing = own(turn.reasoning, mid);
  const status = complete ? "complete" : "streaming";
  if (existing === undefined) {
    put(turn.reasoning, mid, { message_id: mid, run_id: action.run_id, text, status });
    place(turn, action.run_id, "reasoning", mid);
    return;
  }
  if (existing.status !== "streaming") throw new Anomaly(`reasoning of ${mid} is already complete`);
  existing.text = complete ? text : existing.text + text;
  existing.status = status;
}

function reasoningDelta(state, action) {
  reasoning(state, action, action.data.message_id, action.data.delta, false);
}

function reasoningCompleted(state, action) {
  reasoning(state, action, action.data.message_id, action.data.text, true);
}

function toolCallStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.tool_calls, d.tool_call_id)) {
    throw new Anomaly(`tool call ${d.tool_call_id} already exists`);
  }
  stillOpen(turn);
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
  if (d.status === "pending" || d.status === "in_progress") stillOpen(turn);
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
  stillOpen(turn);
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
  if (action.data.entries.some((entry) => entry.status === "in_progress")) stillOpen(turn);
  container(turn, action.run_id).plan = action.data.entries;
}

function workerStarted(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  if (own(turn.workers, d.worker_run_id)) {
    throw new Anomaly(`worker ${d.worker_run_id} already exists`);
  }
  stillOpen(turn);
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
    state: d.state,
    error: d.error,
  });
  if (turn !== null) place(turn, action.run_id, "artifact", d.artifact_id);
}

function artifactUpdated(state, action) {
  const d = action.data;
  const artifact = own(state.artifacts, d.artifact_id);
  if (artifact === undefined) throw new Anomaly(`unknown artifact ${d.artifact_id}`);
  artifact.state = d.state;
  artifact.error = d.error;
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
    diff: d.diff,
    size: d.size,
    sha256: d.sha256,
    binary: d.binary,
  });
  place(turn, action.run_id, "file_change", action.id);
}

function workspaceCommitted(state, action) {
  const d = action.data;
  turnOf(state, action).workspace = { manifest: d.manifest, files: d.files, bytes: d.bytes };
}

function workspaceRestored(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  turn.workspace = { manifest: d.manifest, files: d.files, bytes: d.bytes };
  put(turn.workspace_restores, action.id, {
    id: action.id,
    attempt: d.attempt,
    manifest: d.manifest,
    files: d.files,
    lost_paths: [...d.lost_paths],
    lost_more: d.lost_more,
    lost_tool_call_ids: [...d.lost_tool_call_ids],
  });
  place(turn, action.run_id, "workspace_restore", action.id);
}

function mcpServerUnavailable(state, action) {
  const turn = turnOf(state, action);
  const d = action.data;
  // A turn from a state saved before this field has none yet.
  if (!own(turn, "unavailable_servers")) put(turn, "unavailable_servers", {});
  put(turn.unavailable_servers, action.id, {
    id: action.id,
    server: d.server,
    code: d.code,
    message: d.message,
  });
  place(turn, action.run_id, "mcp_unavailable", action.id);
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
  const before = own(state.deliveries, d.delivery_id);
  const history = before !== undefined ? before.history : [];
  history.push({
    seq: action.seq,
    ts: action.ts,
    status: d.status,
    attempts: d.attempts,
    error: d.error,
  });
  // An update without the event id (a later report) keeps the one already known.
  const eventId = d.event_id !== null || before === undefined ? d.event_id : before.event_id;
  put(state.deliveries, d.delivery_id, {
    delivery_id: d.delivery_id,
    channel: d.channel,
    target: d.target,
    status: d.status,
    attempts: d.attempts,
    error: d.error,
    kind: d.kind,
    event_id: eventId,
    next_attempt_at: d.next_attempt_at,
    history,
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
  "artifact.updated": artifactUpdated,
  "file.changed": fileChanged,
  "workspace.committed": workspaceCommitted,
  "workspace.restored": workspaceRestored,
  "mcp_server.unavailable": mcpServerUnavailable,
  "usage.recorded": usageRecorded,
  "delivery.updated": deliveryUpdated,
};

/** Every action type this version reduces; any other type only advances seq. */
export const ACTION_TYPES = Object.freeze(Object.keys(HANDLERS));

const payloadTypes = Object.keys(PAYLOADS);
if (payloadTypes.length !== ACTION_TYPES.length || payloadTypes.some((t) => !own(HANDLERS, t))) {
  throw new Error("every action type needs both a handler and its payload defaults");
}
