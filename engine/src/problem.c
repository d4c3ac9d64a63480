/*
 * Losses, gradients and the problem constants (L, L_f, kappa), and the
 * high-accuracy solve for P* that every reported gap is measured against.
 */
#include "ecopt/problem.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/clock.h"
#include "ecopt/rng.h"
#include "ecopt/run.h"

/* Curvature bound of the loss: loss'' <= c (1/4 logistic, 1 squared). */
static double loss_curv(ec_loss l)
{
    return l == EC_LOSS_LOGISTIC ? 0.25 : 1.0;
}

static double loss_value(ec_loss l, double t)
{
    if (l == EC_LOSS_SQUARED)
        return 0.5 * (t - 1.0) * (t - 1.0);
    /* log(1 + exp(-t)) without overflow for either sign of t. */
    return t >= 0 ? log1p(exp(-t)) : -t + log1p(exp(t));
}

/* The logistic loss's derivative and curvature at t from e = exp(-|t|):
 * -1 / (1 + exp(t)) written to stay finite for large |t|, and
 * exp(t) / (1 + exp(t))^2. */
static double logistic_deriv(double t, double e)
{
    return t >= 0 ? -e / (1.0 + e) : -1.0 / (1.0 + e);
}

static double logistic_second(double e)
{
    return e / ((1.0 + e) * (1.0 + e));
}

static double loss_deriv(ec_loss l, double t)
{
    if (l == EC_LOSS_SQUARED)
        return t - 1.0;
    return logistic_deriv(t, exp(-fabs(t)));
}

static double loss_second(ec_loss l, double t)
{
    if (l == EC_LOSS_SQUARED)
        return 1.0;
    return logistic_second(exp(-fabs(t)));
}

/* loss_deriv and loss_second of one t from one exp(-|t|): the same two
 * values, for half the exponentials. */
static double loss_deriv_second(ec_loss l, double t, double *second)
{
    double e;

    if (l == EC_LOSS_SQUARED) {
        *second = 1.0;
        return t - 1.0;
    }
    e = exp(-fabs(t));
    *second = logistic_second(e);
    return logistic_deriv(t, e);
}

static double row_dot(const ec_dataset *ds, uint32_t i, const double *x)
{
    double s = 0.0;

    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++)
        s += ds->val[j] * x[ds->col[j]];
    return s;
}

/*
 * How many nonzeros ahead row_dot_ahead asks for the entries of x and w:
 * the passes of the set-up (Lanczos, Newton-CG) read x and write w at
 * random columns, and their misses, not the matrix, set their speed
 * (bench/results/setup.md: the Lanczos run 1.2x to 2x faster on the
 * generated files).
 */
#define ROW_AHEAD 64
#if defined(__GNUC__)
#define prefetch_read(p) __builtin_prefetch((p), 0)
#define prefetch_write(p) __builtin_prefetch((p), 1)
#else
#define prefetch_read(p) ((void)(p))
#define prefetch_write(p) ((void)(p))
#endif

/*
 * row_dot that also prefetches x and w (NULL: none) at the columns
 * ROW_AHEAD nonzeros further on, w's entry for column c at w[wstride c],
 * for a pass that then adds to w along the same rows; nnz_end (the
 * dataset's nonzeros) bounds the look-ahead. The same terms in the same
 * order as row_dot: the same result to the bit.
 */
static double row_dot_ahead(const ec_dataset *ds, uint32_t i, const double *x,
                            const double *w, size_t wstride, uint64_t nnz_end)
{
    double s = 0.0;

    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++) {
        if (j + ROW_AHEAD < nnz_end) {
            uint32_t c = ds->col[j + ROW_AHEAD];

            prefetch_read(&x[c]);
            if (w)
                prefetch_write(&w[wstride * c]);
        }
        s += ds->val[j] * x[ds->col[j]];
    }
    return s;
}

/*
 * The product passes of the set-up (A^T A q for Lanczos, H v for
 * Newton-CG) read one d-vector and add to another at the same random
 * columns. Kept as pairs in one array, vw[2c] the vector read and
 * vw[2c + 1] the one added to, each column costs one cache miss instead
 * of two (bench/results/setup.md: L_f and P* 1.21x faster at 1e6
 * rows). pair_dot and pair_axpy are row_dot_ahead and row_axpy on
 * that layout: the same terms in the same order, the same bits.
 */
static double pair_dot(const ec_dataset *ds, uint32_t i, const double *vw,
                       uint64_t nnz_end)
{
    double s = 0.0;

    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++) {
        if (j + ROW_AHEAD < nnz_end)
            prefetch_write(&vw[2 * (size_t)ds->col[j + ROW_AHEAD]]);
        s += ds->val[j] * vw[2 * (size_t)ds->col[j]];
    }
    return s;
}

static void pair_axpy(const ec_dataset *ds, uint32_t i, double a, double *vw)
{
    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++)
        vw[2 * (size_t)ds->col[j] + 1] += a * ds->val[j];
}

static void row_axpy(const ec_dataset *ds, uint32_t i, double a, double *g)
{
    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++)
        g[ds->col[j]] += a * ds->val[j];
}

static double row_norm2(const ec_dataset *ds, uint32_t i)
{
    double s = 0.0;

    for (uint64_t j = ds->row_ptr[i]; j < ds->row_ptr[i + 1]; j++)
        s += ds->val[j] * ds->val[j];
    return s;
}

void ec_prox_l1(double *x, uint32_t d, double t)
{
    if (t <= 0.0)
        return;
    for (uint32_t j = 0; j < d; j++)
        x[j] = ec_soft_threshold(x[j], t);
}

/* Neumaier's compensated sum, so that P - P* keeps its digits near 1e-12. */
typedef struct ksum {
    double s, c;
} ksum;

static void ksum_add(ksum *k, double v)
{
    double t = k->s + v;

    if (fabs(k->s) >= fabs(v))
        k->c += (k->s - t) + v;
    else
        k->c += (v - t) + k->s;
    k->s = t;
}

double ec_problem_value(const ec_problem *pb, const double *x)
{
    const ec_dataset *ds = pb->ds;
    ksum data = {0, 0};
    double sq = 0.0, l1 = 0.0;

    for (uint32_t i = 0; i < ds->n_rows; i++)
        ksum_add(&data, loss_value(pb->loss, ds->y[i] * row_dot(ds, i, x)));
    for (uint32_t j = 0; j < pb->d; j++) {
        sq += x[j] * x[j];
        l1 += fabs(x[j]);
    }
    return (data.s + data.c) / ds->n_rows + 0.5 * pb->lambda2 * sq +
           pb->lambda1 * l1;
}

double ec_shard_value(const ec_problem *pb, uint32_t tau, const double *x)
{
    const ec_shard *sh = &pb->shards[tau];
    const ec_dataset *ds = pb->ds;
    ksum data = {0, 0};
    double sq = 0.0;

    for (uint32_t i = sh->begin; i < sh->end; i++)
        ksum_add(&data, loss_value(pb->loss, ds->y[i] * row_dot(ds, i, x)));
    for (uint32_t j = 0; j < pb->d; j++)
        sq += x[j] * x[j];
    return sh->weight * (data.s + data.c) / (sh->end - sh->begin) +
           0.5 * pb->lambda2 * sq;
}

/* g = scale * sum_{i in [begin,end)} loss'(b_i a_i x) b_i a_i (g is added to). */
static void grad_rows_add(const ec_problem *pb, uint32_t begin, uint32_t end,
                          const double *x, double scale, double *g)
{
    const ec_dataset *ds = pb->ds;

    for (uint32_t i = begin; i < end; i++) {
        double t = ds->y[i] * row_dot(ds, i, x);
        row_axpy(ds, i, scale * ds->y[i] * loss_deriv(pb->loss, t), g);
    }
}

void ec_problem_grad(const ec_problem *pb, const double *x, double *g)
{
    for (uint32_t j = 0; j < pb->d; j++)
        g[j] = pb->lambda2 * x[j];
    grad_rows_add(pb, 0, pb->ds->n_rows, x, 1.0 / pb->ds->n_rows, g);
}

void ec_shard_grad(const ec_problem *pb, uint32_t tau, const double *x,
                   double *g)
{
    const ec_shard *sh = &pb->shards[tau];

    for (uint32_t j = 0; j < pb->d; j++)
        g[j] = pb->lambda2 * x[j];
    grad_rows_add(pb, sh->begin, sh->end, x,
                  sh->weight / (sh->end - sh->begin), g);
}

void ec_shard_grad_rows(const ec_problem *pb, uint32_t tau,
                        const uint32_t *rows, uint32_t nrows,
                        const double *x, const double *w, double *g)
{
    const ec_dataset *ds = pb->ds;
    double scale = pb->shards[tau].weight / nrows;

    if (w) {
        for (uint32_t j = 0; j < pb->d; j++)
            g[j] = pb->lambda2 * (x[j] - w[j]);
    } else {
        for (uint32_t j = 0; j < pb->d; j++)
            g[j] = pb->lambda2 * x[j];
    }
    for (uint32_t r = 0; r < nrows; r++) {
        uint32_t i = rows[r];
        double c = loss_deriv(pb->loss, ds->y[i] * row_dot(ds, i, x));

        if (w)
            c -= loss_deriv(pb->loss, ds->y[i] * row_dot(ds, i, w));
        if (c != 0.0)
            row_axpy(ds, i, scale * ds->y[i] * c, g);
    }
}

void ec_shard_grad_rows_sparse_add(const ec_problem *pb, uint32_t tau,
                                   const uint32_t *rows, uint32_t nrows,
                                   const double *x, const double *w, double alpha,
                                   double *v)
{
    const ec_dataset *ds = pb->ds;
    double scale = alpha * pb->shards[tau].weight / nrows;

    for (uint32_t r = 0; r < nrows; r++) {
        uint32_t i = rows[r];
        double c = loss_deriv(pb->loss, ds->y[i] * row_dot(ds, i, x)) -
                   loss_deriv(pb->loss, ds->y[i] * row_dot(ds, i, w));

        if (c != 0.0)
            row_axpy(ds, i, scale * ds->y[i] * c, v);
    }
}

/*
 * A sampled row is usually outside the caches, and the dot product waits
 * on each column index before it can load x there. Asking for the row's
 * lines a round ahead lets the loads overlap the rest of the round.
 */
void ec_problem_prefetch_row(const ec_problem *pb, uint32_t i)
{
#if defined(__GNUC__)
    const ec_dataset *ds = pb->ds;
    uint64_t b = ds->row_ptr[i], e = ds->row_ptr[i + 1];

    for (uint64_t j = b; j < e; j += 64 / sizeof *ds->val)
        __builtin_prefetch(&ds->val[j]);
    for (uint64_t j = b; j < e; j += 64 / sizeof *ds->col)
        __builtin_prefetch(&ds->col[j]);
    if (e > b) {   /* the last line, when the row ends past a stride */
        __builtin_prefetch(&ds->val[e - 1]);
        __builtin_prefetch(&ds->col[e - 1]);
    }
#else
    (void)pb;
    (void)i;
#endif
}

double ec_problem_grad_norm(const ec_problem *pb, const double *x,
                            double *tmp, double *tmp2)
{
    double s = 0.0;

    ec_problem_grad(pb, x, tmp);
    if (pb->lambda1 == 0.0) {
        for (uint32_t j = 0; j < pb->d; j++)
            s += tmp[j] * tmp[j];
        return sqrt(s);
    }
    for (uint32_t j = 0; j < pb->d; j++)
        tmp2[j] = x[j] - tmp[j] / pb->L_f;
    ec_prox_l1(tmp2, pb->d, pb->lambda1 / pb->L_f);
    for (uint32_t j = 0; j < pb->d; j++) {
        double gj = pb->L_f * (x[j] - tmp2[j]);
        s += gj * gj;
    }
    return sqrt(s);
}

/*
 * The columns the rows [begin, end) use, in ascending order, into cols;
 * returns how many. mark (d bytes, all zero) is left all zero again.
 */
static uint32_t rows_support(const ec_dataset *ds, uint32_t begin,
                             uint32_t end, uint32_t d, uint8_t *mark,
                             uint32_t *cols)
{
    uint32_t n = 0;

    for (uint64_t j = ds->row_ptr[begin]; j < ds->row_ptr[end]; j++)
        mark[ds->col[j]] = 1;
    for (uint32_t c = 0; c < d; c++) {
        if (mark[c]) {
            cols[n++] = c;
            mark[c] = 0;
        }
    }
    return n;
}

/* The Lanczos start: a fixed unit vector, so that the constants
 * are reproducible. */
static void power_start(uint32_t d, double *v0)
{
    double nv = 0.0;
    ec_rng rng;

    ec_rng_seed(&rng, 0x5eed, 0);
    for (uint32_t j = 0; j < d; j++)
        v0[j] = 1.0 + 0.1 * ec_rng_uniform(&rng);
    for (uint32_t j = 0; j < d; j++)
        nv += v0[j] * v0[j];
    nv = sqrt(nv);
    for (uint32_t j = 0; j < d; j++)
        v0[j] /= nv;
}

/* Sturm count: how many eigenvalues of the symmetric tridiagonal matrix
 * with diagonal a[0..m) and off-diagonal b[0..m-1) lie below x. */
static uint32_t tridiag_below(const double *a, const double *b, uint32_t m,
                              double x)
{
    uint32_t count = 0;
    double q = 1.0;

    for (uint32_t i = 0; i < m; i++) {
        double bb = i ? b[i - 1] * b[i - 1] : 0.0;

        q = (a[i] - x) - (i ? bb / q : 0.0);
        if (q == 0.0)
            q = -DBL_EPSILON * (fabs(a[i]) + fabs(x) + DBL_MIN);
        count += q < 0.0;
    }
    return count;
}

/* The largest eigenvalue of that tridiagonal matrix, by bisection on the
 * Sturm count from lo (known to be at most the answer) to the largest
 * Gershgorin bound, down to the last bits. */
static double tridiag_max(const double *a, const double *b, uint32_t m,
                          double lo)
{
    double hi = lo;

    for (uint32_t i = 0; i < m; i++) {
        double r = a[i] + (i ? fabs(b[i - 1]) : 0.0) +
                   (i + 1 < m ? fabs(b[i]) : 0.0);
        if (r > hi)
            hi = r;
    }
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi);

        if (!(mid > lo && mid < hi))
            break;
        if (tridiag_below(a, b, m, mid) == m)
            hi = mid;           /* every eigenvalue below mid */
        else
            lo = mid;
    }
    return hi;
}

/*
 * lambda_max(A_S^T A_S) for the rows [begin, end) by the Lanczos method
 * from v0 (docs/algorithms.md, "The problem"): each step is one
 * product with A_S^T A_S, like a power step, but the largest Ritz value
 * of the Krylov space converges at the rate of the square root of the
 * spectral gap, so a few dozen to a few hundred products do what power
 * iteration needed thousands for. The Ritz value never exceeds
 * lambda_max (it is a Rayleigh quotient), so an early stop errs on the
 * side of a smaller L. It stops when the Ritz value has changed by at
 * most 1e-14 relative in three steps running, or when the Krylov space is
 * invariant (then it is exact); NaN when a termination signal came
 * (ec_signal_caught) meanwhile.
 *
 * The vectors are not kept (three of them live at any time): the loss of
 * orthogonality this allows makes copies of converged Ritz values, which
 * does not move the largest one. Only the rows' columns (cols, ascending)
 * are touched: A_S v reads v there alone, and A_S^T t is zero elsewhere;
 * the sums run over the same nonzero terms in the same order as over all
 * of d, so the result is the same to the bit, and a shard of a wide model
 * costs its own columns, not d, per step.
 */
static double lanczos_lmax(const ec_dataset *ds, uint32_t begin, uint32_t end,
                           const uint32_t *cols, uint32_t ncols,
                           const double *v0, double *qw, double *qprev,
                           double *alpha, double *beta, uint32_t *steps)
{
    double theta = 0.0, last = 0.0, n0 = 0.0;
    uint64_t nnz_end = ds->row_ptr[ds->n_rows];
    int steady = 0;

    /* q, the Lanczos vector, is qw[2j]; w, its product, qw[2j + 1]. */
    *steps = 0;
    for (uint32_t i = 0; i < ncols; i++)
        n0 += v0[cols[i]] * v0[cols[i]];
    if (n0 == 0.0)
        return 0.0;
    n0 = sqrt(n0);
    for (uint32_t i = 0; i < ncols; i++) {
        qw[2 * (size_t)cols[i]] = v0[cols[i]] / n0;
        qprev[cols[i]] = 0.0;
    }
    for (uint32_t m = 0; m < EC_LANCZOS_MAX_STEPS; m++) {
        double a = 0.0, nb = 0.0, bprev = m ? beta[m - 1] : 0.0;

        *steps = m + 1;
        if (ec_signal_caught())
            return NAN;             /* ec_problem_init says cancelled */
        for (uint32_t i = 0; i < ncols; i++)
            qw[2 * (size_t)cols[i] + 1] = 0.0;
        for (uint32_t i = begin; i < end; i++) {
            double t = pair_dot(ds, i, qw, nnz_end);

            pair_axpy(ds, i, t, qw);
            a += t * t;                     /* q^T A^T A q, ||q|| = 1 */
        }
        for (uint32_t i = 0; i < ncols; i++) {
            size_t j = cols[i];
            double *w = &qw[2 * j + 1];

            *w -= a * qw[2 * j] + bprev * qprev[j];
            nb += *w * *w;
        }
        alpha[m] = a;
        beta[m] = sqrt(nb);
        theta = tridiag_max(alpha, beta, m + 1, m ? theta : 0.0);
        if (beta[m] <= 1e-15 * theta)
            return theta;                   /* an invariant subspace */
        steady = m && theta - last <= 1e-14 * theta ? steady + 1 : 0;
        if (steady >= 3)
            return theta;
        last = theta;
        for (uint32_t i = 0; i < ncols; i++) {
            size_t j = cols[i];

            qprev[j] = qw[2 * j];
            qw[2 * j] = qw[2 * j + 1] / beta[m];
        }
    }
    return theta;
}

/* A copy of ds with row perm[i] at position i. */
static int dataset_permuted(const ec_dataset *ds, const uint32_t *perm,
                            ec_dataset *out, ec_err *e)
{
    uint32_t N = ds->n_rows;

    memset(out, 0, sizeof *out);
    out->row_ptr = malloc(((size_t)N + 1) * sizeof *out->row_ptr);
    out->col = malloc((ds->nnz ? ds->nnz : 1) * sizeof *out->col);
    out->val = malloc((ds->nnz ? ds->nnz : 1) * sizeof *out->val);
    out->y = malloc((size_t)N * sizeof *out->y);
    if (!out->row_ptr || !out->col || !out->val || !out->y) {
        ec_dataset_clear(out);
        return ec_err_set(e, EC_ENOMEM, "out of memory splitting %u rows", N);
    }
    out->n_rows = N;
    out->d = ds->d;
    out->nnz = ds->nnz;
    out->label_neg = ds->label_neg;
    out->label_pos = ds->label_pos;
    out->n_labels = ds->n_labels;
    out->row_ptr[0] = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t src = perm[i];
        uint64_t a = ds->row_ptr[src], len = ds->row_ptr[src + 1] - a;

        memcpy(out->col + out->row_ptr[i], ds->col + a, len * sizeof *out->col);
        memcpy(out->val + out->row_ptr[i], ds->val + a, len * sizeof *out->val);
        out->row_ptr[i + 1] = out->row_ptr[i] + len;
        out->y[i] = ds->y[src];
    }
    return 0;
}

/* Orders the rows for the job's split, copying them unless contiguous, and
 * gives the shards' sizes (n entries, the caller frees). */
static int problem_split(ec_problem *pb, const ec_dataset *ds,
                         const ec_job *job, uint32_t **sizes, ec_err *e)
{
    uint32_t *perm = malloc((size_t)ds->n_rows * sizeof *perm);
    int rc;

    *sizes = malloc((size_t)job->workers * sizeof **sizes);
    if (!perm || !*sizes) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory splitting %u rows",
                        ds->n_rows);
        goto out;
    }
    pb->split = job->split;
    pb->split_alpha = job->split != EC_SPLIT_DIRICHLET ? NAN
                      : isnan(job->split_alpha) ? EC_SPLIT_DEFAULT_ALPHA
                                                : job->split_alpha;
    if ((rc = ec_split_rows(ds, job, perm, *sizes, e)) < 0)
        goto out;
    if (job->split != EC_SPLIT_CONTIGUOUS) {
        if ((rc = dataset_permuted(ds, perm, &pb->shuffled, e)) < 0)
            goto out;
        pb->ds = &pb->shuffled;
    }
out:
    free(perm);
    return rc;
}

int ec_problem_init(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                    ec_err *e)
{
    return ec_problem_init_given(pb, ds, job, NULL, e);
}

/* The three ways in: nothing given, another rank's constants (given), or
   a cached lambda_max (cached, NULL otherwise). */
static int problem_init(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                        const ec_problem_given *given, const double *cached,
                        uint32_t cached_steps, ec_err *e);

int ec_problem_init_given(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                          const ec_problem_given *given, ec_err *e)
{
    return problem_init(pb, ds, job, given, NULL, 0, e);
}

int ec_problem_init_lmax(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                         double lambda_max, uint32_t steps, ec_err *e)
{
    return problem_init(pb, ds, job, NULL, &lambda_max, steps, e);
}

static int problem_init(ec_problem *pb, const ec_dataset *ds, const ec_job *job,
                        const ec_problem_given *given, const double *cached,
                        uint32_t cached_steps, ec_err *e)
{
    uint32_t N = ds->n_rows, n = job->workers, d = ds->d;
    double c = loss_curv(job->loss), sumsq = 0.0;
    double *qw = NULL, *v0 = NULL, *vp = NULL, *ab = NULL;
    uint32_t *cols = NULL, ncols, steps;
    uint8_t *mark = NULL;
    uint32_t *sizes = NULL;
    const ec_algo_info *ai = ec_algo_info_of(job->algorithm);
    int needs_l_tilde = ai && (ai->needs & EC_NEEDS_L_TILDE);
    int rc;

    memset(pb, 0, sizeof *pb);
    if (N == 0 || d == 0)
        return ec_err_set(e, EC_EINVAL, "dataset: has no samples or features");
    if (n < 1 || n > N)
        return ec_err_set(e, EC_EINVAL,
                          "workers must be in 1..%u (the dataset's rows; got %u)",
                          N, n);
    if (!(job->lambda1 >= 0.0) || !isfinite(job->lambda1))
        return ec_err_set(e, EC_EINVAL, "lambda1 must be >= 0 (got %g)",
                          job->lambda1);
    pb->ds = ds;
    pb->zeta_star = NAN;
    if ((rc = problem_split(pb, ds, job, &sizes, e)) < 0)
        goto fail;
    pb->loss = job->loss;
    pb->lambda1 = job->lambda1;
    pb->n = n;
    pb->d = d;
    pb->shards = calloc(n, sizeof *pb->shards);
    qw = malloc(2 * (size_t)d * sizeof *qw);
    v0 = malloc(d * sizeof *v0);
    vp = malloc(d * sizeof *vp);
    ab = malloc(2 * EC_LANCZOS_MAX_STEPS * sizeof *ab);
    cols = malloc(d * sizeof *cols);
    mark = calloc(d, 1);
    pb->x_star = calloc(d, sizeof *pb->x_star);
    if (!pb->shards || !qw || !v0 || !vp || !ab || !cols || !mark || !pb->x_star) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for the problem");
        goto fail;
    }

    power_start(d, v0);
    if (given) {
        pb->lmax_data = given->lmax_data;
        pb->lmax_steps = given->lmax_steps;
        pb->lambda_max = NAN;
    } else if (cached && pb->ds == ds && isfinite(*cached) && *cached >= 0.0) {
        /* The rows are in ds's order, the one the cached value was found
         * in: the same value the run below would give, to the bit. */
        pb->lambda_max = *cached;
        pb->lmax_steps = cached_steps;
        pb->lmax_cached = 1;
        pb->lmax_data = c * pb->lambda_max / N;
    } else {
        ncols = rows_support(pb->ds, 0, N, d, mark, cols);
        pb->lambda_max = lanczos_lmax(pb->ds, 0, N, cols, ncols, v0, qw, vp,
                                      ab, ab + EC_LANCZOS_MAX_STEPS,
                                      &pb->lmax_steps);
        pb->lmax_data = c * pb->lambda_max / N;
    }
    if (isnan(pb->lmax_data))
        goto cancelled;
    if (!isnan(job->lambda2))
        pb->lambda2 = job->lambda2;
    else
        pb->lambda2 = job->lambda2_rel * pb->lmax_data;
    /* lambda2 = 0 is the general convex problem, taken where P* can be
     * certified without strong convexity (ec_job_general_convex_check
     * says the rest: the method). */
    if (pb->lambda2 == 0.0 && !isnan(job->lambda2) &&
        (job->loss != EC_LOSS_SQUARED || job->lambda1 != 0.0 || d > 4096)) {
        rc = ec_err_set(e, EC_EINVAL,
                        "lambda2 = 0 is taken for the squared loss with "
                        "lambda1 = 0 and d <= 4096 only, where P* is "
                        "certified by Newton steps (got loss %s, lambda1 %g, "
                        "d %u)",
                        ec_loss_name(job->loss), job->lambda1, d);
        goto fail;
    }
    if (!(pb->lambda2 >= 0.0) || !isfinite(pb->lambda2) ||
        (pb->lambda2 == 0.0 && isnan(job->lambda2))) {
        rc = ec_err_set(e, EC_EINVAL,
                        "lambda2 must be > 0, or exactly 0 for a general "
                        "convex least-squares problem (mu = lambda2; got %g)",
                        pb->lambda2);
        goto fail;
    }

    /* The shards take consecutive blocks of the split's order. */
    for (uint32_t t = 0, row = 0; t < n; t++) {
        uint32_t m = sizes[t];
        ec_shard *sh = &pb->shards[t];
        double maxsq = 0.0;

        sh->begin = row;
        sh->end = row + m;
        sh->weight = (double)n * m / N;
        for (uint32_t i = sh->begin; i < sh->end; i++) {
            double r = row_norm2(pb->ds, i);

            sh->positives += pb->ds->y[i] > 0;
            if (r > maxsq)
                maxsq = r;
        }
        sh->L_max = sh->weight * c * maxsq + pb->lambda2;
        if (sh->L_max > pb->L)
            pb->L = sh->L_max;
        row += m;
        /* Each shard's own Lanczos run is most of the set-up of a
         * wide model, and only EF21's step uses its result. */
        sh->L_bar = NAN;
        if (!needs_l_tilde)
            continue;
        if (given) {
            sh->L_bar = given->L_bar[t];
            sumsq += sh->L_bar * sh->L_bar;
            continue;
        }
        ncols = rows_support(pb->ds, sh->begin, sh->end, d, mark, cols);
        sh->L_bar = sh->weight * c *
                        lanczos_lmax(pb->ds, sh->begin, sh->end, cols,
                                     ncols, v0, qw, vp, ab,
                                     ab + EC_LANCZOS_MAX_STEPS,
                                     &steps) / m +
                    pb->lambda2;
        if (isnan(sh->L_bar))
            goto cancelled;
        sumsq += sh->L_bar * sh->L_bar;
    }
    pb->L_tilde = needs_l_tilde ? sqrt(sumsq / n) : NAN;
    pb->L_f = pb->lmax_data + pb->lambda2;
    pb->mu = pb->lambda2;
    pb->kappa = pb->mu > 0.0 ? pb->L_f / pb->mu : INFINITY;
    memset(vp, 0, d * sizeof *vp);
    pb->P0 = ec_problem_value(pb, vp);
    pb->P_star = NAN;
    free(qw);
    free(v0);
    free(vp);
    free(ab);
    free(cols);
    free(mark);
    free(sizes);
    return 0;
cancelled:
    rc = ec_err_set(e, EC_ECANCELLED,
                    "cancelled by signal %d while computing the problem's "
                    "constants", ec_signal_caught());
fail:
    free(qw);
    free(v0);
    free(vp);
    free(ab);
    free(cols);
    free(mark);
    free(sizes);
    ec_problem_clear(pb);
    return rc;
}

void ec_problem_clear(ec_problem *pb)
{
    if (!pb)
        return;
    ec_dataset_clear(&pb->shuffled);
    free(pb->shards);
    free(pb->x_star);
    memset(pb, 0, sizeof *pb);
}

/*
 * Whether a solve must give up now: a termination signal came
 * (EC_ECANCELLED) or the clock passed deadline (EC_ETIMEOUT; 0 is none).
 * 0 to go on. Called every few milliseconds of work at most.
 */
static int solve_stopped(double deadline, int it, ec_err *e)
{
    if (ec_signal_caught())
        return ec_err_set(e, EC_ECANCELLED,
                          "cancelled by signal %d while solving for P* "
                          "(iteration %d)", ec_signal_caught(), it);
    if (deadline > 0 && ec_clock() >= deadline)
        return ec_err_set(e, EC_ETIMEOUT,
                          "P* not found within the time limit "
                          "(iteration %d)", it);
    return 0;
}

/* In-place Cholesky of the d x d SPD matrix H (lower triangle): 0, 1 if
 * not PD, or a solve_stopped() code (< 0). */
static int cholesky(double *H, uint32_t d, double deadline, int it, ec_err *e)
{
    for (uint32_t j = 0; j < d; j++) {
        int rc = solve_stopped(deadline, it, e);
        if (rc < 0)
            return rc;
        double *rj = H + (size_t)j * d;
        double s = rj[j];

        for (uint32_t k = 0; k < j; k++)
            s -= rj[k] * rj[k];
        if (!(s > 0.0))
            return 1;
        rj[j] = sqrt(s);
        for (uint32_t i = j + 1; i < d; i++) {
            double *ri = H + (size_t)i * d;
            double t = ri[j];

            for (uint32_t k = 0; k < j; k++)
                t -= ri[k] * rj[k];
            ri[j] = t / rj[j];
        }
    }
    return 0;
}

/* Solves (L L^T) x = b in place given the factor from cholesky(). */
static void cholesky_solve(const double *Lf, uint32_t d, double *b)
{
    for (uint32_t i = 0; i < d; i++) {
        const double *ri = Lf + (size_t)i * d;
        double s = b[i];

        for (uint32_t k = 0; k < i; k++)
            s -= ri[k] * b[k];
        b[i] = s / ri[i];
    }
    for (uint32_t i = d; i-- > 0;) {
        double s = b[i];

        for (uint32_t k = i + 1; k < d; k++)
            s -= Lf[(size_t)k * d + i] * b[k];
        b[i] = s / Lf[(size_t)i * d + i];
    }
}

/* Levenberg-Marquardt's damping of a Newton step at lambda2 = 0, in units
 * of L_f. */
#define EC_LM_DAMPING 1e-12

static int solve_newton(ec_problem *pb, double deadline, ec_err *e)
{
    const ec_dataset *ds = pb->ds;
    uint32_t d = pb->d, N = ds->n_rows;
    double *H = malloc((size_t)d * d * sizeof *H);
    double *g = malloc(d * sizeof *g), *step = malloc(d * sizeof *step);
    double *xn = malloc(d * sizeof *xn);
    double *x = pb->x_star, P, dec = INFINITY;
    /* lambda2 = 0: H may be singular (one-hot features make columns
     * dependent), so Levenberg-Marquardt's H + delta I, delta = 1e-12 L_f
     * (docs/algorithms.md, "General convex problems: lambda2 = 0"). */
    double damping = EC_LM_DAMPING * pb->L_f;
    int rc = 0, extra = -1, it;

    if (!H || !g || !step || !xn) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for Newton (d = %u)", d);
        goto out;
    }
    memset(x, 0, d * sizeof *x);
    P = ec_problem_value(pb, x);
    for (it = 0; it < 200; it++) {
        ec_problem_grad(pb, x, g);
        memset(H, 0, (size_t)d * d * sizeof *H);
        for (uint32_t i = 0; i < N; i++) {
            double h = loss_second(pb->loss, ds->y[i] * row_dot(ds, i, x)) / N;
            uint64_t a = ds->row_ptr[i], b = ds->row_ptr[i + 1];

            if (i % 256 == 0 && (rc = solve_stopped(deadline, it, e)) < 0)
                goto out;

            /* Lower triangle only: columns are increasing within a row. */
            for (uint64_t p = a; p < b; p++) {
                double *hr = H + (size_t)ds->col[p] * d;
                double hv = h * ds->val[p];
                for (uint64_t q = a; q <= p; q++)
                    hr[ds->col[q]] += hv * ds->val[q];
            }
        }
        for (uint32_t j = 0; j < d; j++)
            H[(size_t)j * d + j] += pb->lambda2 > 0.0 ? pb->lambda2 : damping;
        if ((rc = cholesky(H, d, deadline, it, e)) < 0)
            goto out;
        if (rc > 0) {
            rc = ec_err_set(e, EC_ENUMERIC,
                            "P*: Hessian not positive definite at Newton "
                            "iteration %d",
                            it);
            goto out;
        }
        memcpy(step, g, d * sizeof *g);
        cholesky_solve(H, d, step);
        dec = 0.0;
        for (uint32_t j = 0; j < d; j++)
            dec += g[j] * step[j];
        if (extra == 0 || !(dec >= 0.0))
            break;
        /* Backtracking on P keeps the damped phase monotone. */
        double t = 1.0, Pn = P;
        for (int ls = 0; ls < 60; ls++) {
            for (uint32_t j = 0; j < d; j++)
                xn[j] = x[j] - t * step[j];
            Pn = ec_problem_value(pb, xn);
            if (Pn <= P - 0.25 * t * dec || t * dec < 1e-30)
                break;
            t *= 0.5;
        }
        memcpy(x, xn, d * sizeof *x);
        P = Pn;
        if (extra > 0)
            extra--;
        else if (extra < 0 && 0.5 * dec <= 1e-13 * fabs(P))
            extra = 1;      /* converged: one more full step, then stop */
    }
    if (extra != 0) {
        rc = ec_err_set(e, EC_ENUMERIC,
                        "P*: Newton did not converge in %d iterations "
                        "(decrement %.3g)",
                        it, 0.5 * dec);
        goto out;
    }
    pb->P_star = ec_problem_value(pb, x);
    pb->solve_bound = 0.5 * fabs(dec);
    pb->solve_iters = it;
    pb->solve_method = pb->lambda2 > 0.0 ? "newton" : "newton-lm";
out:
    free(H);
    free(g);
    free(step);
    free(xn);
    return rc;
}

/* H v = A^T diag(h) A v + lambda2 v, h the rows' curvature over N, on
 * pairs (pair_dot): v is vw[2j], H v goes to vw[2j + 1]. */
static void hess_vec(const ec_problem *pb, const double *h, double *vw)
{
    const ec_dataset *ds = pb->ds;
    uint64_t nnz_end = ds->row_ptr[ds->n_rows];

    for (size_t j = 0; j < pb->d; j++)
        vw[2 * j + 1] = pb->lambda2 * vw[2 * j];
    for (uint32_t i = 0; i < ds->n_rows; i++) {
        double t = h[i] * pair_dot(ds, i, vw, nnz_end);
        if (t != 0.0)
            pair_axpy(ds, i, t, vw);
    }
}

/*
 * P* by truncated Newton when lambda1 = 0 and d is too wide for a dense
 * Hessian (docs/algorithms.md, "Finding P*"): each step solves H s = g by
 * conjugate gradients preconditioned with H's diagonal, to a residual of
 * min(0.5, sqrt(||g||)) ||g|| (so the steps turn superlinear near the
 * optimum) but never below a tenth of the gradient the stop asks for (a
 * finer solve would buy digits the stop does not need), then backtracks
 * on P as solve_newton does. Stops when ||g||^2 / (2 mu), a bound on
 * P - P* for a mu-strongly convex P, is at most 1e-13 |P|: FISTA's
 * certificate, reached in tens of Hessian products a step instead of
 * thousands of gradient steps.
 *
 * A step reads the matrix once for the gradient, the curvatures and the
 * preconditioner together (the margins y_i a_i x are kept), once per
 * Hessian product, and once for the margins' change y_i a_i s, from which
 * the backtracking values P(x - t s) follow without reading it again.
 */
static int solve_newton_cg(ec_problem *pb, double deadline, ec_err *e)
{
    const ec_dataset *ds = pb->ds;
    uint32_t d = pb->d, N = ds->n_rows;
    uint64_t nnz_end = ds->row_ptr[N];
    double *h = malloc((size_t)N * sizeof *h);
    /* The gradient g and H's diagonal as pairs, gd[2j] and gd[2j + 1]:
     * the pass that makes them adds to both at the same columns. */
    double *gd = malloc(2 * (size_t)d * sizeof *gd);
    double *marg = malloc((size_t)N * sizeof *marg);
    double *dmarg = malloc((size_t)N * sizeof *dmarg);
    double *s = malloc(d * sizeof *s), *r = malloc(d * sizeof *r);
    double *z = malloc(d * sizeof *z);
    /* The search direction p and its product H p as pairs (hess_vec). */
    double *ph = malloc(2 * (size_t)d * sizeof *ph);
    double *x = pb->x_star, P, bound = INFINITY;
    int rc = 0, it, products = 0;

    if (!h || !gd || !marg || !dmarg || !s || !r || !z || !ph) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for Newton-CG (d = %u)", d);
        goto out;
    }
    memset(x, 0, d * sizeof *x);
    P = ec_problem_value(pb, x);
    for (it = 0; it < 200; it++) {
        double gn2 = 0.0, rz = 0.0, tol2, dec = 0.0, t = 1.0, Pn = P;
        double need2 = 2.0 * pb->mu * 1e-13 * fabs(P);

        if ((rc = solve_stopped(deadline, it, e)) < 0)
            goto out;
        /* g as ec_problem_grad makes it (the same terms in the same
         * order), with the curvatures h and H's diagonal beside. */
        for (size_t j = 0; j < d; j++) {
            gd[2 * j] = pb->lambda2 * x[j];
            gd[2 * j + 1] = pb->lambda2;
        }
        for (uint32_t i = 0; i < N; i++) {
            double m = ds->y[i] * row_dot_ahead(ds, i, x, gd, 2, nnz_end);
            double a = 1.0 / N * ds->y[i] *
                       loss_deriv_second(pb->loss, m, &h[i]);

            marg[i] = m;
            h[i] /= N;
            for (uint64_t q = ds->row_ptr[i]; q < ds->row_ptr[i + 1]; q++) {
                double *pair = &gd[2 * (size_t)ds->col[q]];

                pair[0] += a * ds->val[q];
                pair[1] += h[i] * ds->val[q] * ds->val[q];
            }
        }
        for (size_t j = 0; j < d; j++)
            gn2 += gd[2 * j] * gd[2 * j];
        bound = gn2 / (2.0 * pb->mu);
        if (bound <= 1e-13 * fabs(P))
            break;
        /* Preconditioned CG from s = 0: r = g, z = r / diag, p = z. */
        tol2 = fmax(fmin(0.25, sqrt(gn2)) * gn2, 0.01 * need2);
        memset(s, 0, d * sizeof *s);
        for (size_t j = 0; j < d; j++) {
            r[j] = gd[2 * j];
            z[j] = r[j] / gd[2 * j + 1];
            ph[2 * j] = z[j];
            rz += r[j] * z[j];
        }
        for (int cg = 0; cg < 1000; cg++) {
            double php = 0.0, alpha, rn2 = 0.0, rzn = 0.0;

            if ((rc = solve_stopped(deadline, it, e)) < 0)
                goto out;
            hess_vec(pb, h, ph);
            products++;
            for (size_t j = 0; j < d; j++)
                php += ph[2 * j] * ph[2 * j + 1];
            if (!(php > 0.0))
                break;
            alpha = rz / php;
            for (size_t j = 0; j < d; j++) {
                s[j] += alpha * ph[2 * j];
                r[j] -= alpha * ph[2 * j + 1];
                rn2 += r[j] * r[j];
            }
            if (rn2 <= tol2)
                break;
            for (size_t j = 0; j < d; j++) {
                z[j] = r[j] / gd[2 * j + 1];
                rzn += r[j] * z[j];
            }
            for (size_t j = 0; j < d; j++)
                ph[2 * j] = z[j] + (rzn / rz) * ph[2 * j];
            rz = rzn;
        }
        for (size_t j = 0; j < d; j++)
            dec += gd[2 * j] * s[j];
        if (!(dec > 0.0)) {
            rc = ec_err_set(e, EC_ENUMERIC,
                            "P*: Newton-CG found no descent direction at "
                            "iteration %d", it);
            goto out;
        }
        for (uint32_t i = 0; i < N; i++)
            dmarg[i] = ds->y[i] * row_dot_ahead(ds, i, s, NULL, 0, nnz_end);
        /* Backtracking on P, s the descent direction (the trial point in
         * z): the margins at x - t s are marg - t dmarg. */
        for (int ls = 0; ls < 60; ls++) {
            ksum data = {0, 0};
            double sq = 0.0;

            for (uint32_t i = 0; i < N; i++)
                ksum_add(&data, loss_value(pb->loss, marg[i] - t * dmarg[i]));
            for (uint32_t j = 0; j < d; j++) {
                z[j] = x[j] - t * s[j];
                sq += z[j] * z[j];
            }
            Pn = (data.s + data.c) / N + 0.5 * pb->lambda2 * sq;
            if (Pn <= P - 0.25 * t * dec || t * dec < 1e-30)
                break;
            t *= 0.5;
        }
        memcpy(x, z, d * sizeof *x);
        P = Pn;
    }
    if (it == 200) {
        rc = ec_err_set(e, EC_ENUMERIC,
                        "P*: Newton-CG did not converge in %d iterations "
                        "(bound %.3g)", it, bound);
        goto out;
    }
    pb->P_star = ec_problem_value(pb, x);
    pb->solve_bound = bound;
    pb->solve_iters = it;
    pb->solve_products = products;
    pb->solve_method = "newton-cg";
out:
    free(h);
    free(gd);
    free(marg);
    free(dmarg);
    free(s);
    free(r);
    free(z);
    free(ph);
    return rc;
}

int ec_problem_use_pstar(ec_problem *pb, double P_star, double bound,
                         const char *method, ec_err *e)
{
    if (!isfinite(P_star) || P_star > pb->P0)
        return ec_err_set(e, EC_EINVAL,
                          "P*: the cached value %.17g is not below P(0) = %.17g",
                          P_star, pb->P0);
    pb->P_star = P_star;
    pb->solve_bound = isfinite(bound) && bound >= 0 ? bound : NAN;
    pb->solve_iters = 0;
    pb->solve_method = method && strcmp(method, "newton") == 0 ? "newton"
                     : method && strcmp(method, "newton-cg") == 0 ? "newton-cg"
                     : method && strcmp(method, "fista-restart") == 0
                         ? "fista-restart"
                         : "cached";
    pb->solve_cached = 1;
    return 0;
}

static int solve_fista(ec_problem *pb, double deadline, ec_err *e)
{
    uint32_t d = pb->d;
    double *x = pb->x_star;
    double *y = malloc(d * sizeof *y), *g = malloc(d * sizeof *g);
    double *xn = malloc(d * sizeof *xn);
    double t = 1.0, step = 1.0 / pb->L_f, bound = INFINITY;
    int rc = 0, it;
    const int max_iters = 2000000;

    if (!y || !g || !xn) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for P* (d = %u)", d);
        goto out;
    }
    memset(x, 0, d * sizeof *x);
    memcpy(y, x, d * sizeof *y);
    for (it = 0; it < max_iters; it++) {
        double gm = 0.0, restart = 0.0, tn;

        if ((rc = solve_stopped(deadline, it, e)) < 0)
            goto out;
        ec_problem_grad(pb, y, g);
        for (uint32_t j = 0; j < d; j++)
            xn[j] = y[j] - step * g[j];
        ec_prox_l1(xn, d, step * pb->lambda1);
        for (uint32_t j = 0; j < d; j++) {
            double gj = (y[j] - xn[j]) / step;
            gm += gj * gj;
            restart += gj * (xn[j] - x[j]);
        }
        bound = gm / (2.0 * pb->mu);
        tn = 0.5 * (1.0 + sqrt(1.0 + 4.0 * t * t));
        if (restart > 0.0) {
            /* O'Donoghue-Candes gradient restart: momentum is hurting. */
            tn = 1.0;
            memcpy(y, xn, d * sizeof *y);
        } else {
            for (uint32_t j = 0; j < d; j++)
                y[j] = xn[j] + ((t - 1.0) / tn) * (xn[j] - x[j]);
        }
        memcpy(x, xn, d * sizeof *x);
        t = tn;
        if (it % 16 == 0 &&
            bound <= 1e-13 * fabs(ec_problem_value(pb, x)))
            break;
    }
    if (it == max_iters) {
        rc = ec_err_set(e, EC_ENUMERIC,
                        "P*: proximal gradient did not converge in %d "
                        "iterations (bound %.3g)",
                        it, bound);
        goto out;
    }
    pb->P_star = ec_problem_value(pb, x);
    pb->solve_bound = bound;
    pb->solve_iters = it;
    pb->solve_method = "fista-restart";
out:
    free(y);
    free(g);
    free(xn);
    return rc;
}

double ec_problem_heterogeneity(const ec_problem *pb, const double *x)
{
    double *g = malloc(pb->d * sizeof *g), sum = 0.0;

    if (!g)
        return NAN;
    for (uint32_t t = 0; t < pb->n; t++) {
        double sq = 0.0;

        ec_shard_grad(pb, t, x, g);
        for (uint32_t j = 0; j < pb->d; j++)
            sq += g[j] * g[j];
        sum += sq;
    }
    free(g);
    return sum / pb->n;
}

int ec_problem_solve_until(ec_problem *pb, double deadline, ec_err *e)
{
    int rc = pb->lambda1 != 0.0 ? solve_fista(pb, deadline, e)
             : pb->d <= 4096    ? solve_newton(pb, deadline, e)
                                : solve_newton_cg(pb, deadline, e);

    if (rc == 0)
        pb->zeta_star = ec_problem_heterogeneity(pb, pb->x_star);
    return rc;
}

int ec_problem_find_x_star(ec_problem *pb, double deadline, ec_err *e)
{
    double P_star = pb->P_star, bound = pb->solve_bound;
    const char *method = pb->solve_method;
    int iters = pb->solve_iters, rc;

    if (!pb->solve_cached || !isnan(pb->zeta_star) || pb->lambda1 != 0.0 ||
        pb->d > 4096)
        return 0;
    rc = solve_newton(pb, deadline, e);
    if (rc == 0)
        pb->zeta_star = ec_problem_heterogeneity(pb, pb->x_star);
    pb->P_star = P_star;
    pb->solve_bound = bound;
    pb->solve_method = method;
    pb->solve_iters = iters;
    return rc;
}

int ec_problem_solve(ec_problem *pb, ec_err *e)
{
    return ec_problem_solve_until(pb, 0, e);
}
