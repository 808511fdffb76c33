-- The registry belongs to workspaces (docs/plugins.md, "Who sees what"): a plugin version
-- records the workspace it was published in, its publisher and whether the workspace or
-- only the publisher sees it; a deployment configuration, the workspace it was saved in.
-- NULL is server-wide: the built-in plugin and `default` deployment, and everything
-- published before this version (it stays visible as it was).
ALTER TABLE plugin_versions ADD COLUMN workspace_id TEXT;
ALTER TABLE plugin_versions ADD COLUMN publisher_id TEXT;
ALTER TABLE plugin_versions ADD COLUMN visibility TEXT NOT NULL DEFAULT 'workspace'
    CHECK (visibility IN ('workspace', 'private'));
ALTER TABLE deployment_configs ADD COLUMN workspace_id TEXT;
