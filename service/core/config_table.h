/*
 * The service's settings, one row each. The option parser, the
 * environment, the range checks, the defaults and `ecopt serve --help` all
 * come from this table (config.c), and a test holds the table of
 * docs/configuration.md, "Settings" to it: a new setting is a row here,
 * its field in struct config and its row there.
 *
 * X(FLAG, ENV, KIND, FIELD, DEFAULT, LO, HI, META, HELP)
 *   FLAG     the long option, without "--"
 *   ENV      its environment variable, or NULL
 *   KIND     how the value is read (enum config_kind in config.c):
 *            UINT, U64, SIZE (integers in LO..HI into unsigned, uint64_t,
 *            size_t), SECONDS (an integer in LO..HI into a double), MB0 (0,
 *            or an integer in LO..HI), CPU (UINT that also marks the field
 *            given), PATH (a path that fits FIELD), USER (a user name),
 *            LISTEN (HOST:PORT into host and port), UIDS (FIRST-LAST), OFF
 *            (on|off, FIELD = off), SWITCH (a flag without value; its
 *            variable is on|off|1|0), OCTAL (an octal number up to HI)
 *   FIELD    the member of struct config it sets
 *   DEFAULT  the value applied before the environment and the flags, read
 *            by the same rules; NULL: FIELD stays 0 (HELP says what that
 *            means)
 *   LO, HI   the range of the integer kinds (0, 0 for the others)
 *   META     the value's name in the usage text ("" for a SWITCH)
 *   HELP     what it is, for the usage text (the default is added there)
 */
#ifndef ECOPT_CONFIG_TABLE_H
#define ECOPT_CONFIG_TABLE_H

#define CONFIG_SETTINGS(X)                                                    \
    X("listen", "ECOPT_LISTEN", LISTEN, host, "127.0.0.1:8080", 0, 0,         \
      "HOST:PORT", "the address to serve on")                                 \
    X("db", "ECOPT_DB", PATH, db, "ecopt.db", 0, 0, "FILE",                   \
      "the SQLite file")                                                      \
    X("data-dir", "ECOPT_DATA_DIR", PATH, data_dir, "datasets", 0, 0, "DIR",  \
      "the datasets")                                                         \
    X("tokens-file", "ECOPT_TOKENS_FILE", PATH, tokens_file, NULL, 0, 0,      \
      "FILE", "NAME:SECRET[:admin] lines; required unless --auth off")        \
    X("auth", "ECOPT_AUTH", OFF, auth_off, "on", 0, 0, "on|off",              \
      "off must be asked for explicitly")                                     \
    X("max-running", "ECOPT_MAX_RUNNING", UINT, max_running, "2", 1, 1024,    \
      "N", "jobs at once")                                                    \
    X("max-total-workers", "ECOPT_MAX_TOTAL_WORKERS", UINT,                   \
      max_total_workers, "64", 1, 1ull << 20, "N",                            \
      "worker processes of all running jobs")                                 \
    X("max-workers-per-job", "ECOPT_MAX_WORKERS_PER_JOB", UINT,               \
      max_workers_per_job, "64", 1, 4096, "N", "workers of one job")          \
    X("max-running-per-token", "ECOPT_MAX_RUNNING_PER_TOKEN", UINT,           \
      max_running_per_token, NULL, 1, 1024, "N",                              \
      "one token's jobs at once, default --max-running less one with tokens "  \
      "(a slot open to others)")                                              \
    X("max-queued-per-token", "ECOPT_MAX_QUEUED_PER_TOKEN", UINT,             \
      max_queued_per_token, "100", 1, 1000000, "N",                           \
      "one token's jobs waiting")                                             \
    X("max-rounds", "ECOPT_MAX_ROUNDS", U64, max_rounds, "10000000", 1,       \
      100000000, "N", "rounds per job")                                       \
    X("max-seconds", "ECOPT_MAX_SECONDS", SECONDS, max_seconds, "86400", 1,   \
      30ull * 24 * 3600, "N", "seconds per job")                              \
    X("max-body", "ECOPT_MAX_BODY", SIZE, max_body, "1048576", 1024,          \
      1ull << 30, "BYTES", "a request body")                                  \
    X("max-upload", "ECOPT_MAX_UPLOAD", SIZE, max_upload, "268435456", 1024,  \
      1ull << 40, "BYTES",                                                    \
      "one dataset upload as sent (gzip counts compressed)")                  \
    X("upload-max-bytes", "ECOPT_UPLOAD_MAX_BYTES", U64, upload_max_bytes,    \
      NULL, 1, 1ull << 50, "BYTES",                                           \
      "the upload validator's limit, decompressed, default 17179869184 "      \
      "(16 GiB)")                                                             \
    X("upload-max-rows", "ECOPT_UPLOAD_MAX_ROWS", U64, upload_max_rows, NULL, \
      1, UINT32_MAX, "N", "the upload validator's limit, default 100000000")  \
    X("upload-max-nnz", "ECOPT_UPLOAD_MAX_NNZ", U64, upload_max_nnz, NULL, 1, \
      1ull << 40, "N", "the upload validator's limit, default 500000000")     \
    X("upload-max-d", "ECOPT_UPLOAD_MAX_D", U64, upload_max_d, NULL, 1,       \
      UINT32_MAX, "N", "the upload validator's limit, default 16777216")      \
    X("upload-validator-mem", "ECOPT_UPLOAD_VALIDATOR_MEM", UINT,             \
      upload_validator_mem, NULL, 64, 1u << 30, "MB",                         \
      "the upload validator's address space, default 256")                    \
    X("upload-validator-cpu", "ECOPT_UPLOAD_VALIDATOR_CPU", UINT,             \
      upload_validator_cpu, NULL, 1, 100000000, "SEC",                        \
      "the upload validator's CPU seconds, default 900")                      \
    X("upload-validators", "ECOPT_UPLOAD_VALIDATORS", UINT,                   \
      upload_validators, "2", 1, 256, "N",                                    \
      "validator processes at once (the rest wait)")                          \
    X("upload-queue", "ECOPT_UPLOAD_QUEUE", UINT, upload_queue, "8", 1,       \
      100000, "N", "uploads in progress at once (more: 503)")                 \
    X("upload-per-token", "ECOPT_UPLOAD_PER_TOKEN", UINT, upload_per_token,   \
      "2", 1, 100000, "N", "uploads in progress of one token (more: 429)")    \
    X("threads", "ECOPT_THREADS", UINT, threads, NULL, 1, 256, "N",           \
      "HTTP threads, default one a CPU the server may run on, at most 4")    \
    X("state-dir", "ECOPT_STATE_DIR", PATH, state_dir, NULL, 0, 0, "DIR",     \
      "job specs and logs, default DB.jobs")                                  \
    X("conn-timeout", "ECOPT_CONN_TIMEOUT", UINT, conn_timeout, "30", 1,      \
      3600, "SEC", "idle seconds before a client is dropped")                 \
    X("max-connections", "ECOPT_MAX_CONNECTIONS", UINT, max_connections,      \
      "1000", 16, 1000000, "N", "open HTTP connections")                      \
    X("header-timeout", "ECOPT_HEADER_TIMEOUT", UINT, header_timeout, "20",  \
      1, 3600, "SEC",                                                         \
      "from a connection's start or last reply to its request's last header") \
    X("body-timeout", "ECOPT_BODY_TIMEOUT", UINT, body_timeout, "60", 1,      \
      86400, "SEC", "from the last header to the body's last byte")           \
    X("upload-timeout", "ECOPT_UPLOAD_TIMEOUT", UINT, upload_timeout, "3600", \
      1, 7 * 86400, "SEC", "the same for a dataset upload")                   \
    X("max-connections-per-address", "ECOPT_MAX_CONNECTIONS_PER_ADDRESS",     \
      UINT, max_conn_per_addr, "256", 0, 1000000, "N",                        \
      "open connections of one client address (0: no limit; raise it behind " \
      "a proxy)")                                                             \
    X("max-streams-per-token", "ECOPT_MAX_STREAMS_PER_TOKEN", UINT,           \
      max_streams_per_token, "16", 1, 100000, "N",                            \
      "event streams and long-polls of one token")                            \
    X("max-streams", "ECOPT_MAX_STREAMS", UINT, max_streams, NULL, 1,         \
      1000000, "N",                                                           \
      "those of all tokens, below --max-connections; default half of it")     \
    X("metrics-public", "ECOPT_METRICS_PUBLIC", SWITCH, metrics_public, NULL, \
      0, 0, "", "/metrics without a token (default: a token is needed)")      \
    X("worker-user", "ECOPT_WORKER_USER", USER, worker_user, NULL, 0, 0,      \
      "NAME", "jobs run as this user; default nobody when run as root")       \
    X("worker-uids", "ECOPT_WORKER_UIDS", UIDS, worker_uid_first, NULL, 0, 0, \
      "FIRST-LAST",                                                           \
      "a uid of its own for each running job (root; uids no account uses); "  \
      "instead of --worker-user")                                             \
    X("job-nice", "ECOPT_JOB_NICE", UINT, job_nice, "10", 0, 19, "N",         \
      "nice value of every process of a job, so that the HTTP threads come "  \
      "first (0: the server's own)")                                          \
    X("worker-cpu-limit", "ECOPT_WORKER_CPU_LIMIT", CPU, worker_cpu_limit,    \
      NULL, 0, 100000000, "SEC",                                              \
      "CPU seconds per worker, default --max-seconds (0: none)")              \
    X("worker-mem-limit", "ECOPT_WORKER_MEM_LIMIT", MB0, worker_mem_limit,    \
      "0", 16, 1u << 30, "MB",                                                \
      "address space per worker process (0: from the job's memory "           \
      "estimate)")                                                            \
    X("max-job-memory", "ECOPT_MAX_JOB_MEMORY", UINT, max_job_memory,         \
      "8192", 64, 1u << 30, "MB", "the largest memory estimate a job may have")\
    X("mpi-hostfile", "ECOPT_MPI_HOSTFILE", PATH, mpi_hostfile, NULL, 0, 0,   \
      "FILE",                                                                 \
      "jobs may ask for backend mpi, their ranks placed by this hostfile "    \
      "(needs ecopt-mpi and mpirun; mpirun's arguments: ECOPT_MPIRUN_ARGS)")  \
    X("quota-dataset-names", "ECOPT_QUOTA_DATASET_NAMES", UINT,               \
      quota_dataset_names, "100", 1, 1000000, "N",                            \
      "dataset names one token may hold (more: 413)")                         \
    X("quota-dataset-bytes", "ECOPT_QUOTA_DATASET_BYTES", U64,                \
      quota_dataset_bytes, "4294967296", 1024, 1ull << 50, "BYTES",           \
      "bytes of one token's datasets together (more: 413)")                   \
    X("quota-metric-rows", "ECOPT_QUOTA_METRIC_ROWS", U64, quota_metric_rows, \
      "5000000", 1, 1ull << 40, "N",                                          \
      "metric rows of one token's jobs together (then its job stops: quota)") \
    X("min-free-disk", "ECOPT_MIN_FREE_DISK", UINT, min_free_disk, "256", 0,  \
      1u << 30, "MB",                                                         \
      "below this free, new jobs and uploads get 507 (0: no floor)")          \
    X("umask", "ECOPT_UMASK", OCTAL, umask, "077", 0, 0777, "MASK",          \
      "octal, of every file and directory the service makes (database, "      \
      "logs, uploads): 077 gives 0600 and 0700")                              \
    X("quiet", NULL, SWITCH, access_log_off, NULL, 0, 0, "", "no access log")

#endif
