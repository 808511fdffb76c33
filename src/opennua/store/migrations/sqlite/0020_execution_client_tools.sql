-- The tools the client that sent a turn's message runs itself (AG-UI frontend tools): a
-- JSON list of {name, description, parameters}, offered to the model on every attempt of
-- the execution (and again by an explicit retry). NULL: none.
ALTER TABLE executions ADD COLUMN client_tools TEXT;
