-- Action bodies are stored as SQLite stores them (store/_bodies.py): a BYTEA of one tag
-- byte and the JSON text deflated against a preset dictionary, about a third of the text.
-- The seq is the row's column; the body holds 0 in its place (nua_unit no longer splices
-- it into the text). Rows written before hold their JSON text's UTF-8 bytes, seq included,
-- and read as they were. The version also marks the nua_unit that takes packed bodies:
-- an older opennua refuses the database instead of sending it text.
ALTER TABLE actions ALTER COLUMN body TYPE BYTEA USING convert_to(body, 'UTF8');
