-- People (issue 29): server admins, tokens revoked for one workspace, and agent-principal
-- names that belong to their workspace.
--
-- A server admin creates and disables users and sees every principal; `admin_since` says
-- since when (NULL: not one). The server makes the default workspace's first owner one
-- when none exists yet (opennua.auth bootstrap), so an upgraded data directory keeps a
-- person who may manage people.
ALTER TABLE principals ADD COLUMN admin_since DOUBLE PRECISION;

-- A workspace owner or admin revokes a member's token for that workspace's work only: the
-- token opens nothing there any more (and the executions it started there end `revoked`),
-- while the person's other workspaces are none of that admin's business.
CREATE TABLE token_workspace_revocations (
    token_id     TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    revoked_at   DOUBLE PRECISION NOT NULL,
    revoked_by   TEXT,
    PRIMARY KEY (token_id, workspace_id)
);

-- Users are server-wide, so their names are; an agent principal's name is its
-- workspace's, so that a name taken in one workspace says nothing about the others.
DROP INDEX principals_by_name;
CREATE UNIQUE INDEX principals_by_name ON principals (kind, COALESCE(workspace_id, ''), name);
