/*
 * A trace of a run for an independent reference implementation: per round
 * every random choice the engine made (the rows each worker sampled, the
 * shared coin, ec-lsvrg's refresh coins, the workers sampled under partial
 * participation, the coordinates rand-k chose and
 * the levels dithering rounded to, top-k's choice for near ties) and the
 * replicated vectors after the round. A reference fed these choices must
 * reproduce the iterates; the format is in docs/testing.md, "The reference
 * trace". Writing is the caller's I/O through a FILE; the steps stay pure.
 */
#ifndef ECOPT_TRACE_H
#define ECOPT_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "ecopt/algo.h"
#include "ecopt/job.h"
#include "ecopt/problem.h"

#define EC_TRACE_VERSION 1

/* The header: the job, the problem's constants and the resolved
 * parameters, and the shards' row ranges in the dataset's file order. */
int ec_trace_header(FILE *f, const ec_problem *pb, const ec_params *prm,
                    const ec_job *job);

/*
 * One exchange, written after the server reduce and before the model
 * applies it (the coin and the constants are those the round uses): the
 * round, the workers sampled (partial participation), then per worker
 * that took part its rows, its messages' random choices and its refresh
 * coin. ws and ups are the n workers and their uplinks.
 */
int ec_trace_exchange(FILE *f, const ec_model *m, const ec_worker *ws,
                      const ec_up *ups, uint32_t n);

/* EF21-P: the broadcast's choice, c_t's coordinates ("down 0 nnz idx..."),
 * written after the exchange when down carries c_t; nothing otherwise. */
int ec_trace_broadcast(FILE *f, const ec_down *down);

/* The replicated vectors after the model applied the exchange: x, and
 * y, z, w, u for L-Katyusha's family and ADIANA, u (= h or g) for DIANA,
 * EF21 and EControl; under EF21-P x is the proxy w_t and xs the
 * server's x_t. */
int ec_trace_state(FILE *f, const ec_model *m);

#endif
