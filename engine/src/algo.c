/*
 * ECLK and its baselines as pure steps over a replicated model (see
 * ecopt/algo.h, and docs/algorithms.md, "Algorithms, round by round").
 * Each step allocates nothing.
 */
#include "ecopt/algo.h"
#include "ecopt/clones.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_katyusha(ec_algo_id a)
{
    return ec_algo_is(a, EC_FAMILY_KATYUSHA);
}

/* The methods whose coin round sends the full gradient at the new
 * reference point w uncompressed: ECLK, L-Katyusha and Qian et al.'s
 * EC-LSVRG. */
static int sends_snapshot(ec_algo_id a)
{
    return is_katyusha(a) || a == EC_ALGO_EC_LSVRG_QIAN;
}

/* The methods with one shared coin per round that moves the reference
 * point w: those above, and ADIANA (whose workers compress their
 * gradient at w every round, so the coin sends nothing). */
static int has_shared_coin(ec_algo_id a)
{
    return sends_snapshot(a) || a == EC_ALGO_ADIANA;
}

static int is_adiana(ec_algo_id a)
{
    return a == EC_ALGO_ADIANA;
}

static int is_diana(ec_algo_id a)
{
    return ec_algo_is(a, EC_FAMILY_DIANA);
}

/* Gorbunov et al.'s loopless SVRG estimators: each worker keeps its own
 * reference point w_tau and its full local gradient there, refreshed with
 * its own coin of probability p (ec-lsvrg, ec-lsvrg-diana). */
static int has_local_refs(ec_algo_id a)
{
    return a == EC_ALGO_EC_LSVRG || a == EC_ALGO_EC_LSVRG_DIANA;
}

static int is_adef(ec_algo_id a)
{
    return ec_algo_is(a, EC_FAMILY_ADEF);
}

/* Algorithms whose gradient is the full local one rather than a minibatch. */
int ec_algo_full_local(ec_algo_id a)
{
    return ec_algo_info_of(a) && !ec_algo_info_of(a)->stochastic;
}

int ec_algo_compresses(ec_algo_id a)
{
    return ec_algo_info_of(a) && ec_algo_info_of(a)->compresses != 0;
}

int ec_algo_unbiased_only(ec_algo_id a)
{
    return ec_algo_info_of(a) && ec_algo_info_of(a)->compresses == 2;
}

/* Whether compressor t has an unbiased form (its omega is defined: every
 * type but topk), whatever its k or s. */
static int has_unbiased_form(ec_comp_type t)
{
    ec_comp_spec one = {t, 1, 1};

    return ec_comp_omega(&one, 1) >= 0.0;
}

int ec_algo_has_init(ec_algo_id a)
{
    return ec_algo_info_of(a) && ec_algo_info_of(a)->has_init;
}

const char *ec_algo_comp_check(ec_algo_id a, ec_comp_type t, char *buf,
                               unsigned buflen)
{
    const ec_algo_info *ai = ec_algo_info_of(a);
    const ec_comp_info *ci = ec_comp_info_of(t);
    char names[256];

    if (!ai) {
        snprintf(buf, buflen, "unknown (%d)", (int)a);
        return "algorithm";
    }
    if (!ci)
        return NULL;            /* ec_comp_check names the types */
    if (!ai->compresses && t != EC_COMP_NONE) {
        snprintf(buf, buflen, "%s sends uncompressed messages, so the "
                              "compressor must be none (got %s)",
                 ai->name, ci->name);
        return "compressor";
    }
    if (!ci->contraction) {
        snprintf(buf, buflen, "%s is not a contraction; use one of %s "
                              "(DIANA's shifts use the unbiased forms by "
                              "themselves)",
                 ci->name, ec_comp_names(1, names, sizeof names));
        return "compressor.type";
    }
    if (ai->compresses == 2 && !has_unbiased_form(t)) {
        snprintf(buf, buflen, "%s is contractive only: %s sends unbiased "
                              "compressed gradient differences and takes "
                              "randk, dither, natural, natural-dither (each "
                              "sent in its unbiased form) or none",
                 ci->name, ai->name);
        return "compressor.type";
    }
    return NULL;
}

/* The margin c of ECLK's inflation (docs/algorithms.md, "ECLK's
 * constants"); the guard's threshold is EC_ECLK_GUARD_THRESHOLD unless the
 * job gives one (docs/algorithms.md, "ECLK's guard"). */
#define ECLK_C 0.5
/* EF21's default step, as a multiple of its theorem's (docs/algorithms.md,
 * "The baselines' steps"). */
#define EF21_STEP_FACTOR 64.0
/* Loopless SVRG's theory step 1/(6 L) (Kovalev, Horvath and Richtarik
 * 2019), the step of Qian et al.'s EC-LSVRG here (docs/algorithms.md,
 * "The baselines' steps"). */
#define LSVRG_STEP_DIVISOR 6.0
/* ADEF's default gamma = delta / (ADEF_STEP_DIVISOR L_eff), the scale of
 * its weights a_{t+1}^2 = gamma A_{t+1} (docs/algorithms.md, "ADEF's
 * constants"). */
#define ADEF_STEP_DIVISOR 2.0

double ec_eclk_inflation(double delta, double c)
{
    double a_max = 2.0 * sin(M_PI * delta / (2.0 * (2.0 - delta)));

    return fmax(1.0, (1.0 / 3.0) / (c * a_max));
}

void ec_params_set_eclk(ec_params *p, ec_eclk_rule rule, double delta_eff)
{
    p->eclk_rule = rule;
    p->delta_eff = delta_eff;
    p->inflation = rule == EC_ECLK_PLAIN || rule == EC_ECLK_ADAPTIVE
                       ? 1.0 : ec_eclk_inflation(delta_eff, p->eclk_c);
    /* The smoothness multiplier divides the smoothness every constant
     * derives from, so gamma and theta1 move together (docs/algorithms.md,
     * "The smoothness multiplier"). */
    p->L_delta = p->inflation * p->L_eff /
                 (p->smoothness_multiplier > 0.0 ? p->smoothness_multiplier : 1.0);
    p->sigma = p->mu / p->L_delta;
    p->theta2 = 0.5;
    p->theta1 = fmin(sqrt(2.0 * p->sigma / (3.0 * p->p)), 0.5);
    p->eta = p->theta2 / ((1.0 + p->theta2) * p->theta1);
    p->theory_step = p->eta / p->L_delta;
    if (!p->step_given)
        p->gamma = p->step_multiplier * p->theory_step;
}

ec_comp_spec ec_shift_comp(const ec_comp_spec *comp)
{
    ec_comp_spec c = {EC_COMP_NONE, 0, 0};
    const ec_comp_info *ci = ec_comp_info_of(comp->type);

    if (ci && ci->shift != EC_COMP_NONE) {
        c.type = ci->shift;
        c.k = ec_comp_info_of(c.type)->param == EC_COMP_PARAM_K ? comp->k : 0;
        c.s = ec_comp_info_of(c.type)->param == EC_COMP_PARAM_S ? comp->s : 0;
    }
    return c;
}

/*
 * ADIANA's constants (Li, Kovalev, Qian and Richtarik 2020, the
 * strongly convex theorem for ADIANA; docs/algorithms.md, "ADIANA's
 * constants"). The coin: p = min(1, max(1, sqrt(n / (32 omega)) - 1) /
 * (2 (1 + omega))), 1 without compression.
 */
static double adiana_p(double omega, uint32_t n)
{
    if (!(omega > 0.0))
        return 1.0;
    return fmin(1.0, fmax(1.0, sqrt(n / (32.0 * omega)) - 1.0) /
                         (2.0 * (1.0 + omega)));
}

/* eta = min(1/(2L), n / (64 omega (2 p omega + 1)^2 L)) with L = each
 * f_tau's smoothness over the smoothness multiplier, times the step
 * multiplier (or the given step); theta1 = min(1/4, sqrt(eta mu / p)),
 * theta2 = 1/2, gamma = eta / (2 (theta1 + eta mu)), beta = 1 - gamma mu
 * follow from that eta; alpha = 1/(1 + omega) is DIANA's. L is the
 * problem's L, the largest per-row constant over the shards, which bounds
 * every f_tau's smoothness and which every party computes alike from the
 * shards' rows. */
static void adiana_resolve(ec_params *p, const ec_problem *pb)
{
    double om = p->omega, L, eta;

    p->L_eff = pb->L;
    p->mu = pb->mu;
    L = p->L_eff / p->smoothness_multiplier;
    eta = 1.0 / (2.0 * L);
    if (om > 0.0) {
        double t = 2.0 * p->p * om + 1.0;

        eta = fmin(eta, pb->n / (64.0 * om * t * t * L));
    }
    p->theory_step = eta;
    if (!p->step_given)
        p->gamma = p->step_multiplier * p->theory_step;
    p->eta = p->gamma;
    p->theta2 = 0.5;
    p->theta1 = fmin(0.25, sqrt(p->eta * p->mu / p->p));
    p->gamma_z = p->eta / (2.0 * (p->theta1 + p->eta * p->mu));
    p->beta = 1.0 - p->gamma_z * p->mu;
}

/*
 * ECLK's rule and guard as the job asks (docs/algorithms.md, "ECLK's
 * rules"): the default rule is EC_ECLK_RULE_DEFAULT whether or not a step
 * is given; a given step replaces gamma alone, theta1, eta and sigma still
 * follow the rule. lkatyusha has neither: plain, no guard.
 */
static int eclk_resolve(const ec_job *job, ec_params *p, ec_err *e)
{
    ec_eclk_rule rule = job->eclk_rule < 0 ? EC_ECLK_RULE_DEFAULT
                                           : (ec_eclk_rule)job->eclk_rule;
    double threshold = isnan(job->eclk_guard_threshold)
                           ? EC_ECLK_GUARD_THRESHOLD : job->eclk_guard_threshold;

    if (p->algo != EC_ALGO_ECLK) {
        ec_params_set_eclk(p, EC_ECLK_PLAIN, p->delta);
        return 0;
    }
    if (!ec_eclk_rule_name(rule))
        return ec_err_set(e, EC_EINVAL, "eclk_rule: unknown (%d)", (int)rule);
    if (!(threshold > 1.0 && threshold <= EC_ECLK_GUARD_THRESHOLD_MAX))
        return ec_err_set(e, EC_EINVAL,
                          "eclk_guard_threshold must be in (1, %g] (got %g)",
                          EC_ECLK_GUARD_THRESHOLD_MAX, threshold);
    p->eclk_guard = job->eclk_guard < 0 ? EC_ECLK_GUARD_DEFAULT : job->eclk_guard != 0;
    p->eclk_guard_threshold = threshold;
    /* The adaptive rule's guard watches the objective, at a fixed fraction
     * of the start's excess; the threshold is the gradient guard's. */
    if (rule == EC_ECLK_ADAPTIVE) {
        if (!isnan(job->eclk_guard_threshold))
            return ec_err_set(e, EC_EINVAL,
                              "eclk_guard_threshold: not with eclk_rule adaptive, "
                              "whose guard watches the objective (a rise of %g of "
                              "the start's excess over the best)",
                              EC_ECLK_GUARD_OBJECTIVE);
        p->eclk_guard_threshold = EC_ECLK_GUARD_OBJECTIVE;
    }
    ec_params_set_eclk(p, rule, p->delta);
    return 0;
}

/* EControl's eta: the job's, in [0, 1], or EC_ECONTROL_ETA_PER_DELTA
 * delta; given for another algorithm it is refused. */
static int econtrol_resolve(const ec_job *job, ec_params *p, ec_err *e)
{
    if (p->algo != EC_ALGO_ECONTROL) {
        if (!isnan(job->econtrol_eta))
            return ec_err_set(e, EC_EINVAL,
                              "econtrol_eta applies to econtrol only "
                              "(algorithm %s)", ec_algo_name(p->algo));
        return 0;
    }
    p->econtrol_eta = isnan(job->econtrol_eta)
                          ? EC_ECONTROL_ETA_PER_DELTA * p->delta
                          : job->econtrol_eta;
    if (!(p->econtrol_eta >= 0.0 && p->econtrol_eta <= 1.0))
        return ec_err_set(e, EC_EINVAL,
                          "econtrol_eta must be in [0, 1] (got %g)",
                          p->econtrol_eta);
    return 0;
}

const char *ec_algo_partial_names(char *buf, size_t len)
{
    size_t used = 0;

    if (len)
        buf[0] = '\0';
    for (int a = 0; a < EC_ALGO_COUNT; a++) {
        const ec_algo_info *ai = ec_algo_info_of((ec_algo_id)a);
        int w;

        if (!ai->partial)
            continue;
        w = snprintf(buf + used, len > used ? len - used : 0, "%s%s",
                     used ? ", " : "", ai->name);
        if (w > 0)
            used += (size_t)w;
    }
    return buf;
}

const char *ec_algo_down_names(char *buf, size_t len)
{
    size_t used = 0;

    if (len)
        buf[0] = '\0';
    for (int a = 0; a < EC_ALGO_COUNT; a++) {
        const ec_algo_info *ai = ec_algo_info_of((ec_algo_id)a);
        int w;

        if (!ai->down)
            continue;
        w = snprintf(buf + used, len > used ? len - used : 0, "%s%s",
                     used ? ", " : "", ai->name);
        if (w > 0)
            used += (size_t)w;
    }
    return buf;
}

const char *ec_algo_down_check(ec_algo_id a, ec_comp_type t, char *buf,
                               unsigned buflen)
{
    const ec_algo_info *ai = ec_algo_info_of(a);
    char names[128];

    if (!ai || t == EC_COMP_NONE)
        return NULL;
    if (!ai->down) {
        snprintf(buf, buflen, "%s broadcasts its model uncompressed (its "
                              "theory does not admit EF21-P's compressed "
                              "broadcast), so compressor_down must be none "
                              "(got %s); the methods that admit it: %s",
                 ai->name, ec_comp_name(t),
                 ec_algo_down_names(names, sizeof names));
        return "compressor_down";
    }
    if (!ec_comp_info_of(t) || !ec_comp_info_of(t)->broadcast) {
        char comps[64];

        snprintf(buf, buflen, "must be one of %s (got %s): EF21-P "
                              "compresses the broadcast with a contractive "
                              "sparsifier",
                 ec_comp_broadcast_names(comps, sizeof comps), ec_comp_name(t));
        return "compressor_down.type";
    }
    return NULL;
}

const char *ec_algo_participation_check(ec_algo_id a, double participation,
                                        char *buf, unsigned buflen)
{
    const ec_algo_info *ai = ec_algo_info_of(a);
    char names[128];

    if (!ai || isnan(participation) || participation >= 1.0 ||
        ai->partial)
        return NULL;
    snprintf(buf, buflen, "%s needs every worker in every round (its "
                          "theory does not admit partial participation), so "
                          "participation must be 1 (got %g); the methods "
                          "that admit it: %s",
             ai->name, participation,
             ec_algo_partial_names(names, sizeof names));
    return "participation";
}

const char *ec_job_general_convex_check(const ec_job *job, uint64_t d,
                                        char *buf, unsigned buflen)
{
    const ec_algo_info *ai = ec_algo_info_of(job->algorithm);

    if (isnan(job->lambda2) || job->lambda2 != 0.0)
        return NULL;
    if (job->loss != EC_LOSS_SQUARED) {
        snprintf(buf, buflen, "0 is taken for the squared loss only: a %s "
                              "problem without an l2 term has a minimizer "
                              "only on data that are not separable, which "
                              "is not certified here; give lambda2 > 0",
                 ec_loss_name(job->loss));
        return "lambda2";
    }
    if (job->lambda1 != 0.0) {
        snprintf(buf, buflen, "0 needs lambda1 = 0 (got %g): P* with an l1 "
                              "term is found by accelerated proximal "
                              "gradient, whose certificate needs strong "
                              "convexity",
                 job->lambda1);
        return "lambda2";
    }
    if (d > EC_GENERAL_CONVEX_MAX_D) {
        snprintf(buf, buflen, "0 needs d <= %u (the dataset has d = %llu): "
                              "P* is certified by dense Newton steps",
                 EC_GENERAL_CONVEX_MAX_D, (unsigned long long)d);
        return "lambda2";
    }
    if (ai && (ai->needs & EC_NEEDS_MU)) {
        snprintf(buf, buflen, "0 makes mu = 0, and %s's constants are "
                              "computed from the strong convexity mu "
                              "(sigma = mu / L, theta1 = sqrt(2 sigma / 3p)); "
                              "give lambda2 > 0 or a method whose step needs "
                              "no mu",
                 ai->name);
        return "lambda2";
    }
    return NULL;
}

int ec_params_resolve(const ec_job *job, const ec_problem *pb, ec_params *out,
                      ec_err *e)
{
    ec_params *p = out;
    uint32_t d = pb->d, m = UINT32_MAX;
    const char *msg, *field;
    char buf[384];

    memset(p, 0, sizeof *p);
    p->algo = job->algorithm;
    p->n = pb->n;
    p->d = d;
    p->seed = job->seed;
    if (!ec_algo_name(p->algo))
        return ec_err_set(e, EC_EINVAL, "algorithm: unknown (%d)", p->algo);
    if (pb->mu == 0.0 &&
        (field = ec_job_general_convex_check(job, d, buf, sizeof buf)))
        return ec_err_set(e, EC_EINVAL, "%s: %s", field, buf);
    for (uint32_t t = 0; t < pb->n; t++) {
        uint32_t mt = pb->shards[t].end - pb->shards[t].begin;
        if (mt < m)
            m = mt;
    }
    p->m = m;

    p->comp = job->compressor;
    if (!isnan(job->k_frac)) {
        if (!(job->k_frac > 0.0 && job->k_frac <= 1.0))
            return ec_err_set(e, EC_EINVAL,
                              "compressor.k_frac must be in (0, 1] (got %g)",
                              job->k_frac);
        p->comp.k = (uint32_t)ceil(job->k_frac * d);
        if (p->comp.k < 1)
            p->comp.k = 1;
        if (p->comp.k > d)
            p->comp.k = d;
    }
    if ((field = ec_algo_comp_check(p->algo, p->comp.type, buf, sizeof buf)))
        return ec_err_set(e, EC_EINVAL, "%s: %s", field, buf);
    if ((msg = ec_comp_check(&p->comp, d, buf, sizeof buf)))
        return ec_err_set(e, EC_EINVAL, "%s", msg);
    if (job->batch != EC_JOB_BATCH_FULL && job->batch > m)
        return ec_err_set(e, EC_EINVAL,
                          "batch must be in 1..%u (the smallest shard's "
                          "rows; got %u)",
                          m, job->batch);
    /* "full": batch m, which takes every shard whole (ec_algo_samples_rows). */
    p->batch = job->batch == EC_JOB_BATCH_FULL ? m : job->batch;
    p->delta = ec_comp_delta(&p->comp, d);

    p->shift_comp = ec_shift_comp(&p->comp);
    p->omega = ec_comp_omega(&p->shift_comp, d);
    p->alpha = 1.0 / (1.0 + p->omega);

    p->p = NAN;
    if (has_shared_coin(p->algo) || has_local_refs(p->algo)) {
        if (!isnan(job->p))
            p->p = job->p;
        else if (p->algo == EC_ALGO_ECLK || p->algo == EC_ALGO_EC_LSVRG_QIAN)
            p->p = fmax((double)p->batch / m, p->delta);
        else if (p->algo == EC_ALGO_LKATYUSHA)
            p->p = 1.0;      /* ECLK's rule at delta = 1 */
        else if (is_adiana(p->algo))
            p->p = adiana_p(p->omega, pb->n);
        else
            p->p = (double)p->batch / m;
        if (!(p->p > 0.0 && p->p <= 1.0))
            return ec_err_set(e, EC_EINVAL, "p must be in (0, 1] (got %g)",
                              p->p);
    }

    if (p->algo != EC_ALGO_ECLK &&
        (job->eclk_rule >= 0 || job->eclk_guard >= 0 ||
         !isnan(job->eclk_guard_threshold)))
        return ec_err_set(e, EC_EINVAL,
                          "eclk_rule, eclk_guard and eclk_guard_threshold "
                          "apply to eclk only (algorithm %s)",
                          ec_algo_name(p->algo));
    if (econtrol_resolve(job, p, e) < 0)
        return e ? e->code : EC_EINVAL;
    p->participation = isnan(job->participation) ? 1.0 : job->participation;
    if (!(p->participation > 0.0 && p->participation <= 1.0))
        return ec_err_set(e, EC_EINVAL, "participation must be in (0, 1] "
                                        "(got %g)", p->participation);
    if ((field = ec_algo_participation_check(p->algo, p->participation, buf,
                                             sizeof buf)))
        return ec_err_set(e, EC_EINVAL, "%s: %s", field, buf);
    /* The sample's size; the 1e-9 keeps 0.3 of 10 workers at 3 where the
     * product rounds to 3.0000000000000004. */
    p->participants = (uint32_t)ceil(p->participation * pb->n - 1e-9);
    if (p->participants < 1)
        p->participants = 1;
    if (p->participants > pb->n)
        p->participants = pb->n;
    p->comp_down = job->compressor_down;
    if ((field = ec_algo_down_check(p->algo, p->comp_down.type, buf,
                                    sizeof buf)))
        return ec_err_set(e, EC_EINVAL, "%s: %s", field, buf);
    if (p->comp_down.type != EC_COMP_NONE) {
        if (!isnan(job->k_frac_down)) {
            if (!(job->k_frac_down > 0.0 && job->k_frac_down <= 1.0))
                return ec_err_set(e, EC_EINVAL, "compressor_down.k_frac must "
                                                "be in (0, 1] (got %g)",
                                  job->k_frac_down);
            p->comp_down.k = (uint32_t)ceil(job->k_frac_down * d);
            if (p->comp_down.k < 1)
                p->comp_down.k = 1;
            if (p->comp_down.k > d)
                p->comp_down.k = d;
        }
        if ((msg = ec_comp_check(&p->comp_down, d, buf, sizeof buf)))
            return ec_err_set(e, EC_EINVAL, "compressor_down: %s", msg);
        p->delta_down = ec_comp_delta(&p->comp_down, d);
    } else {
        p->delta_down = 1.0;
    }
    p->down_step_factor = 1.0;
    p->step_factor = 1.0;
    p->step_multiplier = isnan(job->step_multiplier) ? 1.0 : job->step_multiplier;
    if (!(p->step_multiplier > 0.0) || !isfinite(p->step_multiplier))
        return ec_err_set(e, EC_EINVAL, "step_multiplier must be > 0 (got %g)",
                          p->step_multiplier);
    p->smoothness_multiplier = isnan(job->smoothness_multiplier)
                                   ? 1.0 : job->smoothness_multiplier;
    if (!(p->smoothness_multiplier > 0.0) || !isfinite(p->smoothness_multiplier))
        return ec_err_set(e, EC_EINVAL, "smoothness_multiplier must be > 0 (got %g)",
                          p->smoothness_multiplier);
    if (!isnan(job->step_size)) {
        if (!(job->step_size > 0.0) || !isfinite(job->step_size))
            return ec_err_set(e, EC_EINVAL, "step_size must be > 0 (got %g)",
                              job->step_size);
        p->gamma = job->step_size;
        p->step_given = 1;
    }

    switch (p->algo) {
    case EC_ALGO_ECLK:
    case EC_ALGO_LKATYUSHA:
        p->L_eff = p->batch >= m ? pb->L_f : pb->L_f + pb->L / (pb->n * (double)p->batch);
        p->mu = pb->mu;
        p->eclk_c = ECLK_C;
        if (eclk_resolve(job, p, e) < 0)
            return e ? e->code : EC_EINVAL;
        break;
    case EC_ALGO_GD:
    case EC_ALGO_EC_GD:
    case EC_ALGO_EC_GD_DIANA:
        p->theory_step = 1.0 / pb->L_f;
        break;
    case EC_ALGO_SGD:
    case EC_ALGO_EC_SGD:
    case EC_ALGO_EC_LSVRG:
    case EC_ALGO_EC_SGD_DIANA:
    case EC_ALGO_EC_LSVRG_DIANA:
    case EC_ALGO_ECONTROL:
        /* The expected smoothness of the mean of n minibatch gradients,
         * the constant ECLK's step is built from too. */
        p->L_eff = p->batch >= m ? pb->L_f : pb->L_f + pb->L / (pb->n * (double)p->batch);
        p->theory_step = 1.0 / p->L_eff;
        break;
    case EC_ALGO_EC_LSVRG_QIAN:
        /* ECLK's L_eff, and loopless SVRG's 1/(6 L) from it. */
        p->L_eff = p->batch >= m ? pb->L_f : pb->L_f + pb->L / (pb->n * (double)p->batch);
        p->step_divisor = LSVRG_STEP_DIVISOR;
        p->theory_step = 1.0 / (p->step_divisor * p->L_eff);
        break;
    case EC_ALGO_ADIANA:
        adiana_resolve(p, pb);
        break;
    case EC_ALGO_ADEF:
        /* gamma = delta / (2 L_eff): Nesterov's 1/(2 L) shrunk by the
         * contraction, as error feedback's steps are. */
        p->L_eff = p->batch >= m ? pb->L_f : pb->L_f + pb->L / (pb->n * (double)p->batch);
        p->step_divisor = ADEF_STEP_DIVISOR;
        p->theory_step = p->delta / (p->step_divisor * p->L_eff);
        break;
    case EC_ALGO_EF21: {
        double r = sqrt(1.0 - p->delta);
        double theta = 1.0 - r, beta = p->delta < 1.0 ? (1.0 - p->delta) / (1.0 - r) : 0.0;
        /* The theorem's step is far from the largest stable one, and the
         * reference code is always run at a multiple of it. */
        p->step_factor = p->delta < 1.0 ? EF21_STEP_FACTOR : 1.0;
        p->theory_step = p->step_factor /
                         (pb->L_f + pb->L_tilde * sqrt(beta / theta));
        break;
    }
    }
    /* EF21-P: the method's own step times the broadcast's alpha, the step
     * of the rate L/(alpha mu) its theorems give for GD and DIANA
     * (docs/algorithms.md, "Compressed broadcasts: EF21-P"). */
    if (p->comp_down.type != EC_COMP_NONE) {
        p->down_step_factor = p->delta_down;
        p->theory_step *= p->down_step_factor;
    }
    /* A step 1/L seen through L / smoothness_multiplier: for the methods
     * whose step alone derives from L it is the step multiplier's. */
    if (!ec_algo_is(p->algo, EC_FAMILY_KATYUSHA) && !is_adiana(p->algo))
        p->theory_step *= p->smoothness_multiplier;
    /* A constant the problem was not asked for is NaN (ef21's L_tilde
     * when the problem was set up for another algorithm): a run from it
     * would step by NaN. */
    if (!p->step_given && !(p->theory_step > 0.0 && isfinite(p->theory_step)))
        return ec_err_set(e, EC_EINVAL,
                          "%s: the default step is %g: the problem lacks a "
                          "constant the algorithm needs (set it up for %s)",
                          ec_algo_name(p->algo), p->theory_step,
                          ec_algo_name(p->algo));
    if (!p->step_given)
        p->gamma = p->step_multiplier * p->theory_step;
    return 0;
}

/* ---- the replicated model ---------------------------------------------- */

static void draw_coin(ec_model *m)
{
    if (has_shared_coin(m->prm->algo))
        m->coin = ec_rng_uniform(&m->rng) < m->prm->p;
}

/* x = theta1 z + theta2 w + (1 - theta1 - theta2) y; and for ECLK and
 * L-Katyusha with a minibatch the workers' shared dense term gamma
 * lambda2 (x - w) in the same pass. */
static void katyusha_x(ec_model *m)
{
    const ec_params *p = m->prm;
    double t3 = 1.0 - m->theta1 - p->theta2;

    if (m->xw) {
        double gl = m->gamma * m->pb->lambda2;

        for (uint32_t j = 0; j < m->d; j++) {
            m->x[j] = m->theta1 * m->z[j] + p->theta2 * m->w[j] + t3 * m->y[j];
            m->xw[j] = gl * (m->x[j] - m->w[j]);
        }
        return;
    }
    for (uint32_t j = 0; j < m->d; j++)
        m->x[j] = m->theta1 * m->z[j] + p->theta2 * m->w[j] + t3 * m->y[j];
}

/*
 * L-Katyusha's and ECLK's step on a round without the coin, in one pass
 * over d: z' = prox((eta sigma x + z - v - gamma u) / (1 + eta sigma)),
 * y' = x + theta1 (z' - z), and from them the next round's x and gamma
 * lambda2 (x - w) as katyusha_x makes them (w, u and the constants do not
 * move without the coin). Each entry's operations are those of the
 * separate passes in the same order, so the same bits. The separate
 * passes read or write a d-vector 14 to 17 times (17 with an l1 term and
 * the workers' dense term), this one 8 or 9.
 */
static void katyusha_step(ec_model *m, const double *v, double es, double inv)
{
    const ec_params *p = m->prm;
    const double gamma = m->gamma, theta1 = m->theta1, theta2 = p->theta2;
    const double t3 = 1.0 - theta1 - theta2, gl = gamma * m->pb->lambda2;
    const double thr = gamma * m->pb->lambda1 * inv;
    double *restrict x = m->x, *restrict y = m->y, *restrict z = m->z;
    double *restrict xw = m->xw;
    const double *restrict w = m->w, *restrict u = m->u;

    for (uint32_t j = 0; j < m->d; j++) {
        double zn = (es * x[j] + z[j] - v[j] - gamma * u[j]) * inv;
        double yn, xn;

        if (!(thr <= 0.0))          /* as ec_prox_l1 */
            zn = ec_soft_threshold(zn, thr);
        yn = x[j] + theta1 * (zn - z[j]);
        xn = theta1 * zn + theta2 * w[j] + t3 * yn;
        z[j] = zn;
        y[j] = yn;
        x[j] = xn;
        if (xw)
            xw[j] = gl * (xn - w[j]);
    }
}

/* The online rule measures the contraction; with Q = none there is
 * nothing to measure (delta is 1), so nothing is measured or sent. */
static int online(const ec_params *p)
{
    return p->algo == EC_ALGO_ECLK && p->eclk_rule == EC_ECLK_ONLINE &&
           p->comp.type != EC_COMP_NONE;
}

static int guarded(const ec_params *p)
{
    return p->algo == EC_ALGO_ECLK && p->eclk_guard;
}

/* The adaptive rule's guard watches the objective: the workers send f_tau
 * with the init gradient and with every coin round's. */
static int watches_value(const ec_params *p)
{
    return guarded(p) && p->eclk_rule == EC_ECLK_ADAPTIVE;
}

/* Whether the workers send f_tau(y) alone this round: the adaptive rule's
 * guard looks every EC_ECLK_GUARD_VALUE_EVERY rounds even between coin
 * rounds, which come 1/p rounds apart (d/k at rand-k), longer than the
 * plain constants can take to run away. */
static int value_round(const ec_model *m)
{
    return watches_value(m->prm) && m->initialised && !m->coin && m->round > 0 &&
           m->round % EC_ECLK_GUARD_VALUE_EVERY == 0;
}

/* Whether the adaptive rule has fallen back to the online rule's
 * constants: at a restart from the EC_ECLK_GUARD_FALLBACK-th on whose rise
 * was severe (guard_restart). */
static int fallen_back(const ec_model *m)
{
    return watches_value(m->prm) && m->fallback_round > 0;
}

/* Whether the realised contraction is measured now: always under the
 * online rule, and under the adaptive rule once it has fallen back
 * (docs/algorithms.md, "ECLK's guard"). With Q = none there is nothing to
 * measure. */
static int measuring(const ec_params *p, const ec_model *m)
{
    return online(p) || (fallen_back(m) && p->comp.type != EC_COMP_NONE);
}

/* The rule whose constants the model uses: the job's, except that the
 * adaptive rule runs the online rule's once it has fallen back. */
static ec_eclk_rule rule_in_use(const ec_model *m)
{
    return fallen_back(m) ? EC_ECLK_ONLINE : m->prm->eclk_rule;
}

/* The model's constants from a copy of prm with the given contraction and
 * guard factor (which multiplies the inflation). */
static void model_constants(ec_model *m, double delta_eff, double guard)
{
    ec_params q = *m->prm;

    ec_params_set_eclk(&q, rule_in_use(m), delta_eff);
    if (guard != 1.0) {
        q.inflation *= guard;
        q.L_delta = q.inflation * q.L_eff /
                    (q.smoothness_multiplier > 0.0 ? q.smoothness_multiplier : 1.0);
        q.sigma = q.mu / q.L_delta;
        q.theta1 = fmin(sqrt(2.0 * q.sigma / (3.0 * q.p)), 0.5);
        q.eta = q.theta2 / ((1.0 + q.theta2) * q.theta1);
        q.theory_step = q.eta / q.L_delta;
        if (!q.step_given)
            q.gamma = q.step_multiplier * q.theory_step;
    }
    m->gamma = q.gamma;
    m->theta1 = q.theta1;
    m->eta = q.eta;
    m->sigma = q.sigma;
    m->delta_eff = delta_eff;
    m->inflation = q.inflation;
    if (delta_eff < m->delta_min)
        m->delta_min = delta_eff;
    if (delta_eff > m->delta_max)
        m->delta_max = delta_eff;
}

/*
 * The workers of the next round: participants of the n, uniformly without
 * replacement (a partial Fisher-Yates shuffle of 0..n-1 on the model's own
 * generator), so every replica draws the same sample. The init exchange
 * takes every worker; its sample is drawn anyway, for the first round.
 */
static void draw_participants(ec_model *m)
{
    uint32_t n = m->pb->n, r = m->prm->participants;

    for (uint32_t t = 0; t < n; t++)
        m->perm[t] = t;
    for (uint32_t i = 0; i < r; i++) {
        uint32_t j = i + (uint32_t)ec_rng_below(&m->part_rng, n - i);
        uint32_t t = m->perm[i];

        m->perm[i] = m->perm[j];
        m->perm[j] = t;
    }
    memset(m->part, 0, n * sizeof *m->part);
    for (uint32_t i = 0; i < r; i++)
        m->part[m->perm[i]] = 1;
}

int ec_model_participates(const ec_model *m, uint32_t tau)
{
    return !m->part || !m->initialised || m->part[tau];
}

/*
 * d zeros, written. calloc's pages of a large vector are the kernel's
 * shared zero page until written, and on the 2-core VM this project is
 * measured on, sparse reads of such pages (a row's columns of a reference
 * point the coin has not moved yet) measured 100 times slower than of
 * written ones: an evaluation at d = 1e6 took 4 s instead of 40 ms, and
 * an ECLK round at d = 1e6 lost about a third of its time
 * (bench/results/floor.md). explicit_bzero, unlike memset, is not
 * dropped as redundant after calloc.
 */
static double *zeros(uint32_t d)
{
    double *v = calloc(d, sizeof *v);

    if (v)
        explicit_bzero(v, (size_t)d * sizeof *v);
    return v;
}

/*
 * Where the replicated vectors go: on the heap, or carved in order from a
 * region the caller gives (memory the worker processes share), each on a
 * 64-byte boundary. A region too small leaves the vector NULL, which the
 * caller's check reports as out of memory.
 */
struct carver {
    void *region;
    size_t len;
    uint8_t *at;
    size_t left;
};

#define CARVE_ALIGN 64

static size_t carve_size(size_t bytes)
{
    return (bytes + CARVE_ALIGN - 1) / CARVE_ALIGN * CARVE_ALIGN;
}

static void *carve(struct carver *c, size_t bytes)
{
    size_t size = carve_size(bytes);
    void *p;

    if (!c->at || size > c->left)
        return NULL;
    p = c->at;
    memset(p, 0, size);         /* written, for the reason zeros() gives */
    c->at += size;
    c->left -= size;
    return p;
}

static double *replica(struct carver *c, uint32_t d)
{
    return c ? carve(c, (size_t)d * sizeof(double)) : zeros(d);
}

/* Whether the model holds each replicated vector (ec_model_init). */
static int model_has_yz(const ec_params *prm)
{
    return is_katyusha(prm->algo) || is_adiana(prm->algo) || is_adef(prm->algo);
}

static int model_has_w(const ec_params *prm)
{
    return is_katyusha(prm->algo) || is_adiana(prm->algo) ||
           prm->algo == EC_ALGO_EC_LSVRG_QIAN;
}

static int model_has_xw(const ec_params *prm)
{
    return is_katyusha(prm->algo) && ec_algo_samples_rows(prm);
}

static int model_has_part(const ec_problem *pb, const ec_params *prm)
{
    return prm->participants && prm->participants < pb->n;
}

size_t ec_model_shared_bytes(const ec_problem *pb, const ec_params *prm)
{
    size_t vec = carve_size((size_t)pb->d * sizeof(double));
    size_t b = carve_size(sizeof(ec_model)) + 2 * vec;          /* x, u */

    if (model_has_yz(prm))
        b += 2 * vec;
    if (model_has_w(prm))
        b += vec;
    if (model_has_xw(prm))
        b += vec;
    if (model_has_part(pb, prm))
        b += carve_size(pb->n);
    return b;
}

static int model_init(ec_model *m, const ec_problem *pb, const ec_params *prm,
                      struct carver *c, ec_err *e);

int ec_model_init(ec_model *m, const ec_problem *pb, const ec_params *prm,
                  ec_err *e)
{
    return model_init(m, pb, prm, NULL, e);
}

ec_model *ec_model_init_in(void *region, size_t len, const ec_problem *pb,
                           const ec_params *prm, ec_err *e)
{
    size_t head = carve_size(sizeof(ec_model));
    struct carver c = {region, len, (uint8_t *)region + head, len - head};
    ec_model *m = region;

    if (len < ec_model_shared_bytes(pb, prm)) {
        ec_err_set(e, EC_EINVAL, "a region of %zu bytes is too small for the "
                   "model (%zu)", len, ec_model_shared_bytes(pb, prm));
        return NULL;
    }
    if (model_init(m, pb, prm, &c, e) < 0)
        return NULL;
    return m;
}

static int model_init(ec_model *m, const ec_problem *pb, const ec_params *prm,
                      struct carver *c, ec_err *e)
{
    uint32_t d = pb->d;

    memset(m, 0, sizeof *m);
    m->pb = pb;
    m->prm = prm;
    m->d = d;
    if (c) {
        m->region = c->region;
        m->region_len = c->len;
    }
    /* What the workers read: in the region when there is one. */
    m->x = replica(c, d);
    m->u = replica(c, d);
    if (model_has_yz(prm)) {
        m->y = replica(c, d);
        m->z = replica(c, d);
    }
    if (model_has_w(prm))
        m->w = replica(c, d);
    if (model_has_xw(prm))
        m->xw = replica(c, d);
    /* The update's scratch: the model's own, never read by a worker. */
    if (is_katyusha(prm->algo) || is_adiana(prm->algo))
        m->tmp = zeros(d);
    if (guarded(prm)) {
        m->w_best = zeros(d);
        m->u_best = zeros(d);
    }
    if (prm->comp_down.type != EC_COMP_NONE &&
        !(m->x_server = zeros(d))) {
        ec_model_clear(m);
        return ec_err_set(e, EC_ENOMEM, "out of memory for the model (d = %u)", d);
    }
    if (model_has_part(pb, prm)) {
        m->part = c ? carve(c, pb->n) : malloc(pb->n * sizeof *m->part);
        m->perm = malloc(pb->n * sizeof *m->perm);
        if (!m->part || !m->perm) {
            ec_model_clear(m);
            return ec_err_set(e, EC_ENOMEM, "out of memory for the sample "
                                            "of %u workers", pb->n);
        }
    }
    if (!m->x || !m->u || (model_has_yz(prm) && (!m->y || !m->z)) ||
        (model_has_w(prm) && !m->w) ||
        ((is_katyusha(prm->algo) || is_adiana(prm->algo)) && !m->tmp) ||
        (guarded(prm) && (!m->w_best || !m->u_best)) ||
        (is_katyusha(prm->algo) && ec_algo_samples_rows(prm) && !m->xw)) {
        ec_model_clear(m);
        return ec_err_set(e, EC_ENOMEM, "out of memory for the model (d = %u)", d);
    }
    m->gamma = prm->gamma;
    m->theta1 = prm->theta1;
    m->eta = prm->eta;
    m->sigma = prm->sigma;
    m->delta_eff = m->delta_min = m->delta_max = prm->delta_eff;
    m->inflation = prm->inflation;
    m->best_gnorm = INFINITY;
    m->value_start = m->value_best = INFINITY;
    m->guard = 1.0;
    ec_rng_seed(&m->rng, prm->seed, 0xc0171);
    m->initialised = !ec_algo_has_init(prm->algo);
    /* ADIANA starts at x0 = y0 = z0 = w0 with zero shifts, no exchange
     * first: its first round's coin is drawn here. */
    if (is_adiana(prm->algo))
        draw_coin(m);
    /* ADEF starts at A_0 = 0, so a_1 = gamma and y_0 = nu_0 = theta_0 = x0. */
    m->adef_A = 0.0;
    m->adef_a = prm->gamma;
    if (m->part) {
        ec_rng_seed(&m->part_rng, prm->seed, 0x5a3b1e);
        draw_participants(m);
    }
    return 0;
}

/* Frees p unless it lies in the model's region (the caller's). */
static void model_free(const ec_model *m, void *p)
{
    const uint8_t *r = m->region;

    if (r && (const uint8_t *)p >= r && (const uint8_t *)p < r + m->region_len)
        return;
    free(p);
}

void ec_model_clear(ec_model *m)
{
    if (!m)
        return;
    model_free(m, m->x);
    model_free(m, m->y);
    model_free(m, m->z);
    model_free(m, m->w);
    model_free(m, m->u);
    model_free(m, m->xw);
    model_free(m, m->part);
    free(m->tmp);
    free(m->w_best);
    free(m->u_best);
    free(m->perm);
    free(m->x_server);
    memset(m, 0, sizeof *m);
}

void ec_model_eclk_report(const ec_model *m, ec_eclk_report *out)
{
    out->delta_eff = m->delta_eff;
    out->inflation = m->inflation;
    out->delta_min = m->delta_min;
    out->delta_max = m->delta_max;
    out->updates = m->updates;
    out->restarts = m->restarts;
    memcpy(out->restart_rounds, m->restart_rounds, sizeof out->restart_rounds);
}

const double *ec_model_point(const ec_model *m)
{
    if (m->x_server)
        return m->x_server;
    return is_katyusha(m->prm->algo) || is_adiana(m->prm->algo) ? m->y : m->x;
}

/* EF21's next iterate prox(x - gamma g) into out (which may be m->x):
 * the one computation both the workers and the model make. */
static void ef21_next(const ec_model *m, double *out)
{
    const ec_params *p = m->prm;

    for (uint32_t j = 0; j < m->d; j++)
        out[j] = m->x[j] - p->gamma * m->u[j];
    ec_prox_l1(out, m->d, p->gamma * m->pb->lambda1);
}

static double norm2(const double *v, uint32_t d)
{
    double s = 0.0;

    for (uint32_t j = 0; j < d; j++)
        s += v[j] * v[j];
    return s;
}

/* P(x) from the sum over the workers of f_tau(x): their mean and
 * lambda1's term. */
static double objective(const ec_model *m, double sum, const double *x)
{
    double l1 = 0.0;

    for (uint32_t j = 0; j < m->d; j++)
        l1 += fabs(x[j]);
    return sum / m->pb->n + m->pb->lambda1 * l1;
}

/* The adaptive rule's test: P risen above the best snapshot's by more
 * than EC_ECLK_GUARD_OBJECTIVE of P(x0) - best. */
static int value_risen(const ec_model *m, double v)
{
    return v - m->value_best > EC_ECLK_GUARD_OBJECTIVE * (m->value_start - m->value_best);
}

static void guard_restart(ec_model *m, double v);

/*
 * ECLK's guard, on a coin round (w and u were just refreshed): it keeps the
 * best snapshot by ||grad f(w)|| (by P(w) under the adaptive rule) and,
 * when ||grad f(w)|| grows past the threshold times the best (P(w) rises),
 * restarts from it (docs/algorithms.md, "ECLK's guard"). 1 when it
 * restarted.
 */
static int guard_check(ec_model *m, const ec_down *down)
{
    const ec_params *p = m->prm;
    uint32_t d = m->d;

    if (watches_value(p)) {
        /* The adaptive rule's: P(w) against its best, the rise measured
         * in the start's excess over that best. */
        double v;

        if (!down->has_value)
            return 0;
        v = objective(m, down->value, m->w);
        if (v < m->value_best) {
            m->value_best = v;
            memcpy(m->w_best, m->w, d * sizeof *m->w);
            memcpy(m->u_best, m->u, d * sizeof *m->u);
            return 0;
        }
        if (!value_risen(m, v))
            return 0;
        guard_restart(m, v);
        return 1;
    } else {
        double gn = sqrt(norm2(m->u, d));

        if (gn < m->best_gnorm) {
            m->best_gnorm = gn;
            memcpy(m->w_best, m->w, d * sizeof *m->w);
            memcpy(m->u_best, m->u, d * sizeof *m->u);
            return 0;
        }
        if (!(gn > p->eclk_guard_threshold * m->best_gnorm))
            return 0;
    }
    guard_restart(m, NAN);
    return 1;
}

/*
 * Growth the rule did not prevent: back to the best snapshot, with a
 * doubled constant and a fresh estimate. The workers clear their error
 * memories when they see the restart. Under the adaptive rule v is the P
 * that fired it and the plain constants back off by EC_ECLK_GUARD_BACKOFF
 * alone: a transient rise of a run that would converge must cost little.
 * From the EC_ECLK_GUARD_FALLBACK-th restart on, one whose P rose above the
 * best by more than EC_ECLK_GUARD_SEVERE of P(x0) - best (a runaway, not a
 * burst) falls back to the online rule's constants from the nominal delta
 * (the rule that never diverged where it was measured), which any later
 * restart doubles.
 */
static void guard_restart(ec_model *m, double v)
{
    const ec_params *p = m->prm;
    uint32_t d = m->d;

    memcpy(m->w, m->w_best, d * sizeof *m->w);
    memcpy(m->y, m->w_best, d * sizeof *m->y);
    memcpy(m->z, m->w_best, d * sizeof *m->z);
    memcpy(m->u, m->u_best, d * sizeof *m->u);
    if (m->restarts < EC_ECLK_RESTART_ROUNDS_MAX)
        m->restart_rounds[m->restarts] = m->round;
    m->restarts++;
    if (watches_value(p) && !fallen_back(m) && m->restarts >= EC_ECLK_GUARD_FALLBACK &&
        v - m->value_best > EC_ECLK_GUARD_SEVERE * (m->value_start - m->value_best)) {
        m->fallback_round = m->round;
        m->delta_eff = p->delta;
        m->guard = 1.0;
    } else {
        m->guard *= fallen_back(m) || !watches_value(p) ? 2.0 : EC_ECLK_GUARD_BACKOFF;
    }
    m->est_in = m->est_out = 0.0;
    model_constants(m, m->delta_eff, m->guard);
    m->updates++;
}

/*
 * On a coin round: the guard (when on), then the online rule (when it is
 * the rule): the workers' sums since the last coin round give the realised
 * contraction 1 - sum ||e'||^2 / sum ||e + gamma D||^2, and the constants
 * follow it, never below the nominal delta.
 */
static void eclk_coin_update(ec_model *m, const ec_down *down)
{
    const ec_params *p = m->prm;
    /* The adaptive rule measures from the restart where it fell back,
     * whose cleared memories start empty as a run's do. */
    uint64_t since = fallen_back(m) ? m->fallback_round : 0;
    double delta;

    if (guarded(p) && guard_check(m, down))
        return;
    /* The memories start empty: the first 1/delta rounds would flatter the
     * compressor, so they are not counted. */
    if (!measuring(p, m) || !down->has_stats || !(down->ef_in > 0.0) ||
        (double)(m->round - since) * p->delta < 1.0)
        return;
    m->est_in += down->ef_in;
    m->est_out += down->ef_out;
    delta = fmin(fmax(1.0 - m->est_out / m->est_in, p->delta), 1.0);
    model_constants(m, delta, m->guard);
    m->updates++;
}

/*
 * ADEF's server (docs/algorithms.md, "ADEF"): g~ += mean of the compressed
 * differences; g^ = g~ + mean of the error-fed messages;
 * nu' = prox_{a psi}(nu - a g^); theta' = (A theta + a nu')/(A + a); then
 * the next weight, a'^2 = gamma (A' + a'), and y = (A' theta' + a' nu')/(A'
 * + a'), the point the workers take their gradients at.
 */
static void adef_apply(ec_model *m, const ec_down *down)
{
    const ec_params *p = m->prm;
    uint32_t d = m->d;
    double a = m->adef_a, A = m->adef_A, A1 = A + a, g = p->gamma;

    for (uint32_t j = 0; j < d; j++) {
        m->u[j] += down->a[j];
        m->z[j] -= a * (m->u[j] + down->v[j]);
    }
    ec_prox_l1(m->z, d, a * m->pb->lambda1);
    for (uint32_t j = 0; j < d; j++)
        m->x[j] = (A * m->x[j] + a * m->z[j]) / A1;
    m->adef_A = A = A1;
    m->adef_a = a = 0.5 * (g + sqrt(g * g + 4.0 * g * A));
    A1 = A + a;
    for (uint32_t j = 0; j < d; j++)
        m->y[j] = (A * m->x[j] + a * m->z[j]) / A1;
    m->round++;
}
static void model_apply(ec_model *m, const ec_down *down);

void ec_model_apply(ec_model *m, const ec_down *down)
{
    model_apply(m, down);
    if (m->part)
        draw_participants(m);
}

static void model_apply(ec_model *m, const ec_down *down)
{
    const ec_params *p = m->prm;
    const ec_problem *pb = m->pb;
    uint32_t d = m->d;

    if (down->init) {
        /* u = grad f(x0) for L-Katyusha, g = mean g_tau(x0) for EF21. */
        memcpy(m->u, down->a, d * sizeof *m->u);
        m->initialised = 1;
        if (watches_value(p) && down->has_value) {
            /* P(x0): the guard's reference and its first snapshot. */
            m->value_start = m->value_best = objective(m, down->value, m->x);
            memcpy(m->w_best, m->x, d * sizeof *m->w);
            memcpy(m->u_best, m->u, d * sizeof *m->u);
        }
        draw_coin(m);
        if (is_katyusha(p->algo))
            katyusha_x(m);
        /* EF21 takes its first step in round 1, so row 0 is x0. */
        return;
    }

    if (is_katyusha(p->algo)) {
        double es = m->eta * m->sigma, inv = 1.0 / (1.0 + es);
        /* The adaptive rule's look between coin rounds: P(y) of the y
         * the workers took their values at, before this round moves it. */
        double value_y = value_round(m) && down->has_value
                             ? objective(m, down->value, m->y) : NAN;

        if (!m->coin) {
            /* No coin: w, u and the constants stay, so one pass, which
             * also makes the next round's x. A restart by the adaptive
             * rule's look moves w, y, z and the constants: x is then made
             * again from them. */
            katyusha_step(m, down->v, es, inv);
            m->round++;
            if (!isnan(value_y) && value_risen(m, value_y)) {
                guard_restart(m, value_y);
                draw_coin(m);
                katyusha_x(m);
                return;
            }
            draw_coin(m);
            return;
        }
        /* The coin round. z' = prox((eta sigma x + z - v - gamma u) /
         * (1 + eta sigma)) */
        for (uint32_t j = 0; j < d; j++)
            m->tmp[j] = (es * m->x[j] + m->z[j] - down->v[j] -
                         m->gamma * m->u[j]) * inv;
        ec_prox_l1(m->tmp, d, m->gamma * pb->lambda1 * inv);
        /* The coin moves w to the y from before this round; the workers
         * sent grad f_tau at that y, so u follows it. */
        memcpy(m->w, m->y, d * sizeof *m->w);
        memcpy(m->u, down->a, d * sizeof *m->u);
        for (uint32_t j = 0; j < d; j++) {
            m->y[j] = m->x[j] + m->theta1 * (m->tmp[j] - m->z[j]);
            m->z[j] = m->tmp[j];
        }
        m->round++;
        if (online(p) || guarded(p))
            eclk_coin_update(m, down);
        draw_coin(m);
        katyusha_x(m);
        return;
    }

    if (is_adiana(p->algo)) {
        /* g = mean q + h;  y' = prox(x - eta g);  z' = beta z + (1 - beta)
         * x + (gamma/eta)(y' - x);  the coin moves w to the y from before
         * this round;  h += alpha mean of the shifts' messages;  then the
         * next round's x from z', w', y'. */
        double eta = p->gamma, ratio = p->gamma_z / eta, beta = p->beta;

        for (uint32_t j = 0; j < d; j++)
            m->tmp[j] = m->x[j] - eta * (down->v[j] + m->u[j]);
        ec_prox_l1(m->tmp, d, eta * pb->lambda1);
        for (uint32_t j = 0; j < d; j++)
            m->z[j] = beta * m->z[j] + (1.0 - beta) * m->x[j] +
                      ratio * (m->tmp[j] - m->x[j]);
        if (m->coin)
            memcpy(m->w, m->y, d * sizeof *m->w);
        memcpy(m->y, m->tmp, d * sizeof *m->y);
        for (uint32_t j = 0; j < d; j++)
            m->u[j] += p->alpha * down->a[j];
        m->round++;
        draw_coin(m);
        katyusha_x(m);
        return;
    }

    if (p->algo == EC_ALGO_EC_LSVRG_QIAN) {
        /* x' = prox(x - mean q - gamma u); the coin moves w to the x from
         * before this round, whose gradient the workers sent, so u follows
         * it after the step. */
        if (m->coin)
            memcpy(m->w, m->x, d * sizeof *m->w);
        for (uint32_t j = 0; j < d; j++)
            m->x[j] = m->x[j] - down->v[j] - p->gamma * m->u[j];
        ec_prox_l1(m->x, d, p->gamma * pb->lambda1);
        if (m->coin)
            memcpy(m->u, down->a, d * sizeof *m->u);
        m->round++;
        draw_coin(m);
        return;
    }

    if (p->algo == EC_ALGO_ECONTROL) {
        /* h' = h + mean Delta;  x = prox(x - gamma h'). */
        for (uint32_t j = 0; j < d; j++) {
            m->u[j] += down->v[j];
            m->x[j] -= p->gamma * m->u[j];
        }
        ec_prox_l1(m->x, d, p->gamma * pb->lambda1);
        m->round++;
        return;
    }

    if (is_adef(p->algo)) {
        adef_apply(m, down);
        return;
    }

    if (p->comp_down.type != EC_COMP_NONE) {
        /* EF21-P: every party moves its proxy by the broadcast, w += c_t;
         * the coordinator's model takes the server's x_{t+1} as well.
         * DIANA's shifts still travel as their mean. */
        for (uint32_t j = 0; j < d; j++)
            m->x[j] += down->v[j];
        if (is_diana(p->algo))
            for (uint32_t j = 0; j < d; j++)
                m->u[j] += p->alpha * down->a[j];
        if (down->primal)
            memcpy(m->x_server, down->x_next, d * sizeof *m->x_server);
        m->round++;
        return;
    }

    if (p->algo == EC_ALGO_EF21) {
        /* x = prox(x - gamma g), as every worker computed it; g += mean c,
         * the c's being taken at that new x. */
        ef21_next(m, m->x);
        for (uint32_t j = 0; j < d; j++)
            m->u[j] += down->v[j];
        m->round++;
        return;
    } else {
        /* The workers sent gamma-scaled messages: x = prox(x - mean q). */
        for (uint32_t j = 0; j < d; j++)
            m->x[j] -= down->v[j];
        if (is_diana(p->algo)) {
            for (uint32_t j = 0; j < d; j++)
                m->u[j] += p->alpha * down->a[j];
        }
    }
    ec_prox_l1(m->x, d, p->gamma * pb->lambda1);
    m->round++;
}

/* ---- messages ------------------------------------------------------------ */

int ec_up_init(ec_up *up, uint32_t d)
{
    memset(up, 0, sizeof *up);
    if (ec_msg_init(&up->q, d) < 0 || ec_msg_init(&up->extra, d) < 0) {
        ec_up_clear(up);
        return EC_ENOMEM;
    }
    return 0;
}

void ec_up_clear(ec_up *up)
{
    if (!up)
        return;
    ec_msg_clear(&up->q);
    ec_msg_clear(&up->extra);
    memset(up, 0, sizeof *up);
}

uint64_t ec_up_bits(const ec_up *up)
{
    uint64_t b = up->q.value_bits + up->q.index_bits;

    if (up->has_extra)
        b += up->extra.value_bits + up->extra.index_bits;
    return b + (up->has_stats ? 128 : 0) + (up->has_value ? 64 : 0);
}

uint64_t ec_up_paper_bits(const ec_up *up)
{
    return up->q.paper_bits + (up->has_extra ? up->extra.paper_bits : 0) +
           (up->has_stats ? 128 : 0) + (up->has_value ? 64 : 0);
}

int ec_down_init(ec_down *down, uint32_t d)
{
    memset(down, 0, sizeof *down);
    down->v = zeros(d);
    down->a = zeros(d);
    if (!down->v || !down->a) {
        ec_down_clear(down);
        return EC_ENOMEM;
    }
    return 0;
}

int ec_down_primal_init(ec_down *down, const ec_params *prm, ec_err *e)
{
    if (prm->comp_down.type == EC_COMP_NONE)
        return 0;
    if (!(down->down_comp = ec_compressor_new(&prm->comp_down, prm->d, e)))
        return e ? e->code : EC_ENOMEM;
    if (ec_msg_init(&down->down_msg, prm->d) < 0 ||
        !(down->x_next = zeros(prm->d)))
        return ec_err_set(e, EC_ENOMEM, "out of memory for the broadcast "
                                        "(d = %u)", prm->d);
    /* A stream of its own: rand-k's coordinates are the coordinator's
     * draw, and no worker's generator moves. */
    ec_rng_seed(&down->down_rng, prm->seed, 0xef21d0);
    return 0;
}

void ec_down_clear(ec_down *down)
{
    if (!down)
        return;
    ec_compressor_free(down->down_comp);
    ec_msg_clear(&down->down_msg);
    free(down->x_next);
    free(down->v);
    free(down->a);
    memset(down, 0, sizeof *down);
}

/* A dense message: all d coordinates of x, 64 bits each; x may be
 * out->val itself, the values made in place. The fields type none does
 * not use are cleared, as ec_compress would, so the message is what a
 * wire decoder rebuilds from it. Its idx is left unwritten: what reads a
 * dense uplink (the wire's encoder, ec_msg_axpy) takes its entries as
 * 0..d-1, and a worker process then never touches the d indices. */
static void msg_dense(ec_msg *out, const double *x, uint32_t d)
{
    out->type = EC_COMP_NONE;
    out->d = d;
    out->nnz = d;
    if (x != out->val)
        memcpy(out->val, x, (size_t)d * sizeof *x);
    out->seed = 0;
    out->norm = out->scale = 0.0;
    out->s = 0;
    ec_msg_count_bits(out);
}

/* ---- workers ------------------------------------------------------------- */

int ec_worker_init(ec_worker *w, const ec_problem *pb, const ec_params *prm,
                   uint32_t tau, ec_err *e)
{
    return ec_worker_init_sharing(w, pb, prm, tau, NULL, e);
}

int ec_worker_init_sharing(ec_worker *w, const ec_problem *pb,
                           const ec_params *prm, uint32_t tau,
                           const ec_worker *owner, ec_err *e)
{
    uint32_t d = pb->d;
    ec_algo_id a = prm->algo;

    memset(w, 0, sizeof *w);
    w->pb = pb;
    w->prm = prm;
    w->tau = tau;
    ec_rng_seed(&w->rng, prm->seed, 1000 + (uint64_t)tau);
    if (owner) {
        /* Scratch only lives within one step, and a process steps its
         * workers one after the other. */
        w->borrowed = 1;
        w->comp = owner->comp;
        w->shift_comp = owner->shift_comp;
        w->buf = owner->buf;
        w->buf2 = owner->buf2;
    } else {
        if (!(w->comp = ec_compressor_new(&prm->comp, d, e)))
            goto fail;
        if ((is_diana(a) || is_adiana(a)) &&
            !(w->shift_comp = ec_compressor_new(&prm->shift_comp, d, e)))
            goto fail;
        /* Scratch, written before it is read: left to the kernel until
         * a step uses it, so a process whose steps never do (ECLK with a
         * minibatch) holds none of it. */
        w->buf = calloc(d, sizeof *w->buf);
        w->buf2 = calloc(d, sizeof *w->buf2);
        if (!w->buf || !w->buf2)
            goto nomem;
    }
    w->e = zeros(d);
    w->rows = calloc(prm->batch, sizeof *w->rows);
    if (!w->e || !w->rows)
        goto nomem;
    if (is_diana(a) || is_adiana(a) || a == EC_ALGO_EF21 ||
        a == EC_ALGO_ECONTROL || is_adef(a)) {
        if (!(w->h = zeros(d)))
            goto nomem;
    }
    if (has_local_refs(a)) {
        w->w_local = zeros(d);
        w->mu_local = zeros(d);
        if (!w->w_local || !w->mu_local)
            goto nomem;
        /* w_tau = x0 = 0 and its full local gradient: local work, no message. */
        ec_shard_grad(pb, tau, w->w_local, w->mu_local);
    }
    return 0;
nomem:
    ec_err_set(e, EC_ENOMEM, "out of memory for worker %u", tau);
fail:
    ec_worker_clear(w);
    return e ? e->code : EC_ENOMEM;
}

void ec_worker_clear(ec_worker *w)
{
    if (!w)
        return;
    if (!w->borrowed) {
        ec_compressor_free(w->comp);
        ec_compressor_free(w->shift_comp);
        free(w->buf);
        free(w->buf2);
    }
    free(w->e);
    free(w->h);
    free(w->w_local);
    free(w->mu_local);
    free(w->rows);
    memset(w, 0, sizeof *w);
}

int ec_workers_new(ec_worker **out, const ec_problem *pb,
                   const ec_params *prm, uint32_t first, uint32_t count,
                   ec_err *e)
{
    ec_worker *w = calloc(count, sizeof *w);
    int rc;

    *out = NULL;
    if (!w)
        return ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", count);
    for (uint32_t i = 0; i < count; i++) {
        if ((rc = ec_worker_init_sharing(&w[i], pb, prm, first + i,
                                         i ? &w[0] : NULL, e)) < 0) {
            ec_workers_free(w, count);
            return rc;
        }
    }
    *out = w;
    return 0;
}

/* Borrowers go first: the owner's compressors outlive them. */
void ec_workers_free(ec_worker *w, uint32_t count)
{
    for (uint32_t i = count; w && i-- > 0;)
        ec_worker_clear(&w[i]);
    free(w);
}

/* Whether the workers sample a minibatch of rows (else the whole shard). */
int ec_algo_samples_rows(const ec_params *p)
{
    return !ec_algo_full_local(p->algo) && p->batch < p->m;
}

/* One row of the worker's shard, uniformly, from generator r. */
static uint32_t draw_row(const ec_worker *w, ec_rng *r)
{
    const ec_shard *sh = &w->pb->shards[w->tau];

    return sh->begin + (uint32_t)ec_rng_below(r, sh->end - sh->begin);
}

/* Draws the minibatch: batch rows of the shard, uniformly with replacement. */
static void draw_rows(ec_worker *w)
{
    for (uint32_t r = 0; r < w->prm->batch; r++)
        w->rows[r] = draw_row(w, &w->rng);
}

/*
 * The rows the next draw_rows will most likely pick: the generator's next
 * draws, on a copy. When other draws come first the guess is wrong, which
 * costs only the wasted hint.
 */
static void prefetch_next_rows(const ec_worker *w)
{
    ec_rng peek = w->rng;

    for (uint32_t r = 0; r < w->prm->batch && r < 8; r++)
        ec_problem_prefetch_row(w->pb, draw_row(w, &peek));
}

/* The worker's gradient estimate at x (or the difference at x and at ref). */
static void local_grad(ec_worker *w, const double *x, const double *ref,
                       double *g)
{
    const ec_problem *pb = w->pb;

    if (!ec_algo_samples_rows(w->prm)) {
        ec_shard_grad(pb, w->tau, x, g);
        if (ref) {
            double *t = w->buf2;
            ec_shard_grad(pb, w->tau, ref, t);
            for (uint32_t j = 0; j < pb->d; j++)
                g[j] -= t[j];
        }
        return;
    }
    draw_rows(w);
    ec_shard_grad_rows(pb, w->tau, w->rows, w->prm->batch, x, ref, g);
}

/* q = Q(e); e = e - q: the second half of error feedback. */
static void error_feedback_send(ec_worker *w, ec_msg *q)
{
    ec_compress(w->comp, w->e, &w->rng, q);
    for (uint32_t i = 0; i < q->nnz; i++)
        w->e[q->idx[i]] -= q->val[i];
}

/*
 * Error feedback: t = e + gamma g;  q = Q(t);  e = t - q.
 * With Q = none, t is exactly gamma g and e stays exactly zero.
 */
static void error_feedback(ec_worker *w, const double *g, double gamma,
                           ec_msg *q)
{
    uint32_t d = w->pb->d;

    for (uint32_t j = 0; j < d; j++)
        w->e[j] += gamma * g[j];
    error_feedback_send(w, q);
}

/* ECLK's error feedback, also summing ||e + gamma D||^2 and ||e'||^2 for
 * the online rule. */
static void error_feedback_measured(ec_worker *w, const double *g,
                                    double gamma, ec_msg *q)
{
    uint32_t d = w->pb->d;
    double in = 0.0, out = 0.0;

    for (uint32_t j = 0; j < d; j++) {
        w->e[j] += gamma * g[j];
        in += w->e[j] * w->e[j];
    }
    ec_compress(w->comp, w->e, &w->rng, q);
    for (uint32_t i = 0; i < q->nnz; i++)
        w->e[q->idx[i]] -= q->val[i];
    for (uint32_t j = 0; j < d; j++)
        out += w->e[j] * w->e[j];
    w->ef_in += in;
    w->ef_out += out;
}

/*
 * The entries of a pass over the error memory that top-k takes in one
 * piece while they are still in the first-level cache (16 KiB).
 */
#define FEED_BLOCK 2048u

/* e[b..end) += xw[b..end), and when sum is not NULL each e_j^2 after it
 * added to *sum in index order. */
static void add_block(double *restrict e, const double *restrict xw,
                      uint32_t b, uint32_t end, double *sum)
{
    if (!sum) {
        for (uint32_t j = b; j < end; j++)
            e[j] += xw[j];
        return;
    }
    {
        double s = *sum;

        for (uint32_t j = b; j < end; j++) {
            double a = e[j] + xw[j];

            e[j] = a;
            s += a * a;
        }
        *sum = s;
    }
}

/*
 * e += xw, summing ||e||^2 after it when sum is not NULL, and q = Q(e):
 * where the compressor takes its input in pieces (top-k by the filter),
 * each block of e goes to it as soon as it is made, so e is read once, not
 * twice; else Q reads e afterwards. The same sum and the same q either way.
 */
static void add_and_compress(ec_worker *w, const double *xw, double *sum,
                             ec_msg *q)
{
    uint32_t d = w->pb->d;
    double *e = w->e;
    int feed = ec_compress_feeds(w->comp);

    if (sum)
        *sum = 0.0;
    if (feed)
        ec_compress_feed_begin_hinted(w->comp, &w->topk_hint);
    for (uint32_t b = 0; b < d; b += FEED_BLOCK) {
        uint32_t end = d - b < FEED_BLOCK ? d : b + FEED_BLOCK;

        add_block(e, xw, b, end, sum);
        if (feed)
            ec_compress_feed(w->comp, e, b, end);
    }
    if (feed)
        ec_compress_feed_end(w->comp, e, q);
    else
        ec_compress(w->comp, e, &w->rng, q);
}

/*
 * ECLK's error feedback with a minibatch, fused: e += gamma D, D's rows
 * part where the rows have entries and its dense part gamma lambda2 (x -
 * w) from the model (m->xw, the same for every worker), in one pass over e
 * that also sums ||e + gamma D||^2 and feeds top-k as it goes; then e -=
 * q, ||e'||^2 from the sum by the entries q changed when q is sparse. Two
 * passes over d (read and write e, read xw) where the unfused path makes
 * eight; the sums differ from it only in rounding.
 */
static void eclk_feedback_rows(ec_worker *w, const ec_model *m, int measure, ec_msg *q)
{
    const ec_problem *pb = w->pb;
    uint32_t d = pb->d;
    double in = 0.0, out = 0.0;

    draw_rows(w);
    ec_shard_grad_rows_sparse_add(pb, w->tau, w->rows, w->prm->batch, m->x, m->w, m->gamma,
                                  w->e);
    add_and_compress(w, m->xw, measure ? &in : NULL, q);
    if (!measure) {
        for (uint32_t i = 0; i < q->nnz; i++)
            w->e[q->idx[i]] -= q->val[i];
        return;
    }
    if (q->nnz < d / 4) {
        /* q's indices are distinct: the sum changes by each one's terms */
        out = in;
        for (uint32_t i = 0; i < q->nnz; i++) {
            double *ei = &w->e[q->idx[i]], before = *ei * *ei;

            *ei -= q->val[i];
            out += *ei * *ei - before;
        }
        out = fmax(out, 0.0);
    } else {
        for (uint32_t i = 0; i < q->nnz; i++)
            w->e[q->idx[i]] -= q->val[i];
        for (uint32_t j = 0; j < d; j++)
            out += w->e[j] * w->e[j];
    }
    w->ef_in += in;
    w->ef_out += out;
}

/* Gorbunov et al.'s loopless SVRG estimator into g:
 * grad f_S(x) - grad f_S(w_tau) + grad f^(tau)(w_tau). */
static void lsvrg_grad(ec_worker *w, const double *x, double *g)
{
    local_grad(w, x, w->w_local, g);
    for (uint32_t j = 0; j < w->pb->d; j++)
        g[j] += w->mu_local[j];
}

/* After the round's messages: the worker's own coin of probability p
 * moves w_tau to x (the x the round's gradients were taken at) and takes
 * its full local gradient there; the uplink flags it, for the count. */
static void lsvrg_refresh(ec_worker *w, const double *x, ec_up *up)
{
    w->refreshed = ec_rng_uniform(&w->rng) < w->prm->p;
    up->refreshed = w->refreshed;
    if (w->refreshed) {
        memcpy(w->w_local, x, w->pb->d * sizeof *x);
        ec_shard_grad(w->pb, w->tau, w->w_local, w->mu_local);
    }
}

/*
 * ADEF's worker (docs/algorithms.md, "ADEF"), g its gradient at y:
 * D~ = Q(g - g~_tau), sent as extra, and g~_tau += D~; then
 * delta = g - g~_tau - e/a, D = Q(delta), sent as q, and e = a (D - delta),
 * a = a_{t+1} the round's weight. The difference's compressor draws first.
 */
static void adef_worker(ec_worker *w, const ec_model *m, double *g, ec_up *up)
{
    uint32_t d = w->pb->d;
    double *t = w->buf2, a = m->adef_a;

    local_grad(w, m->y, NULL, g);
    for (uint32_t j = 0; j < d; j++)
        t[j] = g[j] - w->h[j];
    ec_compress(w->comp, t, &w->rng, &up->extra);
    up->has_extra = 1;
    ec_msg_axpy(&up->extra, 1.0, w->h);
    for (uint32_t j = 0; j < d; j++)
        t[j] = g[j] - w->h[j] - w->e[j] / a;
    ec_compress(w->comp, t, &w->rng, &up->q);
    for (uint32_t j = 0; j < d; j++)
        w->e[j] = -a * t[j];
    ec_msg_axpy(&up->q, a, w->e);
}

/*
 * A worker's step is mostly element-wise passes over d (the error memory,
 * the shifts, the gradient): the AVX2 clone (ecopt/clones.h) takes them
 * four doubles at a time, with the same bits.
 */
EC_AVX2_CLONES
void ec_worker_step(ec_worker *w, const ec_model *m, ec_up *up)
{
    const ec_params *p = w->prm;
    const ec_problem *pb = w->pb;
    uint32_t d = pb->d;
    double *g = w->buf;

    up->has_extra = 0;
    up->has_stats = 0;
    up->has_value = 0;
    up->value = 0.0;
    up->refreshed = 0;
    up->ef_in = up->ef_out = 0.0;
    up->q.nnz = 0;
    up->q.value_bits = up->q.index_bits = up->q.paper_bits = 0;
    if (!m->initialised) {
        /* The init exchange: the full local gradient at x0, uncompressed,
         * made in the message itself (no scratch vector: a process whose
         * steps need none then holds none). */
        ec_shard_grad(pb, w->tau, m->x, up->extra.val);
        if (p->algo == EC_ALGO_EF21 || p->algo == EC_ALGO_ECONTROL)
            memcpy(w->h, up->extra.val, d * sizeof *w->h);
        msg_dense(&up->extra, up->extra.val, d);
        up->has_extra = 1;
        if (watches_value(p)) {
            up->has_value = 1;
            up->value = ec_shard_value(pb, w->tau, m->x);
        }
        return;
    }

    switch (p->algo) {
    case EC_ALGO_ECLK:
        if (w->restarts != m->restarts) {
            /* The model restarted from its best snapshot: so does the
             * error memory. */
            memset(w->e, 0, d * sizeof *w->e);
            w->ef_in = w->ef_out = 0.0;
            w->restarts = m->restarts;
        }
        if (m->xw) {
            eclk_feedback_rows(w, m, measuring(p, m), &up->q);
            break;
        }
        local_grad(w, m->x, m->w, g);          /* D = grad_S(x) - grad_S(w) */
        if (measuring(p, m))
            error_feedback_measured(w, g, m->gamma, &up->q);
        else
            error_feedback(w, g, m->gamma, &up->q);
        break;
    case EC_ALGO_LKATYUSHA:
        if (m->xw) {
            /* gamma D as ECLK's error memory holds it with Q = none (where
             * e is 0 before and after), so that ECLK with none is this
             * method bit for bit. */
            memset(g, 0, d * sizeof *g);
            draw_rows(w);
            ec_shard_grad_rows_sparse_add(pb, w->tau, w->rows, p->batch, m->x, m->w,
                                          m->gamma, g);
            for (uint32_t j = 0; j < d; j++)
                g[j] += m->xw[j];
            msg_dense(&up->q, g, d);
            break;
        }
        local_grad(w, m->x, m->w, g);
        for (uint32_t j = 0; j < d; j++)
            g[j] *= m->gamma;
        msg_dense(&up->q, g, d);
        break;
    case EC_ALGO_GD:
    case EC_ALGO_SGD:
    case EC_ALGO_EC_GD:
    case EC_ALGO_EC_SGD:
        local_grad(w, m->x, NULL, g);
        error_feedback(w, g, p->gamma, &up->q);
        break;
    case EC_ALGO_EC_LSVRG:
        lsvrg_grad(w, m->x, g);
        error_feedback(w, g, p->gamma, &up->q);
        lsvrg_refresh(w, m->x, up);
        break;
    case EC_ALGO_EC_SGD_DIANA:
    case EC_ALGO_EC_GD_DIANA:
    case EC_ALGO_EC_LSVRG_DIANA:
        /* g_hat: a minibatch's or the shard's gradient, or for
         * ec-lsvrg-diana the loopless SVRG estimator at w_tau. */
        if (p->algo == EC_ALGO_EC_LSVRG_DIANA)
            lsvrg_grad(w, m->x, g);
        else
            local_grad(w, m->x, NULL, g);
        /* One pass: buf2 = g_hat - h_tau, and the error memory takes
         * gamma (g_hat - h_tau + h), each entry's operations in the same
         * order as in separate passes, so the same bits. */
        {
            double *restrict b = w->buf2, *restrict ef = w->e;
            const double *restrict h = w->h, *restrict u = m->u;
            const double gamma = p->gamma;

            for (uint32_t j = 0; j < d; j++) {
                double t = g[j] - h[j];

                b[j] = t;
                ef[j] += gamma * (t + u[j]);
            }
        }
        /* The shift's compressor first: it draws from the generator
         * before the message's does. */
        ec_compress(w->shift_comp, w->buf2, &w->rng, &up->extra);
        up->has_extra = 1;
        error_feedback_send(w, &up->q);
        ec_msg_axpy(&up->extra, p->alpha, w->h);
        if (p->algo == EC_ALGO_EC_LSVRG_DIANA)
            lsvrg_refresh(w, m->x, up);
        break;
    case EC_ALGO_EF21:
        /* c = Q(grad f_tau(x') - g_tau) at the x' = prox(x - gamma g) the
         * model moves to as it applies this round. */
        ef21_next(m, w->buf2);
        ec_shard_grad(pb, w->tau, w->buf2, g);
        for (uint32_t j = 0; j < d; j++)
            g[j] -= w->h[j];
        ec_compress(w->comp, g, &w->rng, &up->q);
        ec_msg_axpy(&up->q, 1.0, w->h);
        break;
    case EC_ALGO_EC_LSVRG_QIAN:
        /* As ECLK: only the difference D travels compressed; the
         * snapshot's gradient u is known to every party. */
        local_grad(w, m->x, m->w, g);          /* D = grad_S(x) - grad_S(w) */
        error_feedback(w, g, p->gamma, &up->q);
        break;
    case EC_ALGO_ECONTROL:
        /* t = g - h_tau;  Delta = Q(eta e + t);  e += t - Delta;
         * h_tau += Delta;  send Delta. */
        local_grad(w, m->x, NULL, g);
        {
            double *restrict b = w->buf2, *restrict ef = w->e;
            const double eta = p->econtrol_eta;

            for (uint32_t j = 0; j < d; j++) {
                g[j] -= w->h[j];
                b[j] = eta * ef[j] + g[j];
                ef[j] += g[j];
            }
        }
        ec_compress(w->comp, w->buf2, &w->rng, &up->q);
        for (uint32_t i = 0; i < up->q.nnz; i++)
            w->e[up->q.idx[i]] -= up->q.val[i];
        ec_msg_axpy(&up->q, 1.0, w->h);
        break;
    case EC_ALGO_ADIANA:
        /* q = C(grad f_tau(x) - h_tau), then the shift's message
         * C(grad f_tau(w) - h_tau), in that order from the generator;
         * h_tau += alpha times the second. */
        ec_shard_grad(pb, w->tau, m->x, g);
        for (uint32_t j = 0; j < d; j++)
            g[j] -= w->h[j];
        ec_compress(w->shift_comp, g, &w->rng, &up->q);
        ec_shard_grad(pb, w->tau, m->w, w->buf2);
        for (uint32_t j = 0; j < d; j++)
            w->buf2[j] -= w->h[j];
        ec_compress(w->shift_comp, w->buf2, &w->rng, &up->extra);
        up->has_extra = 1;
        ec_msg_axpy(&up->extra, p->alpha, w->h);
        break;
    case EC_ALGO_ADEF:
        adef_worker(w, m, g, up);
        break;
    }
    /* The shared coin: send grad f_tau at the point that becomes w (y for
     * L-Katyusha, x for EC-LSVRG). */
    if (sends_snapshot(p->algo) && m->coin) {
        ec_shard_grad(pb, w->tau, is_katyusha(p->algo) ? m->y : m->x,
                      up->extra.val);
        msg_dense(&up->extra, up->extra.val, d);
        up->has_extra = 1;
        if (measuring(p, m)) {
            up->has_stats = 1;
            up->ef_in = w->ef_in;
            up->ef_out = w->ef_out;
            w->ef_in = w->ef_out = 0.0;
        }
        if (watches_value(p)) {
            up->has_value = 1;
            up->value = ec_shard_value(pb, w->tau, m->y);
        }
    } else if (p->algo == EC_ALGO_ECLK && value_round(m)) {
        up->has_value = 1;
        up->value = ec_shard_value(pb, w->tau, m->y);
    }
    if (ec_algo_samples_rows(p))
        prefetch_next_rows(w);
}

/* ---- the server ---------------------------------------------------------- */

static uint64_t ceil_log2(uint64_t v)
{
    uint64_t b = 0;

    while (((uint64_t)1 << b) < v)
        b++;
    return b;
}

/* Bits to broadcast a d-vector: sparse (index + value) or dense. */
static void count_broadcast(const double *v, uint32_t d, uint64_t *bits,
                            uint64_t *paper)
{
    uint64_t nnz = 0, sparse, dense = 64ull * d;

    for (uint32_t j = 0; j < d; j++)
        nnz += v[j] != 0.0;
    sparse = nnz * (64 + ceil_log2(d));
    *bits += sparse < dense ? sparse : dense;
    *paper += 64 * (sparse < dense ? nnz : d);
}

static uint64_t shard_rows(const ec_problem *pb, uint32_t tau)
{
    return pb->shards[tau].end - pb->shards[tau].begin;
}

uint64_t ec_round_grads(const ec_model *m)
{
    const ec_params *p = m->prm;
    const ec_problem *pb = m->pb;
    const ec_algo_info *ai = ec_algo_info_of(p->algo);
    uint64_t total = 0;

    for (uint32_t t = 0; t < pb->n; t++) {
        uint64_t mt = shard_rows(pb, t), one = ec_algo_samples_rows(p) ? p->batch : mt;

        if (!m->initialised) {
            total += ai->has_init ? mt : 0;       /* the gradient at x0 */
            continue;
        }
        if (!ec_model_participates(m, t))
            continue;
        switch (ai->family) {
        case EC_FAMILY_KATYUSHA:      /* at x and at w; the coin's at y */
            total += 2 * one + (m->coin ? mt : 0);
            break;
        case EC_FAMILY_LSVRG:         /* at x and at w_tau */
            total += 2 * one;
            break;
        case EC_FAMILY_SGD:
            total += one;
            break;
        case EC_FAMILY_DIANA:         /* ec-lsvrg-diana: at x and at w_tau */
            total += has_local_refs(p->algo) ? 2 * one : one;
            break;
        case EC_FAMILY_EF21:          /* the whole shard at x' */
            total += mt;
            break;
        case EC_FAMILY_ADIANA:        /* the whole shard at x and at w */
            total += 2 * mt;
            break;
        case EC_FAMILY_ECONTROL:      /* the minibatch at x */
        case EC_FAMILY_ADEF:          /* at y */
            total += one;
            break;
        }
    }
    return total;
}

uint64_t ec_setup_grads(const ec_problem *pb, const ec_params *prm)
{
    return has_local_refs(prm->algo) ? pb->ds->n_rows : 0;
}

void ec_server_reduce_begin(const ec_model *m, ec_down *down)
{
    uint32_t d = m->d;

    memset(down->v, 0, d * sizeof *down->v);
    if (down->has_a)          /* else a holds zeros already */
        memset(down->a, 0, d * sizeof *down->a);
    down->init = !m->initialised;
    down->has_a = 0;
    down->has_stats = 0;
    down->ef_in = down->ef_out = 0.0;
    down->has_value = 0;
    down->value = 0.0;
    down->bits = down->paper_bits = 0;
    down->pb = m->pb;
    down->refresh_rows = 0;
    down->next_tau = 0;
    down->part = m->initialised ? m->part : NULL;
    down->participants = down->part ? m->prm->participants : m->pb->n;
    down->mean_over_participants =
        down->part != NULL && ec_algo_is(m->prm->algo, EC_FAMILY_SGD);
}

void ec_server_reduce_add(ec_down *down, const ec_up *up)
{
    /* The uplinks come from the participants alone, in worker order. */
    while (down->part && down->next_tau < down->pb->n &&
           !down->part[down->next_tau])
        down->next_tau++;
    if (up->refreshed && down->next_tau < down->pb->n)
        down->refresh_rows += shard_rows(down->pb, down->next_tau);
    down->next_tau++;
    if (up->has_stats) {
        down->ef_in += up->ef_in;
        down->ef_out += up->ef_out;
        down->has_stats = 1;
    }
    if (up->has_value) {
        down->value += up->value;
        down->has_value = 1;
    }
    ec_msg_axpy(&up->q, 1.0, down->v);
    if (up->has_extra) {
        ec_msg_axpy(&up->extra, 1.0, down->a);
        down->has_a = 1;
    }
}

/*
 * EF21-P's server half: x_{t+1} = prox(x_t - v), the method's own step
 * (v the mean of its gamma-scaled uplinks), then c_t = C_down(x_{t+1} -
 * w_t) into v, which every replica adds to its w. The paper counts c_t as
 * its compressor's message (k values for topk, k for randk).
 */
static void primal_broadcast(const ec_model *m, ec_down *down)
{
    const ec_params *p = m->prm;
    uint32_t d = m->d;
    double *x1 = down->x_next;

    for (uint32_t j = 0; j < d; j++)
        x1[j] = m->x_server[j] - down->v[j];
    ec_prox_l1(x1, d, p->gamma * m->pb->lambda1);
    for (uint32_t j = 0; j < d; j++)
        down->v[j] = x1[j] - m->x[j];
    ec_compress(down->down_comp, down->v, &down->down_rng, &down->down_msg);
    memset(down->v, 0, d * sizeof *down->v);
    ec_msg_axpy(&down->down_msg, 1.0, down->v);
    down->primal = 1;
    {
        uint64_t ignored = 0;

        count_broadcast(down->v, d, &down->bits, &ignored);
        down->paper_bits += down->down_msg.paper_bits;
    }
}

void ec_server_reduce_end(const ec_model *m, uint32_t n, ec_down *down)
{
    uint32_t d = m->d;
    double inv = 1.0 / (down->mean_over_participants ? down->participants : n);

    for (uint32_t j = 0; j < d; j++)
        down->v[j] *= inv;
    /* Without extras a holds zeros, which scaling would leave as they are:
     * coin-less rounds of ECLK and L-Katyusha skip that pass (and
     * ec_server_reduce_begin the clearing) over d. */
    if (down->has_a)
        for (uint32_t j = 0; j < d; j++)
            down->a[j] *= inv;
    down->primal = 0;
    if (!down->init && down->down_comp && m->x_server)
        primal_broadcast(m, down);
    else if (!down->init)
        count_broadcast(down->v, d, &down->bits, &down->paper_bits);
    if (down->has_a)
        count_broadcast(down->a, d, &down->bits, &down->paper_bits);
    if (down->has_stats) {
        down->bits += 128;
        down->paper_bits += 128;
    }
    if (down->has_value) {
        down->bits += 64;
        down->paper_bits += 64;
    }
}

void ec_server_reduce(const ec_model *m, const ec_up *ups, uint32_t n,
                      ec_down *down)
{
    ec_server_reduce_begin(m, down);
    for (uint32_t t = 0; t < n; t++)
        if (ec_model_participates(m, t))
            ec_server_reduce_add(down, &ups[t]);
    ec_server_reduce_end(m, n, down);
}
