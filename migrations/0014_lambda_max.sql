-- lambda_max(A^T A) of a dataset version in its file's row order, as the
-- coordinator's Lanczos run found it: a property of the bytes alone, so
-- keyed by their SHA-256. Jobs with the rows in that order take it from
-- here instead of running Lanczos again (api/report-format.md).
CREATE TABLE lambda_max (
    dataset_sha256 TEXT PRIMARY KEY,
    value          REAL NOT NULL,
    method         TEXT NOT NULL,
    steps          INTEGER NOT NULL,
    computed_at    INTEGER NOT NULL
) WITHOUT ROWID;
