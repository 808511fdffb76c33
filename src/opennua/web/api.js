// The HTTP API as the UI uses it (docs/server.md). Authentication is the HttpOnly cookie
// that `/login?token=…` sets: this code never sees the token, so a script injected into the
// page could not read it, and EventSource (which cannot send headers) needs the cookie anyway.
//
// Every intent carries an intent_id that doubles as its Idempotency-Key, so a request whose
// answer was lost (the server restarted mid-request) is re-sent with the same key: the
// server then replays the stored outcome instead of acting twice.

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A ULID with a type prefix (docs/architecture.md §2): 48 bits of ms time, 80 random bits. */
export function newId(prefix, now = Date.now(), random = cryptoBytes) {
  let time = "";
  let ms = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[ms % 32] + time;
    ms = Math.floor(ms / 32);
  }
  // 80 bits = 16 base32 digits; take 5 bits at a time from 10 random bytes.
  const bytes = random(10);
  let bits = 0;
  let value = 0;
  let rest = "";
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xffff; // never more than 12 bits pending
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      rest += CROCKFORD[(value >> bits) & 31];
    }
  }
  return `${prefix}${time}${rest}`;
}

function cryptoBytes(n) {
  return crypto.getRandomValues(new Uint8Array(n));
}

/** This browser's client_id: chosen once and kept, so it is stable across reconnects. */
export function stableClientId(storage = globalThis.localStorage) {
  const key = "nua.client_id";
  let id = storage?.getItem(key);
  if (!id) {
    id = newId("cli_");
    storage?.setItem(key, id);
  }
  return id;
}

/** A problem response (RFC 9457) or a transport failure (`status` 0). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = problem?.code ?? (status === 0 ? "network" : "http_error");
    this.problem = problem ?? {};
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Api {
  constructor({ base = "", fetchImpl = (...a) => globalThis.fetch(...a), pause = sleep } = {}) {
    this.base = base;
    /** The workspace collection routes act in (`scoped`); null: the caller's first. */
    this.workspaceId = null;
    this.fetch = fetchImpl;
    this.pause = pause;
  }

  /** One request; problem JSON becomes an ApiError, a failed transport an ApiError(0). */
  async request(method, path, { body, key } = {}) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (key) headers["Idempotency-Key"] = key;
    let response;
    try {
      response = await this.fetch(this.base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, { detail: `the server did not answer (${error.message})` });
    }
    if (!response.ok) {
      let problem = null;
      try {
        problem = await response.json();
      } catch {
        problem = { detail: response.statusText };
      }
      throw new ApiError(response.status, problem);
    }
    return response;
  }

  async json(method, path, options) {
    return (await this.request(method, path, options)).json();
  }

  /**
   * An intent: re-sent with the same key while the outcome is unknown (no answer, or the
   * first copy still in flight). A definite answer — accepted or refused — is returned or
   * thrown at once. Gives up after `attempts` and throws the last transport error.
   */
  async intent(path, body, attempts = 8) {
    let wait = 250;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.json("POST", path, { body, key: body.intent_id });
      } catch (error) {
        const unknown = error.status === 0 || error.code === "request_in_flight";
        const transient = error.status === 502 || error.status === 503 || error.status === 504;
        if (!(unknown || transient) || attempt >= attempts) throw error;
      }
      await this.pause(wait);
      wait = Math.min(wait * 2, 3000);
    }
  }

  /**
   * `path` with `params` as its query (null/undefined/"" left out) and, for a route that
   * acts in "a workspace" (no object in its path), the workspace the console shows.
   */
  scoped(path, params = {}) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) {
      if (value !== null && value !== undefined && value !== "") query.set(name, String(value));
    }
    if (this.workspaceId && !query.has("workspace_id")) query.set("workspace_id", this.workspaceId);
    const text = query.toString();
    return text ? `${path}?${text}` : path;
  }

  /** GET a collection of the console's workspace. */
  list(path, params = {}) {
    return this.json("GET", this.scoped(path, params));
  }

  /** A page of sessions, newest first: `filters` as `GET /v1/sessions` takes them. */
  listSessions({ cursor = null, limit = 50, ...filters } = {}) {
    return this.list("/v1/sessions", { limit, cursor, ...filters });
  }

  /** One plugin version as the server reads it: its files, commands and hooks. */
  pluginVersion(name, version) {
    const path = `/v1/plugins/${encodeURIComponent(name)}/versions/${encodeURIComponent(version)}`;
    return this.json("GET", path);
  }

  /** `{seq, state}`: the canonical state as the server folded it. */
  snapshot(sessionId) {
    return this.json("GET", `/v1/sessions/${encodeURIComponent(sessionId)}`);
  }

  createSession({ title, clientId, intentId, deployment = null }) {
    const body = { title, client_id: clientId, intent_id: intentId };
    if (deployment) body.deployment = deployment;
    return this.intent(this.scoped("/v1/sessions"), body);
  }

  /** `{items: [{name, digest, spec, created_at}]}`: what a new session can run. */
  listDeployments() {
    return this.list("/v1/deployments");
  }

  listSchedules(runs = 5) {
    return this.list("/v1/schedules", { runs });
  }

  sendMessage(sessionId, { text, ifBusy, clientId, intentId }) {
    return this.intent(`${sessionPath(sessionId)}/messages`, {
      content: [{ type: "text", text }],
      if_busy: ifBusy,
      client_id: clientId,
      intent_id: intentId,
    });
  }

  answer(sessionId, requestId, { optionId, payload, clientId, intentId }) {
    const body = { client_id: clientId, intent_id: intentId };
    if (optionId != null) body.option_id = optionId;
    else body.payload = payload;
    const path = `${sessionPath(sessionId)}/input-requests/${encodeURIComponent(requestId)}/answer`;
    return this.intent(path, body);
  }

  cancel(sessionId, { turnId, clientId, intentId }) {
    return this.intent(`${sessionPath(sessionId)}/cancel`, {
      turn_id: turnId ?? null,
      client_id: clientId,
      intent_id: intentId,
    });
  }

  retry(sessionId, turnId, { clientId, intentId }) {
    const path = `${sessionPath(sessionId)}/turns/${encodeURIComponent(turnId)}/retry`;
    return this.intent(path, { client_id: clientId, intent_id: intentId });
  }

  eventsUrl(sessionId, after) {
    return `${this.base}${sessionPath(sessionId)}/events?after=${after}`;
  }

  /** A single-use, short-lived link to the artifact for this browser's principal. */
  async downloadLink(artifactId) {
    const path = `/v1/artifacts/${encodeURIComponent(artifactId)}/links`;
    const body = await this.json("POST", path);
    return `${this.base}${body.url}`;
  }

  /** Upload again an artifact whose upload failed; its state arrives in the stream. */
  retryArtifact(sessionId, artifactId) {
    const path = `${sessionPath(sessionId)}/artifacts/${encodeURIComponent(artifactId)}/retry`;
    return this.json("POST", path);
  }

  artifactUrl(artifactId) {
    return `${this.base}/v1/artifacts/${encodeURIComponent(artifactId)}/content`;
  }

  fileDiffUrl(sessionId, changeId) {
    return `${this.base}${sessionPath(sessionId)}/file-changes/${encodeURIComponent(changeId)}/diff`;
  }

  toolOutputUrl(sessionId, toolCallId) {
    const call = encodeURIComponent(toolCallId);
    return `${this.base}${sessionPath(sessionId)}/tool-calls/${call}/output`;
  }
}

function sessionPath(sessionId) {
  return `/v1/sessions/${encodeURIComponent(sessionId)}`;
}
