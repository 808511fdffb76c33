-- Blobs in the database, so every machine of a scale-out reads what any other wrote.
-- A blob's bytes are rows of `blob_chunks` keyed by an upload id while they arrive; one
-- short transaction then names them by their sha256 and inserts the `blobs` row, which is
-- what makes the blob visible. Chunks of an upload that never finished stay under its
-- upload id ('upload:' prefix) for the collector.
CREATE TABLE blobs (
    sha256 text PRIMARY KEY,
    size bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE blob_chunks (
    blob text NOT NULL,
    idx integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (blob, idx)
);
