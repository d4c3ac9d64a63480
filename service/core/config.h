/*
 * The service's configuration: defaults, then the environment (ECOPT_*),
 * then the command line. Everything else reads it, nothing else parses it.
 */
#ifndef ECOPT_CONFIG_H
#define ECOPT_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct config {
    char host[64];
    unsigned port;
    char db[PATH_MAX];
    char data_dir[PATH_MAX];
    char tokens_file[PATH_MAX];
    int auth_off;                 /* only when asked for explicitly */
    char exe[PATH_MAX];           /* the ecopt binary coordinators run */
    char state_dir[PATH_MAX];     /* job specs and coordinator logs */
    unsigned max_running;         /* jobs running at once */
    unsigned max_total_workers;   /* workers of all running jobs */
    unsigned max_workers_per_job;
    unsigned max_running_per_token; /* 0 before config_load; then by
                                       default max_running - 1 with tokens */
    unsigned max_queued_per_token;
    uint64_t max_rounds;          /* per job */
    double max_seconds;           /* per job */
    size_t max_body;
    size_t max_upload;            /* bytes of one dataset upload */
    unsigned threads;
    int access_log_off;
    unsigned conn_timeout;        /* idle seconds before MHD drops a client */
    unsigned max_connections;     /* open HTTP connections at once */
    unsigned max_streams_per_token; /* SSE streams and long-polls of one token */
    unsigned max_streams;         /* of all tokens; below max_connections (0
                                     before config_load: half of them) */
    int metrics_public;           /* /metrics without a token */
    char worker_user[64];         /* jobs run as this user; "" as the service */
    uint32_t worker_uid_first;    /* --worker-uids: each running job gets its */
    uint32_t worker_uid_count;    /* own uid of these; 0 count: not in use */
    unsigned job_nice;            /* a job's processes' nice value; 0 the
                                     server's own */
    unsigned worker_cpu_limit;    /* CPU seconds per worker; 0 none */
    int worker_cpu_set;           /* given, not the --max-seconds default */
    unsigned worker_mem_limit;    /* MB of address space per worker process;
                                     0: from the job's memory estimate */
    unsigned max_job_memory;      /* MB: the most a job's estimate may be */
    unsigned umask;               /* of every file and directory the service
                                     makes: 077 (0600, 0700) by default */
    unsigned header_timeout;      /* s from a connection's start (or its last
                                     reply) to its request's last header */
    unsigned body_timeout;        /* s from the last header to the body's end */
    unsigned upload_timeout;      /* the same for an upload's body */
    unsigned max_conn_per_addr;   /* open connections of one client address;
                                     0: no limit */
    char mpi_hostfile[PATH_MAX];  /* --mpi-hostfile: jobs may use backend mpi,
                                     its ranks placed by this hostfile; ""
                                     when MPI jobs are not enabled */
    /* The upload validator's limits (validator.h; 0: its defaults). */
    uint64_t upload_max_bytes;    /* decompressed */
    uint64_t upload_max_rows, upload_max_nnz, upload_max_d;
    unsigned upload_validator_mem;    /* MB */
    unsigned upload_validator_cpu;    /* s */
    /* The validation pool (validation.h; 0: its defaults). */
    unsigned upload_validators;   /* validator processes at once */
    unsigned upload_queue;        /* uploads in progress, all tokens */
    unsigned upload_per_token;    /* uploads in progress of one token */
    /* A token's share of the disk (catalog.h, "quotas"). */
    unsigned quota_dataset_names; /* names it holds */
    uint64_t quota_dataset_bytes; /* bytes of its datasets together */
    uint64_t quota_metric_rows;   /* metric rows of its jobs together */
    unsigned min_free_disk;       /* MB; below it new jobs and uploads get
                                     507; 0: no floor */
};

/* Defaults, then the environment (ECOPT_*), then argv; a sentence naming
 * the flag or variable and what it accepts on error. */
int config_load(struct config *cfg, int argc, char **argv, char *err,
                size_t errlen);
/* The settings with their variables, defaults and help, one or more lines
 * each, for `ecopt serve --help` (from config_table.h). */
void config_usage(FILE *out);

#endif
