-- SQLite only: the dedupe index leads with action_id instead of session_id.
--
-- Keyed (session_id, action_id), a batch of appends to N sessions dirtied N leaf pages
-- of this index (one per session's range) on top of the N of the primary key; every
-- dirty page is written to the WAL and fsynced at COMMIT, so that doubled the bytes per
-- group commit. Action ids are ULIDs, ordered by time: keyed (action_id, session_id),
-- new entries land near the right edge whatever their session, a couple of pages per
-- batch. Lookups are by both columns (equality), so either order serves them.
DROP INDEX actions_by_id;
CREATE UNIQUE INDEX actions_by_action_id ON actions (action_id, session_id);
