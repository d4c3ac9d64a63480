/*
 * Splitting the rows into the workers' shards: an order of the rows and
 * the size of each shard, a pure function of the job's split, its alpha
 * and its seed, so every backend (and every MPI rank, which computes it
 * on its own) holds the same shards. docs/algorithms.md, "Splitting the
 * rows", says what each split is for.
 */
#include "ecopt/problem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/rng.h"

/* The generator streams of the split; 0x5 is the one `shuffle` used. */
enum { STREAM_ORDER = 0x5, STREAM_SHARES = 0x6 };

/* Fisher-Yates over a[0..n). */
static void shuffle_rows(uint32_t *a, uint32_t n, ec_rng *rng)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)ec_rng_below(rng, i);
        uint32_t t = a[i - 1];

        a[i - 1] = a[j];
        a[j] = t;
    }
}

/*
 * log of a Gamma(a, 1) draw: Marsaglia and Tsang for a >= 1, and
 * Gamma(a + 1) U^(1/a) for a < 1, kept in logs because for small a the
 * draw itself underflows to 0.
 */
static double log_gamma_draw(ec_rng *rng, double a)
{
    double boost = 0.0, dd, c;

    if (a < 1.0) {
        boost = log(1.0 - ec_rng_uniform(rng)) / a;   /* log U, U in (0, 1] */
        a += 1.0;
    }
    dd = a - 1.0 / 3.0;
    c = 1.0 / sqrt(9.0 * dd);
    for (;;) {
        double x = ec_rng_normal(rng), v = 1.0 + c * x, u;

        if (v <= 0.0)
            continue;
        v = v * v * v;
        u = 1.0 - ec_rng_uniform(rng);
        if (log(u) < 0.5 * x * x + dd - dd * v + dd * log(v))
            return log(dd * v) + boost;
    }
}

/*
 * count[t] = the rows of one label (total of them) dealt to worker t in
 * Dirichlet(alpha, ..., alpha) shares, rounded so they sum to total.
 */
static void dirichlet_counts(ec_rng *rng, double alpha, uint32_t n,
                             uint32_t total, double *share, uint32_t *count)
{
    double top = -INFINITY, sum = 0.0, cum = 0.0;
    uint32_t given = 0;

    for (uint32_t t = 0; t < n; t++) {
        share[t] = log_gamma_draw(rng, alpha);
        top = share[t] > top ? share[t] : top;
    }
    for (uint32_t t = 0; t < n; t++)
        sum += (share[t] = exp(share[t] - top));
    for (uint32_t t = 0; t < n; t++) {
        uint32_t upto;

        cum += share[t] / sum;
        upto = t + 1 == n ? total : (uint32_t)fmin(total, floor(cum * total));
        upto = upto < given ? given : upto;
        count[t] = upto - given;
        given = upto;
    }
}

/*
 * Dirichlet shares of each label; then every empty shard takes one row
 * from the largest shard (of that shard's commoner label), so no worker
 * is left without data. perm gets the rows shard by shard.
 */
static int split_dirichlet(const ec_dataset *ds, double alpha, uint32_t n,
                           ec_rng *order, ec_rng *shares, uint32_t *perm,
                           uint32_t *sizes, ec_err *e)
{
    uint32_t N = ds->n_rows, npos = 0, *cnt = calloc(2 * (size_t)n, sizeof *cnt);
    uint32_t *fill = calloc(n, sizeof *fill), *byl = malloc(N * sizeof *byl);
    double *share = malloc(n * sizeof *share);

    if (!cnt || !fill || !byl || !share) {
        free(cnt);
        free(fill);
        free(byl);
        free(share);
        return ec_err_set(e, EC_ENOMEM, "out of memory splitting %u rows", N);
    }
    /* The rows by label (negatives, then positives), each in random order. */
    for (uint32_t i = 0; i < N; i++)
        npos += ds->y[i] > 0;
    for (uint32_t i = 0, a = 0, b = N - npos; i < N; i++)
        byl[ds->y[i] > 0 ? b++ : a++] = i;
    shuffle_rows(byl, N - npos, order);
    shuffle_rows(byl + N - npos, npos, order);
    dirichlet_counts(shares, alpha, n, N - npos, share, cnt);
    dirichlet_counts(shares, alpha, n, npos, share, cnt + n);
    for (uint32_t t = 0; t < n; t++) {
        uint32_t big = 0, lab;

        if (cnt[t] + cnt[n + t] > 0)
            continue;
        for (uint32_t u = 1; u < n; u++)
            if (cnt[u] + cnt[n + u] > cnt[big] + cnt[n + big])
                big = u;
        lab = cnt[n + big] > cnt[big];
        cnt[lab * n + big]--;
        cnt[lab * n + t]++;
    }
    for (uint32_t t = 0, at = 0; t < n; t++) {
        sizes[t] = cnt[t] + cnt[n + t];
        fill[t] = at;
        at += sizes[t];
    }
    for (uint32_t lab = 0, i = 0; lab < 2; lab++)
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t k = 0; k < cnt[lab * n + t]; k++)
                perm[fill[t]++] = byl[i++];
    free(cnt);
    free(fill);
    free(byl);
    free(share);
    return 0;
}

int ec_split_rows(const ec_dataset *ds, const ec_job *job, uint32_t *perm,
                  uint32_t *sizes, ec_err *e)
{
    uint32_t N = ds->n_rows, n = job->workers;
    ec_rng order, shares;

    ec_rng_seed(&order, job->seed, STREAM_ORDER);
    ec_rng_seed(&shares, job->seed, STREAM_SHARES);
    for (uint32_t i = 0; i < N; i++)
        perm[i] = i;
    /* Equal blocks; the first N mod n get one row more. */
    for (uint32_t t = 0; t < n; t++)
        sizes[t] = N / n + (t < N % n ? 1 : 0);
    switch (job->split) {
    case EC_SPLIT_CONTIGUOUS:
        return 0;
    case EC_SPLIT_SHUFFLED:
        /* The same draws as the former `shuffle: true`, which this names. */
        shuffle_rows(perm, N, &order);
        return 0;
    case EC_SPLIT_LABEL_SKEW: {
        uint32_t npos = 0;

        for (uint32_t i = 0; i < N; i++)
            npos += ds->y[i] > 0;
        for (uint32_t i = 0, a = 0, b = N - npos; i < N; i++)
            perm[ds->y[i] > 0 ? b++ : a++] = i;
        shuffle_rows(perm, N - npos, &order);
        shuffle_rows(perm + N - npos, npos, &order);
        return 0;
    }
    case EC_SPLIT_DIRICHLET: {
        double alpha = isnan(job->split_alpha) ? EC_SPLIT_DEFAULT_ALPHA
                                               : job->split_alpha;

        if (!(alpha > 0.0) || !isfinite(alpha))
            return ec_err_set(e, EC_EINVAL,
                              "split_alpha must be > 0 (got %g)", alpha);
        return split_dirichlet(ds, alpha, n, &order, &shares, perm, sizes, e);
    }
    }
    return ec_err_set(e, EC_EINVAL, "split: unknown split %d", (int)job->split);
}
