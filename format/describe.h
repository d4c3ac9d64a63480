/*
 * JSON views of what the engine resolved: the dataset, the problem
 * constants, the parameters, metric rows and the summary. The command line
 * prints them and the service stores and serves the same documents.
 * Non-finite numbers become null: NaN and Inf never reach JSON.
 */
#ifndef ECOPT_DESCRIBE_H
#define ECOPT_DESCRIBE_H

#include <jansson.h>
#include <sys/stat.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"

/*
 * The fields of a metric row, in ec_metric's order: the order of the CSV
 * columns, of describe_metric's keys, of the client's columns and of the
 * store's columns. X(name, kind, csv): kind COUNT (an unsigned integer,
 * written and read as a JSON integer) or REAL (a double, null when not
 * finite), csv the printf conversion of its CSV column ("": the shortest
 * text that reads back as the same double, describe_shortest). A new field is
 * one line here, its member in ec_metric, and a migration of the store's
 * table (migrations/). The record (describe_metric_record) writes the
 * same keys sorted; no name may sort between "type" and "v".
 */
#define DESCRIBE_METRIC_FIELDS(X)                                           \
    X(round, COUNT, "%llu")                                                 \
    X(bits_up, REAL, "")                                               \
    X(bits_down, REAL, "")                                             \
    X(paper_bits, REAL, "")                                            \
    X(P, REAL, "")                                                     \
    X(gap, REAL, "")                                                   \
    X(rel_gap, REAL, "")                                               \
    X(grad_norm, REAL, "")                                             \
    X(seconds, REAL, "%.6f")                                                \
    X(wire_up, REAL, "")                                               \
    X(wire_down, REAL, "")                                             \
    X(time, REAL, "%.6f")                                                   \
    X(grad_evals, REAL, "")                                            \
    X(restarts, COUNT, "%llu")

/* The field's name as a string and a comma: {DESCRIBE_METRIC_FIELDS(
   DESCRIBE_METRIC_NAME)} is the array of the names. */
#define DESCRIBE_METRIC_NAME(name, kind, csv) #name,
#define DESCRIBE_METRIC_ONE_(name, kind, csv) +1
/* How many fields a row has. */
#define DESCRIBE_METRIC_NFIELDS (0 DESCRIBE_METRIC_FIELDS(DESCRIBE_METRIC_ONE_))

json_t *describe_real(double v);            /* null when not finite */
/* The shortest of v's %.15g, %.16g and %.17g that strtod reads back as v
   (%.17g always does; %g drops trailing zeros, so 0.1 is "0.1" and 925.4
   "925.4"), as snprintf returns: the length, or >= len when cut. */
int describe_shortest(char *buf, size_t len, double v);
json_t *describe_dataset(const ec_dataset *ds);
json_t *describe_problem(const ec_problem *pb);
json_t *describe_params(const ec_params *prm);
/* The engine's tables as the API serves them: every algorithm with its
 * family and traits, every compressor with the count it takes and its
 * traits (a job may choose those with "contraction": true), the losses. */
json_t *describe_algorithms(void);
json_t *describe_compressors(void);
json_t *describe_losses(void);
/* The splits: [{name, summary}], from EC_SPLITS. */
json_t *describe_splits(void);
/* ECLK's rules (EC_ECLK_RULES): name, summary and whether it is the default. */
json_t *describe_eclk_rules(void);
json_t *describe_metric(const ec_metric *row);
/* ECLK's end record (api/report-format.md, "final"): {delta_eff,
 * inflation, delta_min, delta_max, updates, restarts, restart_rounds}. */
json_t *describe_eclk_report(const ec_eclk_report *r);
/* A file's identity, {dev, ino, size, mtime_ns, ctime_ns}: a file replaced
   by rename (as uploads are) has another inode, one changed in place
   another ctime. The P* hint carries it (api/report-format.md). */
json_t *describe_file_identity(const struct stat *st);
/*
 * The report channel's metric record (api/report-format.md) as text, keys
 * sorted, numbers exact: what json_dumps of describe_metric plus "type"
 * and "v" says, without building it. The length, or -1 when len is less
 * than DESCRIBE_RECORD_MAX.
 */
#define DESCRIBE_RECORD_MAX 640
/* What a record has and its document has not. */
#define DESCRIBE_MARKER ",\"type\":\"metric\",\"v\":1"
int describe_metric_record(const ec_metric *row, char *buf, size_t len);
/*
 * Reads a record of exactly the shape describe_metric_record writes (its
 * keys, in its order, without spaces; reals or null; the round an integer
 * up to INT64_MAX) into *row, and writes the row's document, the record
 * without "type" and "v", to doc (room for len + 1 bytes). Returns the
 * document's length, or -1 for any other text, which may still be a valid
 * record for a JSON parser to read. Whatever it accepts, Jansson reads as
 * the same numbers.
 */
int describe_metric_record_read(const char *s, size_t len, ec_metric *row, char *doc);
/* The same check and document without converting the reals: only the
   round is read. It accepts exactly what describe_metric_record_read does. */
int describe_metric_record_check(const char *s, size_t len, uint64_t *round, char *doc);
/* Whether a stored document has every field, so that it can be served as
   it is: at once for the shape describe_metric_record_read writes, by
   Jansson for another spelling. One stored before a field existed has
   not; it is read with describe_metric_doc_read (the missing field NaN)
   and formatted again, null there. */
int describe_metric_doc_check(const char *doc, size_t len);
/*
 * The row of a stored document: one describe_metric_record_read wrote is
 * read without a JSON parser; any other JSON object with an integer
 * "round" is read by Jansson, a missing or non-number value as NaN. 0, or
 * -1 when the text is neither.
 */
int describe_metric_doc_read(const char *doc, size_t len, ec_metric *row);
/* A row from a JSON object: its "round" a non-negative integer (else -1),
   each other value read as a number, NaN when missing or not a number. */
int describe_metric_from_json(json_t *o, ec_metric *row);
json_t *describe_summary(const ec_summary *sum);

/* The CSV header and one row, same columns as describe_metric. */
extern const char *const describe_csv_header;
/* The row's length, or -1 when it does not fit in len. */
int describe_csv_row(const ec_metric *row, char *buf, size_t len);

#endif
