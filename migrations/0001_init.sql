-- The first schema of the service's database: jobs and their labels and
-- metric rows, experiments, datasets and the P* cache. Applied once, in a
-- transaction, by store_open; later changes go in new files, never here.

CREATE TABLE experiments (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,        -- public: 'x_' + 16 hex digits
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL             -- unix ms
);

-- seq is the insertion order, the key of list cursors: AUTOINCREMENT so
-- that it never goes back, even after the newest job is deleted.
CREATE TABLE jobs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,     -- public: 'j_' + 16 hex digits
    owner         TEXT NOT NULL,
    state         TEXT NOT NULL DEFAULT 'queued' CHECK (state IN
                      ('queued', 'running', 'succeeded', 'failed',
                       'cancelled', 'interrupted')),
    reason        TEXT,
    spec          TEXT NOT NULL,            -- canonical JSON
    name          TEXT NOT NULL DEFAULT '',
    labels        TEXT NOT NULL DEFAULT '{}'
                      CHECK (json_valid(labels)
                             AND json_type(labels) = 'object'),
    algorithm     TEXT NOT NULL,
    compressor    TEXT NOT NULL,
    dataset       TEXT NOT NULL,
    backend       TEXT NOT NULL,
    workers       INTEGER NOT NULL CHECK (workers >= 1),
    created_at    INTEGER NOT NULL,         -- unix ms, like every time here
    started_at    INTEGER,
    finished_at   INTEGER,
    pid           INTEGER,
    problem       TEXT,                     -- JSON of the start record
    params        TEXT,                     -- JSON of the start record
    round         INTEGER,                  -- progress
    rel_gap       REAL,
    bits_up       REAL,
    updated_at    INTEGER,
    idem_key      TEXT,                     -- Idempotency-Key
    idem_hash     TEXT,                     -- what the key was used for
    experiment_id TEXT REFERENCES experiments (id),
    CHECK ((idem_key IS NULL) = (idem_hash IS NULL))
);

CREATE UNIQUE INDEX jobs_idem ON jobs (owner, idem_key)
    WHERE idem_key IS NOT NULL;
-- A token's own list and the scheduler's queue walk these in seq order.
CREATE INDEX jobs_owner ON jobs (owner, seq);
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_experiment ON jobs (experiment_id, seq)
    WHERE experiment_id IS NOT NULL;

-- The labels again, one row each, so that the list's label filter is a
-- key lookup per job (the list walks jobs in seq order) instead of
-- parsing each job's JSON.
CREATE TABLE job_labels (
    job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (job_seq, key)
) WITHOUT ROWID;

-- One row per evaluation point, clustered by (job, round) without a rowid
-- so that a job's rows are contiguous on disk. Keyed by the job's integer
-- seq rather than its text id: a fifth smaller (15.5 MB against 18.9 MB
-- for 200000 rows), which matters at hundreds of thousands of rows a job.
-- Non-finite numbers are NULL.
CREATE TABLE metrics (
    job_seq    INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
    round      INTEGER NOT NULL CHECK (round >= 0),
    bits_up    REAL,
    bits_down  REAL,
    paper_bits REAL,
    P          REAL,
    gap        REAL,
    rel_gap    REAL,
    grad_norm  REAL,
    seconds    REAL,
    wire_up    REAL,
    wire_down  REAL,
    PRIMARY KEY (job_seq, round)
) WITHOUT ROWID;

-- The lambdas are "%.17g" text: exact, and equal doubles give equal keys.
CREATE TABLE pstar (
    dataset_sha256 TEXT NOT NULL,
    loss           TEXT NOT NULL,
    lambda1        TEXT NOT NULL,
    lambda2        TEXT NOT NULL,
    p_star         REAL NOT NULL,
    method         TEXT NOT NULL,
    bound          REAL,
    computed_at    INTEGER NOT NULL,
    PRIMARY KEY (dataset_sha256, loss, lambda1, lambda2)
) WITHOUT ROWID;

CREATE TABLE datasets (
    name        TEXT PRIMARY KEY,
    sha256      TEXT NOT NULL,
    rows        INTEGER NOT NULL,
    d           INTEGER NOT NULL,
    nnz         INTEGER NOT NULL,
    labels      TEXT NOT NULL,              -- JSON array [neg, pos]
    bytes       INTEGER NOT NULL,
    uploaded_at INTEGER NOT NULL
);
