// Entry point: routes (`#/` the list, `#/s/<session_id>` a session, and the console's
// pages: plugins, deployments, people, secrets, automation, usage, audit), the workspace
// and what the caller may do there, the connection indicator, the login screen, and the
// test hook `window.__nuaState()`.
//
// Hash routes keep the server out of client-side navigation: `/` serves one page, and a
// session link works from a bookmark or a reload.

import { Api, stableClientId } from "./api.js";
import { SessionController } from "./controller.js";
import { STATUS } from "./live.js";
import { h, fill } from "./views/dom.js";
import { Workspace } from "./context.js";
import { AuditPage } from "./views/audit.js";
import { AutomationPage } from "./views/automation.js";
import { DeploymentForm, DeploymentPage, DeploymentsPage } from "./views/deployments.js";
import { ListView } from "./views/list.js";
import { PeoplePage } from "./views/people.js";
import { PluginPage, PluginsPage } from "./views/plugins.js";
import { SecretsPage } from "./views/secrets.js";
import { SessionView } from "./views/session.js";
import { UsagePage } from "./views/usage.js";

const api = new Api();
const clientId = stableClientId();
const main = document.getElementById("main");
const connection = document.getElementById("connection");
const announcer = document.getElementById("announcer");
const whoami = document.getElementById("whoami");
const nav = document.getElementById("nav");
const ctx = new Workspace(api);
let loaded = null; // the promise of ctx.load()

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

/** Who is signed in, in which workspace (a choice when there are several), and a way out. */
function showWhoami() {
  const me = ctx.me;
  const choice =
    me.workspaces.length > 1
      ? h(
          "select",
          {
            id: "workspace",
            "aria-label": "Workspace",
            onchange: (event) => {
              ctx.choose(event.target.value);
              location.reload();
            },
          },
          ...me.workspaces.map((w) =>
            h("option", { value: w.workspace_id, selected: w.workspace_id === ctx.id }, `${w.name} (${w.role})`),
          ),
        )
      : h("span", { class: "roles" }, ` (${ctx.role} in ${ctx.name})`);
  fill(
    whoami,
    h("span", { class: "who", title: `${me.principal_id} · token ${me.token_id}` }, `Signed in as ${me.name}`),
    " ",
    choice,
    " ",
    h("a", { href: "/logout", class: "logout" }, "Log out"),
  );
  whoami.dataset.principalId = me.principal_id;
  whoami.dataset.role = ctx.role ?? "";
  whoami.hidden = false;
  // What the caller may not open is not offered (the server refuses it all the same).
  nav.querySelector('a[href="#/audit"]').hidden = !ctx.can("manage");
}

// hash → the page it opens; `match` holds the hash's captures.
const PAGES = [
  [/^#\/plugins$/, () => new PluginsPage(common())],
  [/^#\/plugins\/([^/]+)(?:\/([^/]+))?$/, (m) => new PluginPage({ ...common(), name: m[1], version: m[2] })],
  [/^#\/deployments$/, () => new DeploymentsPage(common())],
  [/^#\/deployments\/new$/, () => new DeploymentForm({ ...common(), name: null, navigate: go })],
  [/^#\/deployments\/([^/]+)\/edit$/, (m) => new DeploymentForm({ ...common(), name: m[1], navigate: go })],
  [/^#\/deployments\/([^/]+)$/, (m) => new DeploymentPage({ ...common(), name: m[1] })],
  [/^#\/people$/, () => new PeoplePage(common())],
  [/^#\/secrets$/, () => new SecretsPage(common())],
  [/^#\/(automation|schedules)$/, () => new AutomationPage(common())],
  [/^#\/usage$/, () => new UsagePage(common())],
  [/^#\/audit$/, () => new AuditPage(common())],
];

function common() {
  return { api, ctx, onFatal: showFatal };
}

function go(hash) {
  location.hash = hash;
}

async function route() {
  current?.stop();
  current = null;
  showConnection(STATUS.CLOSED);
  try {
    await (loaded ??= ctx.load().then(showWhoami));
  } catch (error) {
    loaded = null;
    whoami.hidden = true; // logged out: the login screen says what to do
    return showFatal(error);
  }
  for (const link of nav.querySelectorAll("a")) {
    const here = link.getAttribute("href");
    const on = here === "#/" ? /^#?\/?$|^#\/s\//.test(location.hash) : location.hash.startsWith(here);
    if (on) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const match = /^#\/s\/([^/]+)$/.exec(location.hash);
  if (match) return openSession(decodeURIComponent(match[1]));
  for (const [pattern, make] of PAGES) {
    const m = pattern.exec(location.hash);
    if (m) return openPage(make(m.map((x) => (x === undefined ? x : decodeURIComponent(x)))));
  }
  openList();
}

function openPage(page) {
  document.title = `${page.heading.textContent} · opennua`;
  fill(main, page.root);
  current = { stop: () => page.stop() };
  page.start();
}

function openList() {
  document.title = "Sessions · opennua";
  const view = new ListView({
    api,
    ctx,
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
    { readOnly: !ctx.can("act") },
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
