// Entry point: routes (`#/` the list, `#/s/<session_id>` a session), the connection
// indicator, the login screen, and the test hook `window.__nuaState()`.
//
// Hash routes keep the server out of client-side navigation: `/` serves one page, and a
// session link works from a bookmark or a reload.

import { Api, stableClientId } from "./api.js";
import { SessionController } from "./controller.js";
import { STATUS } from "./live.js";
import { h, fill } from "./views/dom.js";
import { ListView } from "./views/list.js";
import { SchedulesView } from "./views/schedules.js";
import { SessionView } from "./views/session.js";

const api = new Api();
const clientId = stableClientId();
const main = document.getElementById("main");
const connection = document.getElementById("connection");
const announcer = document.getElementById("announcer");
const whoami = document.getElementById("whoami");

let current = null; // {stop()} of the page on screen

const CONNECTION_TEXT = {
  [STATUS.CONNECTING]: "Connecting…",
  [STATUS.LIVE]: "Live",
  [STATUS.RECONNECTING]: "Reconnecting…",
  [STATUS.RESYNCING]: "Resyncing…",
  [STATUS.CLOSED]: "",
};

function showConnection(status) {
  connection.dataset.status = status;
  connection.textContent = CONNECTION_TEXT[status] ?? status;
  connection.hidden = status === STATUS.CLOSED;
}

function announce(text) {
  // Re-set so the same sentence twice is announced twice.
  announcer.textContent = "";
  setTimeout(() => {
    announcer.textContent = text;
  }, 50);
}

/** Who is signed in: the principal the login cookie stands for, and a way out. */
async function showWhoami() {
  try {
    const me = await api.json("GET", "/v1/whoami");
    const roles = me.workspaces.map((w) => `${w.role} in ${w.name}`).join(", ");
    fill(
      whoami,
      h(
        "span",
        { class: "who", title: `${me.principal_id} · token ${me.token_id}` },
        `Signed in as ${me.name}`,
      ),
      roles ? h("span", { class: "roles" }, ` (${roles})`) : null,
      " ",
      h("a", { href: "/logout", class: "logout" }, "Log out"),
    );
    whoami.dataset.principalId = me.principal_id;
    whoami.hidden = false;
  } catch {
    whoami.hidden = true; // logged out: the login screen says what to do
  }
}

function route() {
  current?.stop();
  current = null;
  showConnection(STATUS.CLOSED);
  const match = /^#\/s\/([^/]+)$/.exec(location.hash);
  if (match) openSession(decodeURIComponent(match[1]));
  else if (location.hash === "#/schedules") openSchedules();
  else openList();
}

function openList() {
  document.title = "Sessions · opennua";
  const view = new ListView({
    api,
    clientId,
    navigate: (sessionId) => {
      location.hash = `#/s/${encodeURIComponent(sessionId)}`;
    },
    onFatal: showFatal,
  });
  fill(main, view.root);
  current = { stop: () => view.stop() };
  view.start();
}

function openSchedules() {
  document.title = "Schedules · opennua";
  const view = new SchedulesView({ api, onFatal: showFatal });
  fill(main, view.root);
  current = { stop: () => view.stop() };
  view.start();
}

function openSession(sessionId) {
  let view = null;
  const controller = new SessionController({
    api,
    sessionId,
    clientId,
    onChange: () => {
      const stick = nearBottom();
      view.render();
      if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
    },
    onStatus: showConnection,
    onNotice: (notice) => view.notice(notice),
    onFatal: showFatal,
  });
  view = new SessionView(
    controller,
    {
      artifact: (id) => api.artifactUrl(id),
      link: (id) => api.downloadLink(id),
      retryArtifact: (id) => api.retryArtifact(sessionId, id),
      toolOutput: (callId) => api.toolOutputUrl(sessionId, callId),
      fileDiff: (changeId) => api.fileDiffUrl(sessionId, changeId),
    },
    announce,
  );
  fill(main, view.root);
  current = { stop: () => controller.close(), controller };
  controller.open();
}

/** Keep following the end of the conversation, unless the reader scrolled up. */
function nearBottom() {
  const el = document.documentElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}

function showFatal(error) {
  current?.stop();
  current = null;
  showConnection(STATUS.CLOSED);
  if (error.status === 404) {
    fill(
      main,
      h(
        "section",
        { class: "fatal" },
        h("h1", null, "Session not found"),
        h("p", null, h("a", { href: "#/" }, "Back to the sessions")),
      ),
    );
    return;
  }
  fill(
    main,
    h(
      "section",
      { class: "login" },
      h("h1", null, "Log in"),
      h(
        "p",
        null,
        "Paste your own API token (",
        h("code", null, "nua user add"),
        " or ",
        h("code", null, "nua token create"),
        " printed it), or open the login link that ",
        h("code", null, "nua serve"),
        " printed for its owner.",
      ),
      h(
        "form",
        { action: "/login", method: "post" },
        h("label", { for: "login-token" }, "Your token"),
        h("input", {
          id: "login-token",
          name: "token",
          type: "password",
          autocomplete: "off",
          required: true,
        }),
        h("button", { type: "submit", class: "primary" }, "Log in"),
      ),
    ),
  );
}

// The confirmed state of the open session as canonical JSON — byte-identical to the
// server's `state_to_json` at the same seq. For tests and for debugging from the console.
window.__nuaState = () => current?.controller?.store.toJson() ?? null;
window.__nuaClientId = clientId;
document.documentElement.dataset.clientId = clientId;

window.addEventListener("hashchange", route);
route();
showWhoami();
