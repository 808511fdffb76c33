// The optimistic overlay (docs/architecture.md §3): what this client asked for and has not seen
// confirmed yet. It lives beside the confirmed state and never inside it — the confirmed
// state is only ever the reducer's fold of the server's log, so `stateToJson` of it equals
// what every other client holds. An entry is dropped when the authoritative action (the one
// carrying its intent_id) arrives, or rolled back when the server refuses the intent.
//
// Plain data and functions of it; no DOM, no network.

export class Overlay {
  constructor() {
    /** intent_id → {intent_id, text, if_busy, status: sending|accepted|unconfirmed, turn_id} */
    this.messages = new Map();
    /** request_id → {intent_id, request_id, option_id, payload, status, resolution};
     * status: sending|conflict (another answer won; `resolution` is the winner's) */
    this.answers = new Map();
    /**
     * request_id → the winning resolution, for requests this client answered second.
     * Not a fact about the request (the confirmed state has that, with `answered_by`), only
     * about our own click, so the card can say "another client answered first".
     */
    this.lost = new Map();
  }

  addMessage(intentId, text, ifBusy) {
    this.messages.set(intentId, {
      intent_id: intentId,
      text,
      if_busy: ifBusy,
      status: "sending",
      turn_id: null,
    });
  }

  /** 202: keep showing it (the action may still be on its way), and remember its turn. */
  messageAccepted(intentId, turnId) {
    const entry = this.messages.get(intentId);
    if (entry) Object.assign(entry, { status: "accepted", turn_id: turnId ?? null });
  }

  /** No answer after retries: the outcome is unknown; it may be re-sent with the same key. */
  messageUnconfirmed(intentId) {
    const entry = this.messages.get(intentId);
    if (entry) entry.status = "unconfirmed";
  }

  /** Roll back: remove and return the entry (so its text can go back into the composer). */
  dropMessage(intentId) {
    const entry = this.messages.get(intentId) ?? null;
    this.messages.delete(intentId);
    return entry;
  }

  addAnswer(requestId, intentId, { optionId = null, payload = null } = {}) {
    this.answers.set(requestId, {
      intent_id: intentId,
      request_id: requestId,
      option_id: optionId,
      payload,
      status: "sending",
      resolution: null,
    });
  }

  /** 409: someone else's answer won; show theirs until the confirmed action arrives. */
  answerLost(requestId, resolution) {
    const entry = this.answers.get(requestId);
    if (entry) Object.assign(entry, { status: "conflict", resolution: resolution ?? null });
    this.lost.set(requestId, resolution ?? null);
  }

  dropAnswer(requestId) {
    this.answers.delete(requestId);
  }

  /**
   * Fold one confirmed action into the overlay. Returns true when the overlay changed.
   * Any action carrying one of our intent_ids confirms that intent; a resolution carrying
   * somebody else's intent_id means our pending answer to that request lost.
   */
  confirm(action) {
    let changed = false;
    if (action.intent_id && this.messages.delete(action.intent_id)) changed = true;
    if (action.type === "input_request.resolved") {
      const requestId = action.data?.request_id;
      const entry = this.answers.get(requestId);
      if (entry) {
        if (action.intent_id !== entry.intent_id && !this.lost.has(requestId)) {
          this.lost.set(requestId, resolutionOf(action.data));
        }
        this.answers.delete(requestId);
        changed = true;
      }
    }
    return changed;
  }

  /**
   * Drop what the confirmed state already contains: actions folded into a snapshot never
   * pass through `confirm` (call after a snapshot, and when a 202 names the turn).
   */
  reconcile(state) {
    const turns = new Set(state.turns.map((turn) => turn.turn_id));
    for (const [intentId, entry] of this.messages) {
      if (entry.turn_id && turns.has(entry.turn_id)) this.messages.delete(intentId);
    }
    for (const requestId of this.answers.keys()) {
      if (resolvedIn(state, requestId)) this.answers.delete(requestId);
    }
  }

  pendingMessages() {
    return [...this.messages.values()];
  }

  answerFor(requestId) {
    return this.answers.get(requestId) ?? null;
  }

  lostTo(requestId) {
    return this.lost.has(requestId) ? { resolution: this.lost.get(requestId) } : null;
  }
}

function resolutionOf(data) {
  if (!data) return null;
  const { request_id, outcome, option_id, payload, answered_by } = data;
  return { request_id, outcome, option_id, payload, answered_by };
}

function resolvedIn(state, requestId) {
  for (const turn of state.turns) {
    const request = Object.prototype.hasOwnProperty.call(turn.input_requests, requestId)
      ? turn.input_requests[requestId]
      : undefined;
    if (request) return request.status !== "open";
  }
  return false;
}
