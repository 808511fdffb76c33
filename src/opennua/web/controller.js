// One open session: snapshot, live feed, resync, and the intents the user sends.
//
// The UI never decides a fact: it shows the reducer's fold of the server's log, and what the
// user asks for goes out as an intent whose outcome comes back as actions. The only things
// decided here are local — what to show while an intent is on its way (the overlay), and
// when to fetch a snapshot because the log we hold has a hole.

import { newId } from "./api.js";
import { STATUS, LiveFeed } from "./live.js";
import { SequenceGap, SessionStore } from "./store.js";

const PROBE_AFTER_FAILURES = 3;

export class SessionController {
  /**
   * @param {object} options
   * @param {import("./api.js").Api} options.api
   * @param {string} options.sessionId
   * @param {string} options.clientId
   * @param {() => void} options.onChange       something to redraw (called at most per frame)
   * @param {(status: string) => void} options.onStatus   live | reconnecting | resyncing …
   * @param {(notice: object) => void} options.onNotice    a refusal to tell the user about
   * @param {(error: object) => void} options.onFatal      logged out, or no such session
   */
  constructor({ api, sessionId, clientId, onChange, onStatus, onNotice, onFatal, schedule }) {
    this.api = api;
    this.sessionId = sessionId;
    this.clientId = clientId;
    this.store = new SessionStore(sessionId);
    this.onChange = onChange;
    this.onNotice = onNotice;
    this.onFatal = onFatal;
    this.schedule = schedule ?? ((fn) => requestAnimationFrame(fn));
    this.pending = false;
    this.closed = false;
    this.resyncing = null;
    this.feed = new LiveFeed({
      url: (after) => api.eventsUrl(sessionId, after),
      seq: () => this.store.state.seq,
      onAction: (action) => this.receive(action),
      onResync: () => this.resync(),
      onStatus,
      onFailure: (failures) => this.probe(failures),
      // Ask at once what is wrong (401: logged out; 404: no longer ours to read).
      onRevoked: () => this.probe(PROBE_AFTER_FAILURES),
    });
  }

  /** Load the snapshot, draw, then follow the log from the snapshot's seq. */
  open() {
    return this.resync(STATUS.CONNECTING);
  }

  close() {
    this.closed = true;
    this.feed.stop();
    this.feed.setStatus(STATUS.CLOSED);
  }

  /** Fetch a snapshot and follow from there: on first load, `resync` frames and holes. */
  resync(status = STATUS.RESYNCING) {
    if (this.resyncing) return this.resyncing;
    this.feed.stop();
    this.feed.setStatus(status);
    this.resyncing = (async () => {
      let wait = 250;
      while (!this.closed) {
        try {
          performance.mark("nua:snapshot-requested");
          const { seq, state } = await this.api.snapshot(this.sessionId);
          performance.mark("nua:snapshot-parsed");
          if (this.closed) return;
          this.store.load(seq, state);
          this.changed(true);
          this.feed.start();
          return;
        } catch (error) {
          if (this.fatal(error)) return;
          await new Promise((resolve) => setTimeout(resolve, wait));
          wait = Math.min(wait * 2, 3000);
        }
      }
    })().finally(() => {
      this.resyncing = null;
    });
    return this.resyncing;
  }

  receive(action) {
    if (this.resyncing) return; // the snapshot on its way supersedes it
    try {
      if (this.store.apply(action)) this.changed();
    } catch (error) {
      // A hole in the log, or an action this reducer cannot load (the state is unchanged
      // either way): the server's snapshot has it folded, so take that and go on from it.
      if (!(error instanceof SequenceGap)) console.error("action not applied", action, error);
      this.resync();
    }
  }

  /** Redraw at most once per frame however many actions arrive. */
  changed(now = false) {
    if (now) {
      this.pending = false;
      this.onChange();
      return;
    }
    if (this.pending) return;
    this.pending = true;
    this.schedule(() => {
      if (!this.pending || this.closed) return;
      this.pending = false;
      this.onChange();
    });
  }

  /** EventSource hides HTTP statuses: after a few failures, ask plainly what is wrong. */
  async probe(failures) {
    if (failures < PROBE_AFTER_FAILURES || failures % PROBE_AFTER_FAILURES !== 0) return;
    try {
      await this.api.snapshot(this.sessionId);
    } catch (error) {
      this.fatal(error);
    }
  }

  fatal(error) {
    if (error.status === 401 || error.status === 404) {
      this.close();
      this.onFatal(error);
      return true;
    }
    return false;
  }

  // -- intents --------------------------------------------------------------------------

  /** Send a message; shown at once from the overlay, rolled back if the server refuses. */
  async sendMessage(text, ifBusy, intentId = newId("int_")) {
    const overlay = this.store.overlay;
    if (!overlay.messages.has(intentId)) overlay.addMessage(intentId, text, ifBusy);
    else overlay.messages.get(intentId).status = "sending";
    this.changed(true);
    try {
      const ids = await this.api.sendMessage(this.sessionId, {
        text,
        ifBusy,
        clientId: this.clientId,
        intentId,
      });
      overlay.messageAccepted(intentId, ids.turn_id);
      overlay.reconcile(this.store.state);
      this.changed();
      return { ok: true };
    } catch (error) {
      if (error.status === 0) {
        // The outcome is unknown (it may have been accepted): keep it, offer to re-send
        // with the same intent_id, which the server deduplicates.
        overlay.messageUnconfirmed(intentId);
        this.changed();
        return { ok: false, unconfirmed: true };
      }
      const entry = overlay.dropMessage(intentId);
      this.changed();
      this.onNotice({ kind: "message", error, text: entry?.text ?? text });
      return { ok: false, error };
    }
  }

  discardMessage(intentId) {
    this.store.overlay.dropMessage(intentId);
    this.changed();
  }

  resendMessage(intentId) {
    const entry = this.store.overlay.messages.get(intentId);
    if (entry) return this.sendMessage(entry.text, entry.if_busy, intentId);
    return Promise.resolve({ ok: false });
  }

  /**
   * Answer an input request. A 409 means another client's answer won: that is the outcome
   * to show (with who answered), not an error.
   */
  async answer(requestId, { optionId = null, payload = null } = {}) {
    const overlay = this.store.overlay;
    const intentId = newId("int_");
    const turnId = this.store.turnOfRequest(requestId);
    overlay.addAnswer(requestId, intentId, { optionId, payload });
    this.store.touchTurn(turnId);
    this.changed(true);
    try {
      await this.api.answer(this.sessionId, requestId, {
        optionId,
        payload,
        clientId: this.clientId,
        intentId,
      });
      // Accepted: the overlay entry goes when `input_request.resolved` arrives.
    } catch (error) {
      if (error.code === "input_request_resolved") {
        overlay.answerLost(requestId, error.problem.resolution);
      } else {
        overlay.dropAnswer(requestId);
        this.onNotice({ kind: "answer", error });
      }
    }
    overlay.reconcile(this.store.state);
    this.store.touchTurn(turnId);
    this.changed();
  }

  async cancel(turnId = null) {
    try {
      await this.api.cancel(this.sessionId, {
        turnId,
        clientId: this.clientId,
        intentId: newId("int_"),
      });
    } catch (error) {
      this.onNotice({ kind: "cancel", error });
    }
  }

  /**
   * The slash commands of the session's plugin version (`/name args` in a message runs
   * one; the server expands it). Empty when there are none or they cannot be read.
   */
  async commands(plugin) {
    if (!plugin?.name || !plugin?.version) return [];
    try {
      return (await this.api.pluginVersion(plugin.name, plugin.version)).commands ?? [];
    } catch {
      return []; // a hint only: the server still says which commands exist on a refusal
    }
  }

  async retry(turnId) {
    try {
      await this.api.retry(this.sessionId, turnId, {
        clientId: this.clientId,
        intentId: newId("int_"),
      });
    } catch (error) {
      this.onNotice({ kind: "retry", error });
    }
  }
}
