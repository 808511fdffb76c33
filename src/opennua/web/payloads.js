// The payload of every action type, with the defaults of the pydantic models in
// src/opennua/protocol/actions.py: what the Python side would load from the same JSON.
//
// A missing optional field takes its default, unknown fields are dropped (extra="ignore"),
// nested models keep exactly their declared fields, and a missing required field throws
// InvalidAction (the Python side would fail to load the action at all).
//
// The table is data, not code, so tests/js/payloads.test.mjs can derive every type's fields
// from docs/schema/action.schema.json (written from the Python models) and compare: a field
// added or changed in Python without this table fails CI. Pure; no build step.

import { clone } from "./canonical.js";

/** An action that cannot be applied at all (no seq, a missing field): state unchanged. */
export class InvalidAction extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`);
    this.name = "InvalidAction";
    this.field = field;
  }
}

// -- field descriptors ---------------------------------------------------------------------
// In a model's shape a field is a descriptor below, or else a literal: its default.
//   REQUIRED                 a value that must be present, taken as it is
//   JSON / JSON_OBJECT       any JSON value, copied; missing: null / a new {}
//   required(model)          a nested model that must be present
//   nullable(model | list)   a nested model (or list of them), null when missing
//   listOf(model)            a list of models that must be present
//   CONTENT                  content parts (text, resource_link; other types kept as they came)

const FIELD = Symbol("field");

export const REQUIRED = Object.freeze({ [FIELD]: true, kind: "value", required: true });
export const JSON_VALUE = Object.freeze({
  [FIELD]: true,
  kind: "json",
  required: false,
  default: null,
});
export const JSON_OBJECT = Object.freeze({
  [FIELD]: true,
  kind: "json",
  required: false,
  factory: () => ({}),
});

/** A list of plain values (ids, paths), [] when missing. */
const VALUE_LIST = Object.freeze({
  [FIELD]: true,
  kind: "value",
  required: false,
  factory: () => [],
});

function model(name, shape) {
  const fields = Object.entries(shape).map(([key, spec]) =>
    Object.freeze(
      spec !== null && typeof spec === "object" && spec[FIELD]
        ? { key, ...spec }
        : { key, kind: "value", required: false, default: spec },
    ),
  );
  return Object.freeze({ name, fields: Object.freeze(fields) });
}

const required = (inner) =>
  Object.freeze({ [FIELD]: true, kind: "model", model: inner, required: true });
const listOf = (inner) =>
  Object.freeze({ [FIELD]: true, kind: "list", model: inner, required: true });
/** A list of models, [] when missing. */
const listOrEmpty = (inner) =>
  Object.freeze({ [FIELD]: true, kind: "list", model: inner, required: false, factory: () => [] });
function nullable(inner) {
  const base = inner[FIELD] ? inner : { [FIELD]: true, kind: "model", model: inner };
  return Object.freeze({ ...base, required: false, default: null });
}

// -- nested models -------------------------------------------------------------------------

export const CONTENT_PARTS = Object.freeze({
  text: model("TextPart", { type: "text", text: REQUIRED }),
  resource_link: model("ResourceLinkPart", {
    type: "resource_link",
    uri: REQUIRED,
    name: REQUIRED,
    media_type: null,
  }),
});
export const CONTENT = Object.freeze({ [FIELD]: true, kind: "parts", required: true });

const pluginRef = model("PluginRef", { name: REQUIRED, version: REQUIRED, digest: REQUIRED });
const trigger = model("Trigger", {
  kind: REQUIRED,
  principal_id: REQUIRED,
  client_id: null,
  source: null,
});
const clientTool = model("ClientTool", {
  name: REQUIRED,
  description: "",
  parameters: JSON_OBJECT,
});
const errorInfo = model("ErrorInfo", { code: REQUIRED, message: REQUIRED });
const modelRetry = model("ModelRetry", {
  attempt: REQUIRED,
  retry_at: REQUIRED,
  error: required(errorInfo),
});
const permissionOption = model("PermissionOption", {
  option_id: REQUIRED,
  name: REQUIRED,
  kind: REQUIRED,
});
const answeredBy = model("AnsweredBy", {
  client_id: null,
  principal_id: null,
  on_behalf_of: null,
});
const planEntry = model("PlanEntry", {
  id: REQUIRED,
  content: REQUIRED,
  status: REQUIRED,
  priority: "medium",
});

// -- the envelope and one payload per action type ------------------------------------------

/** The envelope's fields other than `type` (the key of PAYLOADS) and `data`. */
export const ENVELOPE = model("Action", {
  v: 1,
  session_id: REQUIRED,
  seq: null, // reduce() has checked it before anything is normalised
  id: REQUIRED,
  ts: REQUIRED,
  turn_id: null,
  run_id: null,
  client_id: null,
  intent_id: null,
});

export const PAYLOADS = Object.freeze({
  "session.created": model("SessionCreated", {
    title: "",
    workspace_id: null,
    principal_id: null,
    plugin: nullable(pluginRef),
    deployment_digest: null,
    metadata: JSON_OBJECT,
    deployment: null,
    model: null,
    snapshot_digest: null,
  }),
  "session.updated": model("SessionUpdated", { title: null, metadata: JSON_VALUE }),
  "turn.started": model("TurnStarted", {
    execution_id: REQUIRED,
    trigger: required(trigger),
    input: CONTENT,
    message_id: REQUIRED,
    retry_of: null,
    trace_id: REQUIRED,
    client_tools: listOrEmpty(clientTool),
  }),
  "turn.state": model("TurnState", {
    state: REQUIRED,
    attempt: null,
    model_retry: nullable(modelRetry),
  }),
  "turn.ended": model("TurnEnded", {
    stop_reason: REQUIRED,
    error: nullable(errorInfo),
    output: JSON_VALUE,
  }),
  "execution.attempt_started": model("AttemptStarted", {
    execution_id: REQUIRED,
    attempt: REQUIRED,
    attempt_id: REQUIRED,
    supervisor_id: REQUIRED,
    resumed_from_checkpoint: REQUIRED,
  }),
  "message.added": model("MessageAdded", {
    message_id: REQUIRED,
    role: REQUIRED,
    content: CONTENT,
  }),
  "message.started": model("MessageStarted", { message_id: REQUIRED, role: REQUIRED }),
  "message.delta": model("MessageDelta", { message_id: REQUIRED, delta: REQUIRED }),
  "message.completed": model("MessageCompleted", {
    message_id: REQUIRED,
    text: REQUIRED,
    status: REQUIRED,
  }),
  "reasoning.delta": model("ReasoningDelta", { message_id: REQUIRED, delta: REQUIRED }),
  "reasoning.completed": model("ReasoningCompleted", { message_id: REQUIRED, text: REQUIRED }),
  "tool_call.started": model("ToolCallStarted", {
    tool_call_id: REQUIRED,
    name: REQUIRED,
    title: REQUIRED,
    kind: REQUIRED,
    input: JSON_VALUE,
  }),
  "tool_call.updated": model("ToolCallUpdated", {
    tool_call_id: REQUIRED,
    status: REQUIRED,
    output: null,
    output_ref: null,
    error: nullable(errorInfo),
  }),
  "input_request.opened": model("InputRequestOpened", {
    request_id: REQUIRED,
    reason: REQUIRED,
    tool_call_id: null,
    prompt: REQUIRED,
    options: nullable(listOf(permissionOption)),
    response_schema: JSON_VALUE,
    expires_at: null,
  }),
  "input_request.resolved": model("InputRequestResolved", {
    request_id: REQUIRED,
    outcome: REQUIRED,
    option_id: null,
    payload: JSON_VALUE,
    answered_by: nullable(answeredBy),
    reason: null,
  }),
  "plan.updated": model("PlanUpdated", { entries: listOf(planEntry) }),
  "worker.started": model("WorkerStarted", {
    worker_run_id: REQUIRED,
    parent_run_id: REQUIRED,
    parent_tool_call_id: REQUIRED,
    name: REQUIRED,
    task: REQUIRED,
  }),
  "worker.ended": model("WorkerEnded", {
    worker_run_id: REQUIRED,
    status: REQUIRED,
    summary: null,
  }),
  "artifact.published": model("ArtifactPublished", {
    artifact_id: REQUIRED,
    name: REQUIRED,
    media_type: REQUIRED,
    size: REQUIRED,
    sha256: REQUIRED,
    tool_call_id: null,
    state: "published",
    error: nullable(errorInfo),
  }),
  "artifact.updated": model("ArtifactUpdated", {
    artifact_id: REQUIRED,
    state: REQUIRED,
    error: nullable(errorInfo),
  }),
  "file.changed": model("FileChanged", {
    path: REQUIRED,
    change: REQUIRED,
    tool_call_id: null,
    diff_ref: null,
    diff: null,
    size: null,
    sha256: null,
    binary: false,
  }),
  "usage.recorded": model("UsageRecorded", {
    provider: REQUIRED,
    model: REQUIRED,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    reasoning_output_tokens: 0,
  }),
  "delivery.updated": model("DeliveryUpdated", {
    delivery_id: REQUIRED,
    channel: REQUIRED,
    target: REQUIRED,
    status: REQUIRED,
    attempts: 0,
    error: nullable(errorInfo),
    kind: null,
    event_id: null,
    next_attempt_at: null,
  }),
  "workspace.committed": model("WorkspaceCommitted", {
    execution_id: REQUIRED,
    manifest: REQUIRED,
    files: REQUIRED,
    bytes: REQUIRED,
  }),
  "workspace.restored": model("WorkspaceRestored", {
    execution_id: REQUIRED,
    attempt: REQUIRED,
    files: REQUIRED,
    bytes: REQUIRED,
    manifest: null,
    lost_paths: VALUE_LIST,
    lost_more: 0,
    lost_tool_call_ids: VALUE_LIST,
  }),
  "mcp_server.unavailable": model("McpServerUnavailable", {
    server: REQUIRED,
    code: REQUIRED,
    message: REQUIRED,
  }),
});

// -- normalising ---------------------------------------------------------------------------

const hasOwn = (obj, key) => Object.prototype.hasOwnProperty.call(obj, key);

/** A field's raw value, or undefined when it is missing. */
function present(raw, key) {
  const value = raw?.[key];
  return value !== undefined && hasOwn(raw, key) ? value : undefined;
}

function missing(spec, path) {
  if (spec.required) throw new InvalidAction(`${path}.${spec.key}`, "field required");
  return spec.factory ? spec.factory() : spec.default;
}

function normalise(shape, raw, path) {
  const out = {};
  for (const spec of shape.fields) {
    let value = present(raw, spec.key);
    if (spec.kind === "value") {
      out[spec.key] = value === undefined ? missing(spec, path) : value;
      continue;
    }
    // Structured fields treat an explicit null like a missing field, as before.
    if (value === undefined || value === null) {
      out[spec.key] = missing(spec, path);
      continue;
    }
    if (spec.kind === "json") {
      value = clone(value);
    } else if (spec.kind === "model") {
      value = normalise(spec.model, value, `${path}.${spec.key}`);
    } else {
      if (!Array.isArray(value)) {
        throw new InvalidAction(`${path}.${spec.key}`, "a list is required");
      }
      const item = spec.kind === "list" ? normalise : contentPart;
      const model = spec.model;
      value = value.map((entry, index) => item(model, entry, `${path}.${spec.key}[${index}]`));
    }
    out[spec.key] = value;
  }
  return out;
}

function contentPart(_model, raw, path) {
  const known = typeof raw?.type === "string" ? CONTENT_PARTS[raw.type] : undefined;
  if (known !== undefined && hasOwn(CONTENT_PARTS, raw.type)) return normalise(known, raw, path);
  // A part of a type this version does not know is kept as it came (actions.OtherPart).
  if (typeof raw?.type !== "string") throw new InvalidAction(`${path}.type`, "field required");
  return clone(raw);
}

/** The action as the Python side would load it; throws InvalidAction where it would fail. */
export function normaliseAction(raw) {
  const act = normalise(ENVELOPE, raw, "action");
  if (act.v !== 1) throw new InvalidAction("action.v", `unsupported protocol version ${act.v}`);
  act.type = raw.type;
  const data = present(raw, "data");
  if (data === undefined) throw new InvalidAction("action.data", "field required");
  act.data = normalise(PAYLOADS[act.type], data, "data");
  return act;
}
