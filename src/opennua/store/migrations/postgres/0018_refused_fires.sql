-- A fire the scheduler could not start (its deployment cannot be resolved, its prompt
-- does not render, the Host refused it) is a run too, with its reason (issue 35): it has
-- no session, turn or execution, and `refused_code` / `refused_detail` say why.
ALTER TABLE schedule_fires ALTER COLUMN session_id DROP NOT NULL;
ALTER TABLE schedule_fires ALTER COLUMN turn_id DROP NOT NULL;
ALTER TABLE schedule_fires ALTER COLUMN execution_id DROP NOT NULL;
ALTER TABLE schedule_fires ADD COLUMN refused_code TEXT;
ALTER TABLE schedule_fires ADD COLUMN refused_detail TEXT;
