/*
 * The optimisation problem of a job: the data split into worker shards, the
 * loss, the regularisers, and the constants every step size is built from.
 *
 *   P(x) = f(x) + lambda1 ||x||_1,   f = (1/n) sum_tau f_tau,
 *   f_tau(x) = w_tau (1/m_tau) sum_{i in tau} loss(b_i <a_i, x>)
 *              + (lambda2/2) ||x||^2
 *
 * with w_tau = n m_tau / N, so that f is the plain mean over all N samples
 * whatever the shard sizes, and P* does not depend on the split.
 */
#ifndef ECOPT_PROBLEM_H
#define ECOPT_PROBLEM_H

#include <stdint.h>
#include <string.h>

#include "ecopt/data.h"
#include "ecopt/error.h"
#include "ecopt/job.h"

/* The most Lanczos steps ec_problem_init takes for one lambda_max. */
#define EC_LANCZOS_MAX_STEPS 4000

typedef struct ec_shard {
    uint32_t begin, end;     /* rows [begin, end) of ec_problem.ds */
    uint32_t positives;      /* rows labelled +1 among them */
    double weight;           /* w_tau = n m_tau / N */
    double L_max;            /* max_i of w_tau c ||a_i||^2 + lambda2 */
    double L_bar;            /* smoothness of f_tau (Lanczos); EF21 only, else NaN */
} ec_shard;

typedef struct ec_problem {
    const ec_dataset *ds;    /* the rows in shard order (owned copy unless
                                the split is contiguous) */
    ec_dataset shuffled;     /* the permuted copy of a non-contiguous split */
    ec_split split;
    double split_alpha;      /* dirichlet's concentration; NaN otherwise */
    ec_loss loss;
    double lambda1, lambda2;
    uint32_t n;              /* workers */
    uint32_t d;
    ec_shard *shards;
    double lmax_data;        /* c lambda_max(A^T A) / N: L of the data term */
    uint32_t lmax_steps;     /* the Lanczos steps (products) lmax_data took */
    double lambda_max;       /* lambda_max(A^T A) of the rows in the problem's
                                order; NaN when lmax_data was given */
    int lmax_cached;         /* lambda_max came from ec_problem_init_lmax() */
    double L;                /* max over shards of L_max (per-sample constant) */
    double L_f;              /* lmax_data + lambda2 */
    double L_tilde;          /* sqrt(mean_tau L_bar^2): EF21 only, else NaN */
    double mu;               /* lambda2 */
    double kappa;            /* L_f / mu */
    double P0;               /* P(0) */
    double P_star;           /* min P, see ec_problem_solve() */
    double *x_star;          /* its minimiser (d entries) */
    double solve_bound;      /* estimated P(x_star) - P*, from the stopping rule */
    int solve_iters;
    int solve_products;      /* Newton-CG's Hessian products; else 0 */
    const char *solve_method;/* "newton", "newton-cg" or "fista-restart" */
    int solve_cached;        /* P* came from ec_problem_use_pstar() */
    /* The heterogeneity at the optimum, (1/n) sum_tau ||grad f_tau(x*)||^2
     * (docs/algorithms.md, "Splitting the rows"): set by the solve, NaN
     * until then and when P* was taken from ec_problem_use_pstar(). */
    double zeta_star;
} ec_problem;

/*
 * Builds the problem for job over ds (borrowed; it must outlive the
 * problem): shards, lambda2 (from lambda2_rel if set), and the constants,
 * but not P* (see ec_problem_solve). Checks the job against the data:
 * workers in 1..N, k in 1..d, batch in 1..min shard size, lambda2 > 0.
 */
int ec_problem_init(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                    ec_err *e);
void ec_problem_clear(ec_problem *pb);

/* The constants ec_problem_init computes with Lanczos runs, as another
 * process found them for the same data and job (an MPI worker rank gets
 * rank 0's): lmax_data and its steps, and each shard's L_bar (n entries;
 * read only where the algorithm needs L_tilde). */
typedef struct ec_problem_given {
    double lmax_data;
    uint32_t lmax_steps;
    const double *L_bar;
} ec_problem_given;

/* ec_problem_init, but with the Lanczos results given (NULL: computed);
 * the rest (shards, lambda2, L, L_f, mu, P(0)) is derived as there, so
 * the problem is the same bit for bit as where they were computed. */
int ec_problem_init_given(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                          const ec_problem_given *given, ec_err *e);

/*
 * ec_problem_init, but with lambda_max(A^T A) of ds in its own row order
 * and the Lanczos steps that found it, as an earlier ec_problem_init found
 * them for the same data (a cache). They are used, and lmax_cached set,
 * where the split keeps that order (contiguous) and lambda_max is finite
 * and >= 0; there the problem is the one ec_problem_init builds, bit for
 * bit, without the Lanczos run. Elsewhere lambda_max is computed as there.
 */
int ec_problem_init_lmax(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                         double lambda_max, uint32_t steps, ec_err *e);

/*
 * The order of the rows and the shards' sizes for job's split (split.c):
 * position i of the problem's rows holds row perm[i] of ds, and shard tau
 * takes the next sizes[tau] of them. perm has ds->n_rows entries, sizes
 * job->workers (at most ds->n_rows); a deterministic function of the
 * split, split_alpha, workers and seed, and every size is at least 1.
 */
int ec_split_rows(const ec_dataset *ds, const ec_job *job, uint32_t *perm,
                  uint32_t *sizes, ec_err *e);

/*
 * Computes P* and x* to relative accuracy 1e-12 or better.
 * lambda1 = 0 and d <= 4096: damped Newton on the full objective with a
 * Cholesky solve, stopped once the Newton decrement lambda^2/2 (which
 * bounds P - P* near the optimum) falls below 1e-13 |P|, then one more
 * step. Otherwise: proximal gradient with Nesterov momentum and gradient
 * restart, stopped when ||G||^2 / (2 mu) <= 1e-13 |P|, G the gradient
 * mapping. Fails with EC_ENUMERIC if the rule is not met.
 */
int ec_problem_solve(ec_problem *pb, ec_err *e);
/*
 * The same, but it gives up (x_star and P_star then mean nothing) when a
 * termination signal comes (ec_signal_caught(), after ec_signal_install():
 * EC_ECANCELLED) or when ec_clock() passes deadline (EC_ETIMEOUT; 0 is
 * no deadline). Both are looked at every few milliseconds of work, inside
 * the Hessian, the Cholesky factorisation and every gradient step.
 * ec_problem_init's power iterations likewise end with EC_ECANCELLED.
 */
int ec_problem_solve_until(ec_problem *pb, double deadline, ec_err *e);

/*
 * After ec_problem_use_pstar(): finds x* again, for zeta_star alone, where
 * the solve is Newton's (lambda1 = 0, d <= 4096: a fraction of a second
 * on the datasets here), keeping the cached P*; elsewhere (and when P*
 * was solved here) it does nothing and zeta_star stays as it is.
 */
int ec_problem_find_x_star(ec_problem *pb, double deadline, ec_err *e);

/*
 * Takes P* as found earlier for this same problem (same data, loss and
 * lambdas) instead of solving again; method is how it was found then
 * ("newton", "newton-cg" or "fista-restart"; other text becomes
 * "cached"). x_star is
 * left as it is: nothing in a run reads it. Fails with EC_EINVAL when
 * P_star is not finite or exceeds P(0), which no true P* can.
 */
int ec_problem_use_pstar(ec_problem *pb, double P_star, double bound,
                         const char *method, ec_err *e);

/* (1/n) sum_tau ||grad f_tau(x)||^2: the workers' disagreement at x. */
double ec_problem_heterogeneity(const ec_problem *pb, const double *x);

/* P(x), with compensated summation over the samples. */
double ec_problem_value(const ec_problem *pb, const double *x);
/* g = grad f(x) over all samples. */
void ec_problem_grad(const ec_problem *pb, const double *x, double *g);
/* Norm of the proximal gradient mapping L_f (x - prox(x - grad f(x)/L_f));
 * equal to ||grad f(x)|| when lambda1 = 0. tmp has d entries. */
double ec_problem_grad_norm(const ec_problem *pb, const double *x,
                            double *tmp, double *tmp2);

/* f_tau(x): one shard's function, its loss terms (with compensated
 * summation) and (lambda2/2)||x||^2, without lambda1's term. */
double ec_shard_value(const ec_problem *pb, uint32_t tau, const double *x);
/* g = grad f_tau(x): the full gradient of one shard's function. */
void ec_shard_grad(const ec_problem *pb, uint32_t tau, const double *x,
                   double *g);
/*
 * g = grad f_S(x) - grad f_S(w) for the rows S (nrows of them, absolute
 * row numbers inside shard tau), f_S the minibatch estimate of f_tau:
 * w_tau (1/|S|) sum_{i in S} loss terms + (lambda2/2)||.||^2.
 * w may be NULL, meaning g = grad f_S(x).
 */
void ec_shard_grad_rows(const ec_problem *pb, uint32_t tau,
                        const uint32_t *rows, uint32_t nrows,
                        const double *x, const double *w, double *g);
/*
 * v += alpha (g - lambda2 (x - w)), g as ec_shard_grad_rows gives it with
 * w: the rows' part of the difference alone, added where the rows have
 * entries. ECLK's workers add the dense lambda2 part, the same for every
 * worker, from the model (docs/algorithms.md, "ECLK").
 */
void ec_shard_grad_rows_sparse_add(const ec_problem *pb, uint32_t tau,
                                   const uint32_t *rows, uint32_t nrows,
                                   const double *x, const double *w, double alpha,
                                   double *v);
/* A hint, no effect on results: row i's entries will be read soon. */
void ec_problem_prefetch_row(const ec_problem *pb, uint32_t i);

/* prox of t lambda1 ||.||_1 (soft-thresholding), in place, d entries;
 * nothing when t <= 0. */
void ec_prox_l1(double *x, uint32_t d, double t);

/*
 * One entry of it, t > 0: v - t above t, v + t below -t, else 0 (a NaN
 * too). By masks on the bits, not selects: soft-thresholding's three
 * cases follow the data, and GCC compiles a select of doubles to a
 * branch, which mispredicted often enough to make the prox the costliest
 * pass of a large model's round. Both sums are made and the mask of the
 * true comparison keeps one (none keeps +0).
 */
static inline double ec_soft_threshold(double v, double t)
{
    double above = v - t, below = v + t, r;
    uint64_t a, b, keep;

    memcpy(&a, &above, sizeof a);
    memcpy(&b, &below, sizeof b);
    keep = (a & -(uint64_t)(v > t)) | (b & -(uint64_t)(v < -t));
    memcpy(&r, &keep, sizeof r);
    return r;
}

#endif
