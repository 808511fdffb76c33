// The web reducer's own rules, beyond the shared vectors: canonical JSON against bytes
// produced by Python, the seq rules, payload defaults, and ids that are not safe as plain
// JS object keys.

import assert from "node:assert/strict";
import { test } from "node:test";

import { canonicalJson, compareCodePoints } from "../../src/opennua/web/canonical.js";
import { InvalidAction } from "../../src/opennua/web/payloads.js";
import {
  SequenceGap,
  copyState,
  initialState,
  reduce,
  replay,
  stateFromJson,
  stateToJson,
} from "../../src/opennua/web/reducer.js";

// Both literals printed by Python: the input with json.dumps(ensure_ascii=True), and
// json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False).
const PY_INPUT = JSON.parse(
  "{\"z\": 1, \"a\": [true, false, null, 0, -7, 0.5, 9007199254740991], \"\\ud83d\\ude00\": \"emoji key (astral)\", \"\\ue000\": \"private use\", \"\\uffff\": \"last BMP\", \"\\u00e9\": \"latin\", \"Z\": \"upper\", \"\": \"empty\", \"__proto__\": {\"constructor\": \"x\", \"toString\": \"y\"}, \"text\": \"quote \\\" backslash \\\\ slash / nul \\u0000 bell \\u0007 bs \\b ff \\f nl \\n cr \\r tab \\t us \\u001f del \\u007f nbsp \\u00a0 ls \\u2028 ps \\u2029 bom \\ufeff emoji \\ud83d\\udcc4\\ud83d\\udc69\\u200d\\ud83d\\udcbb cjk \\u5831\\u544a\", \"nested\": {\"b\": {\"\\ud83d\\ude00\": 1, \"\\uffff\": 2, \"\\ud7ff\": 3}, \"a\": []}}",
);
const PY_CANONICAL =
  "{\"\":\"empty\",\"Z\":\"upper\",\"__proto__\":{\"constructor\":\"x\",\"toString\":\"y\"},\"a\":[true,false,null,0,-7,0.5,9007199254740991],\"nested\":{\"a\":[],\"b\":{\"\ud7ff\":3,\"\uffff\":2,\"\ud83d\ude00\":1}},\"text\":\"quote \\\" backslash \\\\ slash / nul \\u0000 bell \\u0007 bs \\b ff \\f nl \\n cr \\r tab \\t us \\u001f del \u007f nbsp \u00a0 ls \u2028 ps \u2029 bom \ufeff emoji \ud83d\udcc4\ud83d\udc69\u200d\ud83d\udcbb cjk \u5831\u544a\",\"z\":1,\"\u00e9\":\"latin\",\"\ue000\":\"private use\",\"\uffff\":\"last BMP\",\"\ud83d\ude00\":\"emoji key (astral)\"}";

const SID = "ses_01";
let nextId = 0;

function act(seq, type, data, extra = {}) {
  nextId += 1;
  return {
    v: 1,
    session_id: SID,
    seq,
    id: `act_${nextId}`,
    type,
    ts: "2026-11-29T08:00:00.000Z",
    ...extra,
    data,
  };
}

const created = (seq = 1) => act(seq, "session.created", { title: "t" });
const started = (seq, turnId = "trn_1", messageId = "msg_u") =>
  act(
    seq,
    "turn.started",
    {
      execution_id: "exe_1",
      trigger: { kind: "message", principal_id: "prn_1" },
      input: [{ type: "text", text: "hi" }],
      message_id: messageId,
      trace_id: "trace_1",
    },
    { turn_id: turnId },
  );

test("canonical JSON is byte-identical to Python's json.dumps", () => {
  assert.equal(canonicalJson(PY_INPUT), PY_CANONICAL);
  assert.equal(canonicalJson(JSON.parse(PY_CANONICAL)), PY_CANONICAL);
});

test("keys sort by code point, not UTF-16 code unit", () => {
  const keys = ["\u{1F600}", "\uffff", "\ue000", "\ud7ff", "a", "", "ab"];
  const sorted = ["", "a", "ab", "\ud7ff", "\ue000", "\uffff", "\u{1F600}"];
  assert.deepEqual(keys.sort(compareCodePoints), sorted);
  assert.ok(compareCodePoints("x\u{1F600}", "x\u{1F601}") < 0);
  assert.ok(compareCodePoints("x\u{10000}", "x\uffff") > 0);
});

test("canonical JSON refuses values Python would write differently", () => {
  assert.throws(() => canonicalJson({ a: undefined }), TypeError);
  assert.throws(() => canonicalJson([Number.NaN]), TypeError);
});

test("a duplicate changes nothing; a gap throws SequenceGap and changes nothing", () => {
  const state = replay([created(), started(2)]);
  const before = stateToJson(state);
  assert.equal(reduce(state, created(1)), state);
  const stale = act(2, "turn.state", { state: "running" }, { turn_id: "trn_1" });
  assert.equal(reduce(state, stale), state);
  assert.equal(stateToJson(state), before);
  assert.throws(
    () => reduce(state, act(5, "turn.state", { state: "running" }, { turn_id: "trn_1" })),
    (error) => error instanceof SequenceGap && error.expected === 3 && error.got === 5,
  );
  assert.equal(stateToJson(state), before);
});

test("an action without a numeric seq throws InvalidAction and changes nothing", () => {
  const state = replay([created()]);
  const before = stateToJson(state);
  for (const seq of [undefined, null, "2", 1.5, 0]) {
    assert.throws(() => reduce(state, { ...created(), seq }), InvalidAction);
  }
  assert.equal(stateToJson(state), before);
});

test("a known action missing a required field throws InvalidAction and changes nothing", () => {
  const state = replay([created(), started(2)]);
  const before = stateToJson(state);
  const noId = act(3, "message.started", { role: "assistant" }, { turn_id: "trn_1" });
  assert.throws(() => reduce(state, noId), (error) => error.field === "data.message_id");
  assert.throws(() => reduce(state, { ...created(3), v: 2 }), InvalidAction);
  assert.equal(stateToJson(state), before);
});

test("an unknown type advances seq only", () => {
  const state = replay([created()]);
  const before = JSON.parse(stateToJson(state));
  reduce(state, act(2, "telemetry.sampled", { rate: 0.5 }));
  assert.deepEqual(JSON.parse(stateToJson(state)), { ...before, seq: 2 });
});

test("missing optional fields behave as their defaults; unknown fields are dropped", () => {
  const explicit = replay([
    act(1, "session.created", {
      title: "",
      workspace_id: null,
      principal_id: null,
      plugin: null,
      deployment_digest: null,
      metadata: {},
    }),
    act(2, "turn.started", {
      execution_id: "exe_1",
      trigger: { kind: "message", principal_id: "prn_1", client_id: null, source: null },
      input: [{ type: "resource_link", uri: "file:///a", name: "a", media_type: null }],
      message_id: "msg_u",
      retry_of: null,
      trace_id: "trace_1",
    }, { turn_id: "trn_1", run_id: null }),
    act(3, "plan.updated", {
      entries: [{ id: "p1", content: "do", status: "pending", priority: "medium" }],
    }, { turn_id: "trn_1" }),
    act(4, "usage.recorded", {
      provider: "p",
      model: "m",
      input_tokens: 0,
      output_tokens: 3,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
      reasoning_output_tokens: 0,
    }, { turn_id: "trn_1" }),
    act(5, "delivery.updated", {
      delivery_id: "dlv_1", channel: "c", target: "t", status: "accepted", attempts: 0, error: null,
    }),
  ]);
  const sparse = replay([
    act(1, "session.created", { future_field: 1 }),
    act(2, "turn.started", {
      execution_id: "exe_1",
      trigger: { kind: "message", principal_id: "prn_1", extra: true },
      input: [{ type: "resource_link", uri: "file:///a", name: "a", size: 3 }],
      message_id: "msg_u",
      trace_id: "trace_1",
    }, { turn_id: "trn_1" }),
    act(3, "plan.updated", { entries: [{ id: "p1", content: "do", status: "pending" }] }, {
      turn_id: "trn_1",
    }),
    act(4, "usage.recorded", { provider: "p", model: "m", output_tokens: 3 }, { turn_id: "trn_1" }),
    act(5, "delivery.updated", {
      delivery_id: "dlv_1", channel: "c", target: "t", status: "accepted",
    }),
  ]);
  assert.equal(stateToJson(sparse), stateToJson(explicit));
});

test("ids that name Object.prototype members are ordinary entries", () => {
  const state = replay([created(), started(2, "trn_1", "__proto__")]);
  const inTurn = { turn_id: "trn_1" };
  const opened = { message_id: "constructor", role: "assistant" };
  reduce(state, act(3, "message.started", opened, inTurn));
  reduce(state, act(4, "message.delta", { message_id: "toString", delta: "x" }, inTurn));
  const updated = { tool_call_id: "hasOwnProperty", status: "failed" };
  reduce(state, act(5, "tool_call.updated", updated, inTurn));
  const turn = state.turns[0];
  assert.deepEqual(Object.keys(turn.messages).sort(), ["__proto__", "constructor"]);
  assert.equal(Object.getPrototypeOf(turn.messages), Object.prototype);
  assert.deepEqual(state.anomalies.map((entry) => entry.reason), [
    "unknown message toString",
    "unknown tool call hasOwnProperty",
  ]);
  const text = stateToJson(state);
  assert.equal(stateToJson(stateFromJson(text)), text);
  assert.equal(stateToJson(copyState(state)), text);
});

test("copyState is independent of the state the reducer advances", () => {
  const state = replay([created(), started(2)]);
  const kept = copyState(state);
  const before = stateToJson(kept);
  reduce(state, act(3, "turn.ended", { stop_reason: "end_turn" }, { turn_id: "trn_1" }));
  assert.equal(stateToJson(kept), before);
  assert.notEqual(stateToJson(state), before);
});

test("the reducer does not keep references into the action it was given", () => {
  const action = act(1, "session.created", { metadata: { nested: { a: 1 } } });
  const state = reduce(initialState(), action);
  action.data.metadata.nested.a = 2;
  assert.equal(state.metadata.nested.a, 1);
});

test("a parent_run_id cycle between workers does not hang usage accounting", () => {
  const worker = (seq, id, parent) =>
    act(seq, "worker.started", {
      worker_run_id: id, parent_run_id: parent, parent_tool_call_id: "tc", name: "w", task: "t",
    }, { turn_id: "trn_1" });
  const state = replay([
    created(),
    started(2),
    worker(3, "run_a", "run_b"),
    worker(4, "run_b", "run_a"),
    act(5, "usage.recorded", { provider: "p", model: "m", input_tokens: 2 }, {
      turn_id: "trn_1", run_id: "run_a",
    }),
  ]);
  const workers = state.turns[0].workers;
  assert.equal(workers.run_a.usage.input_tokens, 2);
  assert.equal(workers.run_b.usage.input_tokens, 2);
});
