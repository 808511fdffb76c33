// The web UI's logic without a DOM: ids, the API client's retry rule, the live feed's
// reconnect/resync, the optimistic overlay, the store and the session controller.
// The views are exercised in a real browser by tests/browser/.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { Api, ApiError, newId, stableClientId } from "../../src/opennua/web/api.js";
import { Workspace } from "../../src/opennua/web/context.js";
import { SessionController } from "../../src/opennua/web/controller.js";
import { LiveFeed, STATUS } from "../../src/opennua/web/live.js";
import { Overlay } from "../../src/opennua/web/overlay.js";
import { replay, stateToJson } from "../../src/opennua/web/reducer.js";
import { SessionStore } from "../../src/opennua/web/store.js";
import {
  attemptLabel,
  countdown,
  inputFields,
  modelRetryText,
  visible,
  waitingForModel,
  who,
} from "../../src/opennua/web/views/format.js";
import { shortDigest } from "../../src/opennua/web/views/kit.js";
// Loaded for their syntax and imports: the views need a DOM only when called.
import "../../src/opennua/web/views/audit.js";
import "../../src/opennua/web/views/automation.js";
import "../../src/opennua/web/views/deployments.js";
import "../../src/opennua/web/views/list.js";
import "../../src/opennua/web/views/people.js";
import "../../src/opennua/web/views/plugins.js";
import "../../src/opennua/web/views/secrets.js";
import "../../src/opennua/web/views/session.js";
import "../../src/opennua/web/views/usage.js";

const vector = (name) =>
  JSON.parse(readFileSync(new URL(`../conformance/vectors/${name}.json`, import.meta.url)));
const clone = (value) => JSON.parse(JSON.stringify(value));

// -- ids -------------------------------------------------------------------------------------

describe("ids", () => {
  test("a prefixed ULID: 26 Crockford digits, time first so ids sort by creation", () => {
    // The same bytes through python-ulid (what the server's new_id uses) give this string.
    const id = newId("cli_", 1_800_000_000_000, (n) => Uint8Array.from({ length: n }, (_, i) => i));
    assert.equal(id, "cli_01MCC5RM00000G40R40M30E209");
    assert.ok(newId("int_", 1000) < newId("int_", 2000));
  });

  test("the client id is chosen once and kept", () => {
    const store = new Map();
    const storage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, v) };
    const first = stableClientId(storage);
    assert.match(first, /^cli_/);
    assert.equal(stableClientId(storage), first);
  });
});

// -- API: which failures re-send an intent ----------------------------------------------------

function response(status, body) {
  return { ok: status < 400, status, statusText: "", json: async () => body };
}

describe("Api.intent", () => {
  test("re-sends with the same Idempotency-Key while the outcome is unknown", async () => {
    const seen = [];
    const answers = [
      () => {
        throw new TypeError("connection refused");
      },
      () => response(409, { code: "request_in_flight" }),
      () => response(202, { turn_id: "trn_1" }),
    ];
    const api = new Api({
      fetchImpl: async (url, init) => {
        seen.push(init.headers["Idempotency-Key"]);
        return answers.shift()();
      },
      pause: async () => {},
    });
    const ids = await api.sendMessage("ses_1", {
      text: "hi",
      ifBusy: "enqueue",
      clientId: "cli_1",
      intentId: "int_1",
    });
    assert.deepEqual(ids, { turn_id: "trn_1" });
    assert.deepEqual(seen, ["int_1", "int_1", "int_1"]);
  });

  test("a definite refusal is thrown at once, with its problem code and body", async () => {
    let calls = 0;
    const resolution = { outcome: "selected", answered_by: { client_id: "cli_other" } };
    const api = new Api({
      fetchImpl: async () => {
        calls += 1;
        return response(409, { code: "input_request_resolved", resolution });
      },
      pause: async () => {},
    });
    await assert.rejects(
      api.answer("ses_1", "req_1", { optionId: "allow_once", clientId: "c", intentId: "i" }),
      (error) => {
        assert.ok(error instanceof ApiError);
        assert.equal(error.code, "input_request_resolved");
        assert.deepEqual(error.problem.resolution, resolution);
        return true;
      },
    );
    assert.equal(calls, 1);
  });
});

// -- live feed --------------------------------------------------------------------------------

class FakeSource {
  static all = [];
  constructor(url) {
    this.url = url;
    this.listeners = {};
    this.closed = false;
    FakeSource.all.push(this);
  }
  addEventListener(name, fn) {
    this.listeners[name] = fn;
  }
  close() {
    this.closed = true;
  }
  emit(name, data) {
    this.listeners[name]({ data: JSON.stringify(data) });
  }
}

function fakeTimers() {
  const queue = [];
  return {
    queue,
    setTimeout: (fn, ms) => queue.push({ fn, ms }) && queue.length,
    clearTimeout: () => {},
    run() {
      const { fn, ms } = queue.shift();
      fn();
      return ms;
    },
  };
}

describe("LiveFeed", () => {
  test("reconnects from the seq of the state it holds, with a growing delay", () => {
    FakeSource.all = [];
    const timers = fakeTimers();
    let seq = 4;
    const statuses = [];
    const feed = new LiveFeed({
      url: (after) => `/events?after=${after}`,
      seq: () => seq,
      onAction: (action) => {
        seq = action.seq;
      },
      onResync: () => {},
      onStatus: (s) => statuses.push(s),
      EventSourceImpl: FakeSource,
      timers,
    });
    feed.start();
    const first = FakeSource.all[0];
    assert.equal(first.url, "/events?after=4");
    first.onopen();
    first.emit("action", { seq: 5 });
    first.onerror();
    assert.ok(first.closed);
    assert.equal(timers.run(), 200);
    const second = FakeSource.all[1];
    assert.equal(second.url, "/events?after=5");
    second.onerror();
    assert.equal(timers.run(), 400);
    FakeSource.all[2].onopen();
    assert.deepEqual(statuses, ["connecting", "live", "reconnecting", "live"]);
  });

  test("a resync frame closes the stream and hands over to the owner", () => {
    FakeSource.all = [];
    let resynced = null;
    const statuses = [];
    const feed = new LiveFeed({
      url: () => "/events",
      seq: () => 0,
      onAction: () => {},
      onResync: (seq) => {
        resynced = seq;
      },
      onStatus: (s) => statuses.push(s),
      EventSourceImpl: FakeSource,
      timers: fakeTimers(),
    });
    feed.start();
    FakeSource.all[0].emit("resync", { seq: 1200 });
    assert.equal(resynced, 1200);
    assert.ok(FakeSource.all[0].closed);
    assert.equal(statuses.at(-1), STATUS.RESYNCING);
  });
});

describe("LiveFeed after a revocation", () => {
  test("a revoked frame ends the stream for good and tells the owner why", () => {
    FakeSource.all = [];
    const timers = fakeTimers();
    let why = null;
    const statuses = [];
    const feed = new LiveFeed({
      url: () => "/events",
      seq: () => 0,
      onAction: () => {},
      onResync: () => {},
      onRevoked: (data) => {
        why = data;
      },
      onStatus: (s) => statuses.push(s),
      EventSourceImpl: FakeSource,
      timers,
    });
    feed.start();
    FakeSource.all[0].onopen();
    FakeSource.all[0].emit("revoked", { code: "token_revoked", detail: "revoked" });
    assert.deepEqual(why, { code: "token_revoked", detail: "revoked" });
    assert.ok(FakeSource.all[0].closed);
    assert.equal(statuses.at(-1), STATUS.CLOSED);
    assert.equal(timers.queue.length, 0); // no reconnect: it would only be refused
    assert.equal(FakeSource.all.length, 1);
  });
});

// -- overlay -------------------------------------------------------------------------------------

describe("Overlay", () => {
  test("a message shows until the action carrying its intent_id arrives", () => {
    const overlay = new Overlay();
    overlay.addMessage("int_1", "hello", "enqueue");
    overlay.messageAccepted("int_1", "trn_1");
    assert.equal(overlay.pendingMessages().length, 1);
    assert.equal(overlay.confirm({ type: "turn.state", intent_id: "int_other" }), false);
    assert.equal(overlay.confirm({ type: "turn.started", intent_id: "int_1" }), true);
    assert.equal(overlay.pendingMessages().length, 0);
  });

  test("a snapshot that already holds the accepted turn drops the entry", () => {
    const overlay = new Overlay();
    overlay.addMessage("int_1", "hello", "enqueue");
    overlay.messageAccepted("int_1", "trn_1");
    overlay.reconcile({ turns: [{ turn_id: "trn_0", input_requests: {} }] });
    assert.equal(overlay.pendingMessages().length, 1);
    overlay.reconcile({ turns: [{ turn_id: "trn_1", input_requests: {} }] });
    assert.equal(overlay.pendingMessages().length, 0);
  });

  test("an answer that lost remembers the winner; one that won leaves nothing", () => {
    const overlay = new Overlay();
    overlay.addAnswer("req_1", "int_mine", { optionId: "allow_once" });
    overlay.addAnswer("req_2", "int_mine2", { optionId: "allow_once" });
    const winner = { client_id: "cli_other", principal_id: "prn_owner" };
    const resolved = (request_id, intent_id) => ({
      type: "input_request.resolved",
      intent_id,
      data: { request_id, outcome: "selected", option_id: "reject_once", answered_by: winner },
    });
    overlay.confirm(resolved("req_1", "int_theirs"));
    overlay.confirm(resolved("req_2", "int_mine2"));
    assert.equal(overlay.answerFor("req_1"), null);
    assert.deepEqual(overlay.lostTo("req_1").resolution.answered_by, winner);
    assert.equal(overlay.lostTo("req_2"), null);
  });
});

// -- store and controller ----------------------------------------------------------------------

describe("SessionStore", () => {
  test("live actions and snapshot + tail give the same canonical JSON", () => {
    const { actions } = vector("demo_shape");
    const live = new SessionStore("ses");
    for (const action of clone(actions)) live.apply(action);
    const split = Math.floor(actions.length / 2);
    const resumed = new SessionStore("ses");
    const head = replay(clone(actions.slice(0, split)));
    resumed.load(head.seq, JSON.parse(stateToJson(head)));
    for (const action of clone(actions.slice(split))) resumed.apply(action);
    assert.equal(resumed.toJson(), live.toJson());
    assert.equal(live.toJson(), stateToJson(replay(clone(actions))));
  });

  test("only the touched turn's change token moves", () => {
    const { actions } = vector("enqueued_turns");
    const store = new SessionStore("ses");
    for (const action of clone(actions)) store.apply(action);
    const [a, b] = store.state.turns.map((turn) => turn.turn_id);
    const before = [store.turnToken(a), store.turnToken(b)];
    store.touchTurn(b);
    assert.equal(store.turnToken(a), before[0]);
    assert.notEqual(store.turnToken(b), before[1]);
  });
});

describe("SessionController", () => {
  function controller(snapshots, api = {}) {
    FakeSource.all = [];
    const notices = [];
    const c = new SessionController({
      api: {
        snapshot: async () => snapshots.shift(),
        eventsUrl: (sid, after) => `/events?after=${after}`,
        ...api,
      },
      sessionId: "ses",
      clientId: "cli_me",
      onChange: () => {},
      onStatus: () => {},
      onNotice: (n) => notices.push(n),
      onFatal: () => {},
      schedule: (fn) => fn(),
    });
    c.feed.EventSource = FakeSource;
    c.feed.timers = fakeTimers();
    return { c, notices };
  }

  test("a hole in the log triggers a snapshot and a new stream from its seq", async () => {
    const { actions } = vector("turn_simple");
    const full = replay(clone(actions));
    const early = replay(clone(actions.slice(0, 2)));
    const { c } = controller([
      { seq: early.seq, state: JSON.parse(stateToJson(early)) },
      { seq: full.seq, state: JSON.parse(stateToJson(full)) },
    ]);
    await c.open();
    assert.equal(FakeSource.all[0].url, `/events?after=${early.seq}`);
    // seq 4 arrives while 3 was lost: the reducer refuses, the controller resnapshots.
    FakeSource.all[0].emit("action", clone(actions[3]));
    await c.resyncing;
    assert.equal(c.store.toJson(), stateToJson(full));
    assert.equal(FakeSource.all.at(-1).url, `/events?after=${full.seq}`);
  });

  test("a refused message is rolled back and its text handed back", async () => {
    const empty = replay(clone(vector("session_created").actions));
    const refusal = new ApiError(409, { code: "session_busy" });
    const { c, notices } = controller([{ seq: empty.seq, state: JSON.parse(stateToJson(empty)) }], {
      sendMessage: async () => {
        assert.equal(c.store.overlay.pendingMessages()[0].text, "hello");
        throw refusal;
      },
    });
    await c.open();
    const before = c.store.toJson();
    const result = await c.sendMessage("hello", "reject");
    assert.equal(result.ok, false);
    assert.equal(c.store.overlay.pendingMessages().length, 0);
    assert.equal(notices[0].text, "hello");
    assert.equal(notices[0].error.code, "session_busy");
    // The confirmed state never saw the optimistic message.
    assert.equal(c.store.toJson(), before);
  });

  test("a 409 on an answer is the winner's resolution, not a notice", async () => {
    const { actions } = vector("hitl_resolved");
    const opened = actions.findIndex((a) => a.type === "input_request.opened");
    const state = replay(clone(actions.slice(0, opened + 1)));
    const requestId = actions[opened].data.request_id;
    const resolution = {
      request_id: requestId,
      outcome: "selected",
      answered_by: { client_id: "cli_x" },
    };
    const { c, notices } = controller([{ seq: state.seq, state: JSON.parse(stateToJson(state)) }], {
      answer: async () => {
        throw new ApiError(409, { code: "input_request_resolved", resolution });
      },
    });
    await c.open();
    await c.answer(requestId, { optionId: "allow_once" });
    assert.equal(notices.length, 0);
    assert.equal(c.store.overlay.answerFor(requestId).status, "conflict");
    assert.deepEqual(c.store.overlay.lostTo(requestId).resolution, resolution);
  });
});

// -- words ---------------------------------------------------------------------------------------

describe("format", () => {
  test("an attempt on another supervisor is a resume after restart", () => {
    const attempts = [
      { attempt: 1, supervisor_id: "sup_a", resumed_from_checkpoint: false },
      { attempt: 2, supervisor_id: "sup_a", resumed_from_checkpoint: true },
      { attempt: 3, supervisor_id: "sup_b", resumed_from_checkpoint: true },
    ];
    assert.equal(attemptLabel(attempts, 0), "Attempt 1 started");
    assert.equal(attemptLabel(attempts, 1), "Attempt 2: resumed from checkpoint");
    assert.equal(attemptLabel(attempts, 2), "Attempt 3: resumed after restart (sup_b)");
  });

  test("who answered, marked when it was this browser", () => {
    const by = { client_id: "cli_a", principal_id: "prn_owner" };
    assert.equal(who(by, "cli_b"), "cli_a (prn_owner)");
    assert.equal(who(by, "cli_a"), "cli_a (prn_owner) — you");
    // Answered in chat: the person first, then the bridge's client and principal.
    const chat = { client_id: "cli_bridge", principal_id: "prn_bot", on_behalf_of: "@alice:ex.org" };
    assert.equal(who(chat, "cli_b"), "@alice:ex.org (via cli_bridge, prn_bot)");
  });
});

// -- what a person decides on, and what a turn waits for -------------------------------------

describe("approval and activity", () => {
  const shared = JSON.parse(readFileSync(new URL("./visible_text.json", import.meta.url)));

  test("visible() follows the CLI's rules on the shared cases", () => {
    for (const entry of shared.cases) assert.equal(visible(entry.input), entry.visible, entry.name);
  });

  test("the hidden command of issue 12 is shown whole, its spaces counted", () => {
    const command = `wc -l notes.md${" ".repeat(220)}; cat ../../token > stolen.txt`;
    const [field] = inputFields({ command });
    assert.deepEqual(field, {
      name: "command",
      value: `wc -l notes.md${"·".repeat(220)}; cat ../../token > stolen.txt`,
    });
    const many = inputFields({ path: "a b", content: "x\ny", flags: [1, "a  b"] });
    assert.deepEqual(
      many.map((f) => [f.name, f.value]),
      [
        ["path", "a b"],
        ["content", "x⏎\ny"],
        ["flags", '[1,"a··b"]'],
      ],
    );
    assert.deepEqual(inputFields(null), [{ name: "input", value: "null" }]);
  });

  test("a model retry: its attempt, time and error; a countdown to it", () => {
    const retrying = replay(vector("model_retry").actions.slice(0, 5));
    const retry = retrying.turns[0].model_retry;
    const at = new Date(retry.retry_at).toLocaleTimeString("en-GB");
    const text = modelRetryText(retry);
    assert.equal(text.head, `Retrying the model (attempt 1) at ${at}`);
    assert.equal(text.error, `model_rate_limited: ${retry.error.message}`);
    const due = Date.parse(retry.retry_at);
    assert.equal(countdown(retry.retry_at, due - 3200), ", in 4 s");
    assert.equal(countdown(retry.retry_at, due + 10), ", now");
    assert.equal(waitingForModel(retrying.turns[0]), null, "a retry says more than waiting");
    const cleared = replay(vector("model_retry").actions.slice(0, 6));
    assert.equal(cleared.turns[0].model_retry, null);
  });

  test("waiting for the model is projected from the state", () => {
    const base = vector("turn_simple").actions;
    const upTo = (type) => base.slice(0, base.findIndex((a) => a.type === type) + 1);
    // Running, nothing after the user's message yet.
    const started = replay(upTo("turn.started"));
    const running = replay(upTo("turn.state"));
    assert.equal(running.turns[0].state, "running");
    assert.equal(waitingForModel(running.turns[0]), "");
    assert.equal(waitingForModel(started.turns[0]), null, "queued: not asked yet");
    // The model's message opened with no text yet, then text arriving.
    const opened = replay(upTo("message.started"));
    assert.equal(waitingForModel(opened.turns[0]), "");
    const streaming = replay(upTo("message.delta"));
    assert.equal(waitingForModel(streaming.turns[0]), null);
    const ended = replay(base);
    assert.equal(waitingForModel(ended.turns[0]), null);
  });
});

// -- the console -----------------------------------------------------------------------------

describe("the console", () => {
  test("a collection route acts in the chosen workspace; empty filters are left out", () => {
    const api = new Api();
    assert.equal(api.scoped("/v1/plugins"), "/v1/plugins");
    api.workspaceId = "wsp_A";
    assert.equal(
      api.scoped("/v1/sessions", { limit: 50, cursor: null, q: "", status: "idle", since: 0 }),
      "/v1/sessions?limit=50&status=idle&since=0&workspace_id=wsp_A",
    );
    // A workspace named by the caller wins; values are encoded.
    assert.equal(
      api.scoped("/v1/usage", { workspace_id: "wsp_B", q: "a&b" }),
      "/v1/usage?workspace_id=wsp_B&q=a%26b",
    );
  });

  test("what the caller may do comes from the server's people list, for the kept workspace", async () => {
    const people = {
      wsp_A: [{ principal_id: "prn_me", kind: "user", name: "me", permissions: ["read"] }],
      wsp_B: [
        { principal_id: "prn_me", kind: "user", name: "me", permissions: ["read", "act", "manage"] },
        { principal_id: "prn_bot", kind: "agent", name: "bot", permissions: ["read"] },
      ],
    };
    let serverAdmin = false;
    const fetchImpl = async (url) => {
      const body = url.endsWith("/v1/whoami")
        ? {
            principal_id: "prn_me",
            name: "me",
            server_admin: serverAdmin,
            workspaces: [
              { workspace_id: "wsp_A", name: "a", role: "viewer" },
              { workspace_id: "wsp_B", name: "b", role: "admin" },
            ],
          }
        : { items: people[/workspaces\/([^/]+)\/people/.exec(url)[1]] };
      return { ok: true, json: async () => body };
    };
    const kept = new Map([["nua.workspace_id", "wsp_B"]]);
    const storage = { getItem: (k) => kept.get(k) ?? null, setItem: (k, v) => kept.set(k, v) };
    const api = new Api({ fetchImpl });
    const ctx = await new Workspace(api, storage).load();
    assert.equal(ctx.id, "wsp_B");
    assert.equal(api.workspaceId, "wsp_B");
    assert.ok(ctx.can("manage") && ctx.can("act"));
    assert.equal(ctx.nameOf("prn_bot"), "bot (agent)");
    assert.equal(ctx.nameOf("prn_unknown"), "prn_unknown");
    // Being a server admin is the server's answer too (whoami), asked again on refresh.
    assert.equal(ctx.serverAdmin, false);
    serverAdmin = true;
    await ctx.refreshMe();
    assert.equal(ctx.serverAdmin, true);
    // A workspace no longer listed falls back to the first one: a viewer there.
    kept.set("nua.workspace_id", "wsp_gone");
    const first = await new Workspace(new Api({ fetchImpl }), storage).load();
    assert.equal(first.id, "wsp_A");
    assert.ok(first.can("read") && !first.can("act") && !first.can("manage"));
  });

  test("a digest is shown by its first 12 hex digits", () => {
    assert.equal(shortDigest(`sha256:${"ab".repeat(32)}`), "abababababab");
    assert.equal(shortDigest(null), "");
  });
});
