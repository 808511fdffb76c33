// Who is signed in, the workspace the console shows, and what this caller may do there.
//
// Permissions come from the server (`GET /v1/workspaces/{id}/people` lists each member's
// `permissions`; `GET /v1/whoami` says whether the caller is a server admin), never from a
// copy of the role table: the console only hides what the server would refuse anyway, and
// the server still refuses a forged request.

const STORAGE_KEY = "nua.workspace_id";

export class Workspace {
  constructor(api, storage = globalThis.localStorage) {
    this.api = api;
    this.storage = storage;
    this.me = null; // GET /v1/whoami
    this.id = null;
    this.permissions = new Set();
    this.people = [];
  }

  /** Load whoami and the chosen workspace's members; throws the ApiError (e.g. 401). */
  async load() {
    await this.refreshMe();
    const ids = this.me.workspaces.map((w) => w.workspace_id);
    const kept = this.storage?.getItem(STORAGE_KEY);
    this.id = ids.includes(kept) ? kept : (ids[0] ?? null);
    this.api.workspaceId = this.id;
    await this.refreshPeople();
    return this;
  }

  async refreshMe() {
    this.me = await this.api.json("GET", "/v1/whoami");
  }

  async refreshPeople() {
    if (!this.id) return;
    const path = `/v1/workspaces/${encodeURIComponent(this.id)}/people`;
    this.people = (await this.api.json("GET", path)).items;
    const mine = this.people.find((p) => p.principal_id === this.me.principal_id);
    this.permissions = new Set(mine?.permissions ?? []);
  }

  choose(workspaceId) {
    this.storage?.setItem(STORAGE_KEY, workspaceId);
  }

  get name() {
    return this.me?.workspaces.find((w) => w.workspace_id === this.id)?.name ?? "";
  }

  get role() {
    return this.me?.workspaces.find((w) => w.workspace_id === this.id)?.role ?? null;
  }

  /** `read`, `act`, `manage` or `own` in this workspace. */
  can(permission) {
    return this.permissions.has(permission);
  }

  /** Manages the server's people (every principal, server admins, disabling users). */
  get serverAdmin() {
    return this.me?.server_admin === true;
  }

  /** A principal's name for display ("alice", "bot (agent)"), else its id. */
  nameOf(principalId) {
    const p = this.people.find((x) => x.principal_id === principalId);
    if (!p) return principalId ?? "—";
    return p.kind === "agent" ? `${p.name} (agent)` : (p.name ?? principalId);
  }
}
