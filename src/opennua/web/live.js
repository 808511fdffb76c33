// The live feed of one session: Server-Sent Events from `/v1/sessions/{sid}/events`.
//
// Why SSE and not the WebSocket: the UI only needs actions *out*; intents go as plain POSTs,
// whose status codes (409 with the winning resolution, 422, …) and Idempotency-Key replay
// are exactly what the UI shows and relies on. SSE rides the login cookie with no extra
// handshake rules.
//
// Why not EventSource's own reconnect: it resumes from the last *event id it saw*, while we
// must resume from the seq of the state we hold — after a resync that is the snapshot's seq,
// not an id the stream ever sent. So every failure closes the source and we reopen it with
// `?after=<our seq>` on a short backoff; the server treats `after` and Last-Event-ID alike.

export const STATUS = Object.freeze({
  CONNECTING: "connecting",
  LIVE: "live",
  RECONNECTING: "reconnecting",
  RESYNCING: "resyncing",
  CLOSED: "closed",
});

const FIRST_DELAY = 200;
const MAX_DELAY = 3000;

export class LiveFeed {
  /**
   * @param {object} options
   * @param {(after: number) => string} options.url        the events URL after a seq
   * @param {() => number} options.seq                      the seq of the state we hold
   * @param {(action: object) => void} options.onAction    each action, in order
   * @param {(seq: number) => void} options.onResync        the server dropped us: resnapshot
   * @param {(status: string) => void} options.onStatus
   * @param {(failures: number) => void} [options.onFailure] consecutive failures so far
   * @param {(why: object) => void} [options.onRevoked]     we may no longer read this session
   */
  constructor({
    url,
    seq,
    onAction,
    onResync,
    onStatus,
    onFailure,
    onRevoked,
    EventSourceImpl,
    timers,
  }) {
    this.url = url;
    this.seq = seq;
    this.onAction = onAction;
    this.onResync = onResync;
    this.onStatus = onStatus;
    this.onFailure = onFailure ?? (() => {});
    this.onRevoked = onRevoked ?? (() => {});
    this.EventSource = EventSourceImpl ?? globalThis.EventSource;
    this.timers = timers ?? globalThis;
    this.source = null;
    this.timer = null;
    this.failures = 0;
    this.status = STATUS.CLOSED;
  }

  /** Connect from the current seq (also used to reconnect after a resync). */
  start() {
    this.stop();
    this.setStatus(this.failures > 0 ? STATUS.RECONNECTING : STATUS.CONNECTING);
    const source = new this.EventSource(this.url(this.seq()));
    this.source = source;
    source.onopen = () => {
      if (this.source !== source) return;
      this.failures = 0;
      this.setStatus(STATUS.LIVE);
    };
    source.addEventListener("action", (event) => {
      if (this.source !== source) return;
      // Seen data is live data: the open event may lag behind the first catch-up action.
      if (this.status !== STATUS.LIVE) this.setStatus(STATUS.LIVE);
      this.onAction(JSON.parse(event.data));
    });
    source.addEventListener("resync", (event) => {
      if (this.source !== source) return;
      this.close();
      this.setStatus(STATUS.RESYNCING);
      let seq = null;
      try {
        seq = JSON.parse(event.data).seq ?? null;
      } catch {
        // A resync without a readable seq still means: fetch a snapshot.
      }
      this.onResync(seq);
    });
    source.addEventListener("revoked", (event) => {
      if (this.source !== source) return;
      // The server ended the stream: our login no longer reads this session (a revoked
      // token, a removed membership). Reconnecting would only be refused; stop and tell.
      this.stop();
      this.setStatus(STATUS.CLOSED);
      let why = {};
      try {
        why = JSON.parse(event.data) ?? {};
      } catch {
        // Whatever it says, the stream is over.
      }
      this.onRevoked(why);
    });
    source.onerror = () => {
      if (this.source !== source) return;
      this.close();
      this.failures += 1;
      this.setStatus(STATUS.RECONNECTING);
      this.onFailure(this.failures);
      const delay = Math.min(FIRST_DELAY * 2 ** (this.failures - 1), MAX_DELAY);
      this.timer = this.timers.setTimeout(() => this.start(), delay);
    };
  }

  /** Stop for good (until `start`). */
  stop() {
    this.close();
    if (this.timer !== null) {
      this.timers.clearTimeout(this.timer);
      this.timer = null;
    }
  }

  close() {
    if (this.source !== null) {
      this.source.close();
      this.source = null;
    }
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    this.onStatus(status);
  }
}
