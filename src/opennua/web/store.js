// One session as this client holds it: the confirmed state (reducer.js over the server's
// log, nothing else ever writes it), the optimistic overlay beside it, and what changed
// since the view last drew — so a streamed delta redraws one turn, not the whole page.
//
// No DOM and no network: the controller feeds it, the views read it.

import { SequenceGap, initialState, reduce, stateToJson } from "./reducer.js";
import { Overlay } from "./overlay.js";

export { SequenceGap };

export class SessionStore {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.state = initialState();
    this.loaded = false;
    this.overlay = new Overlay();
    /** Bumped by every snapshot load: all views built from an older state are stale. */
    this.generation = 0;
    /** turn_id → how many actions touched it since the last load (a cheap change token). */
    this.turnVersions = new Map();
    /** Input requests opened by live actions since the view last looked (focus targets). */
    this.opened = [];
  }

  /** Replace the confirmed state with a snapshot `{seq, state}` from the server. */
  load(seq, state) {
    if (!state || !Number.isInteger(state.seq) || !Array.isArray(state.turns)) {
      throw new TypeError("not a session snapshot");
    }
    if (state.seq !== seq) throw new TypeError(`snapshot seq ${seq} != state seq ${state.seq}`);
    this.state = state;
    this.loaded = true;
    this.generation += 1;
    this.turnVersions.clear();
    this.overlay.reconcile(state);
  }

  /**
   * Apply one action from the live feed. Duplicates are ignored by the reducer; a hole in
   * the log throws SequenceGap and leaves the state as it was (the caller resnapshots).
   */
  apply(action) {
    const before = this.state.seq;
    reduce(this.state, action);
    if (this.state.seq === before) return false;
    const turnId = action.turn_id;
    if (turnId) this.turnVersions.set(turnId, (this.turnVersions.get(turnId) ?? 0) + 1);
    if (action.type === "input_request.opened" && action.data?.request_id) {
      this.opened.push(action.data.request_id);
    }
    this.overlay.confirm(action);
    return true;
  }

  /** A token that changes whenever anything shown for this turn may have changed. */
  turnToken(turnId) {
    return `${this.generation}:${this.turnVersions.get(turnId) ?? 0}`;
  }

  /** Touch a turn so its view redraws (an overlay change concerning one of its cards). */
  touchTurn(turnId) {
    if (turnId) this.turnVersions.set(turnId, (this.turnVersions.get(turnId) ?? 0) + 1);
  }

  takeOpened() {
    const opened = this.opened;
    this.opened = [];
    return opened;
  }

  turnOfRequest(requestId) {
    for (const entry of this.state.open_input_requests) {
      if (entry.request_id === requestId) return entry.turn_id;
    }
    for (const turn of this.state.turns) {
      if (Object.prototype.hasOwnProperty.call(turn.input_requests, requestId)) return turn.turn_id;
    }
    return null;
  }

  /** The turn that is queued, running or waiting for input, newest first; else null. */
  activeTurn() {
    for (let i = this.state.turns.length - 1; i >= 0; i--) {
      if (this.state.turns[i].state !== "ended") return this.state.turns[i];
    }
    return null;
  }

  /** The confirmed state as canonical JSON: byte-identical to the server's `state_to_json`. */
  toJson() {
    return stateToJson(this.state);
  }
}
