/*
 * `ecopt run JOB.json`: the coordinator (coord/coord.h) with a parser and
 * a printer. The options are the coordinator's table (COORD_OPTIONS) and
 * this file's own, which say how to show the job: the resolved problem
 * and parameters, progress and a summary as text for people, or the
 * metric rows as CSV or JSON for programs.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coord.h"
#include "describe.h"
#include "ecopt/clock.h"
#include "ecopt/memory.h"
#include "outcome.h"
#include "report.h"

enum format { FMT_TEXT, FMT_CSV, FMT_JSON };

struct run_ctx {
    enum format format;
    const char *output;   /* -o FILE, or NULL for stdout */
    FILE *rows;           /* where CSV rows go */
    json_t *json_rows;    /* where JSON rows go */
    FILE *info;           /* people's text: stdout, or stderr with --format */
    int tty;              /* info is a terminal: draw a progress bar */
    int quiet;
    const ec_job *job;
    double last_line;     /* wall time of the last progress line */
};

/*
 * The command's own options, X(flag, short, metavar, help), before the
 * coordinator's in the usage; -h last.
 */
#define RUN_OPTIONS(X)                                                        \
    X("format", 'f', "text|csv|json",                                         \
      "metric rows on stdout as CSV or JSON (the\ntext then goes to stderr); " \
      "default text")                                                         \
    X("output", 'o', "FILE", "write the rows to FILE instead of stdout")

static const char run_usage_head[] =
    "usage: ecopt run JOB.json [options]\n"
    "\n"
    "Runs a job in this process and prints the resolved problem and\n"
    "parameters, progress, and a summary.\n"
    "\n";
static const char run_usage_tail[] =
    "  -q, --quiet                 no progress lines\n"
    "  -h, --help                  this text\n"
    "\n"
    "JOB.json may be - for standard input. SIGTERM or SIGINT ends the job\n"
    "and its workers cleanly. Exit status, from the summary's outcome:\n"
    "0 target_reached, 5 budget_exhausted (a budget ran out above the\n"
    "target, the gap not above its start's), 3 worse_than_start, non_finite,\n"
    "cancelled or failed; 2 bad arguments, spec or data, 1 internal failure.\n";

/* One option's lines of the usage: the flag in 28 columns, then its
   help, a line break in it continuing under the first line. */
static void usage_option(FILE *f, int sh, const char *flag, const char *meta,
                         const char *help)
{
    char left[64];

    if (sh)
        snprintf(left, sizeof left, "-%c, --%s%s%s", sh, flag, meta ? " " : "",
                 meta ? meta : "");
    else
        snprintf(left, sizeof left, "    --%s%s%s", flag, meta ? " " : "", meta ? meta : "");
    fprintf(f, "  %-26s  ", left);
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%30s", "");
    }
    fputc('\n', f);
}

static void print_usage(FILE *f)
{
    fputs(run_usage_head, f);
#define USAGE_ROW(flag, sh, meta, help) usage_option(f, sh, flag, meta, help);
    RUN_OPTIONS(USAGE_ROW)
#undef USAGE_ROW
    for (size_t i = 0; i < coord_option_count(); i++)
        if (coord_option_help(i))
            usage_option(f, coord_option_short(i), coord_option_flag(i),
                         coord_option_metavar(i), coord_option_help(i));
    fputs(run_usage_tail, f);
}

/* The memory account, as print_setup shows it. */
static void print_estimate(FILE *o, const struct coord_job *j)
{
    ec_mem_job mj;
    ec_mem_estimate est;

    ec_mem_job_from(&mj, &j->spec->job, j->ds->n_rows, j->ds->nnz, j->ds->d, j->procs);
    mj.mpi = j->ranks;
    mj.local = j->local;
    ec_estimate_memory(&mj, &est);
    fprintf(o, "memory     estimate %.0f MiB: coordinator %.0f MiB", est.total / 1048576.0,
            est.coordinator / 1048576.0);
    if (est.procs && j->ranks)
        fprintf(o, ", %u worker rank%s of up to %.0f MiB", est.procs,
                est.procs == 1 ? "" : "s", est.rank / 1048576.0);
    else if (est.procs)
        fprintf(o, ", %u worker process%s of up to %.0f MiB", est.procs,
                est.procs == 1 ? "" : "es", est.process / 1048576.0);
    fputc('\n', o);
}

/* ECLK's rule, guard and step as resolved (docs/algorithms.md, "ECLK's
 * rules"), continuing the parameters line. */
static void print_eclk_rule(FILE *o, const ec_params *prm)
{
    fprintf(o, "\ncontraction %s rule: delta_eff = %.4g, inflation %.4g "
               "(c = %g), L_delta = %.6g%s; guard ",
            ec_eclk_rule_name(prm->eclk_rule), prm->delta_eff, prm->inflation,
            prm->eclk_c, prm->L_delta,
            prm->eclk_rule == EC_ECLK_ONLINE && prm->comp.type != EC_COMP_NONE
                ? ", delta_eff follows the measured contraction" : "");
    if (prm->eclk_guard && prm->eclk_rule == EC_ECLK_ADAPTIVE)
        fprintf(o, "on when P(w) rises %g of P(x0) - best above the best",
                prm->eclk_guard_threshold);
    else if (prm->eclk_guard)
        fprintf(o, "on at %gx the best ||grad f(w)||", prm->eclk_guard_threshold);
    else
        fputs("off", o);
    if (prm->step_given)
        fputs("; step as given (theta1, eta, sigma follow the rule)", o);
}

/* ECLK's end record: where the rule ended and the guard's restarts. */
static void print_eclk_end(FILE *o, const ec_eclk_report *r)
{
    uint64_t listed = r->restarts < EC_ECLK_RESTART_ROUNDS_MAX
                          ? r->restarts : EC_ECLK_RESTART_ROUNDS_MAX;

    fprintf(o, "contraction delta_eff %.4g at the end (%.4g..%.4g over the "
               "run), inflation %.4g, %llu updates, %llu restarts",
            r->delta_eff, r->delta_min, r->delta_max, r->inflation,
            (unsigned long long)r->updates, (unsigned long long)r->restarts);
    for (uint64_t i = 0; i < listed; i++)
        fprintf(o, "%s%llu", i ? ", " : " at rounds ",
                (unsigned long long)r->restart_rounds[i]);
    if (listed < r->restarts)
        fputs(", ...", o);
    fputc('\n', o);
}

/* The parameters' line (and ECLK's contraction rule). */
static void print_params(FILE *o, const ec_params *prm)
{
    fprintf(o, "parameters step = %.6g (default %.6g x %g)", prm->gamma,
            prm->theory_step, prm->step_multiplier);
    if (prm->smoothness_multiplier != 1.0)
        fprintf(o, ", smoothness multiplier %g (the constants see L / %g)",
                prm->smoothness_multiplier, prm->smoothness_multiplier);
    if (prm->algo == EC_ALGO_EF21)
        fprintf(o, ", default = %g x the theorem's step", prm->step_factor);
    if (!isnan(prm->p))
        fprintf(o, ", p = %.4g", prm->p);
    if (ec_algo_is(prm->algo, EC_FAMILY_KATYUSHA))
        fprintf(o, ", theta1 = %.4g, theta2 = %.4g, eta = %.4g, L_eff = %.6g",
                prm->theta1, prm->theta2, prm->eta, prm->L_eff);
    if (prm->algo == EC_ALGO_ECLK)
        print_eclk_rule(o, prm);
    if (prm->algo == EC_ALGO_EC_LSVRG_QIAN)
        fprintf(o, ", default = 1/(%g L_eff), L_eff = %.6g",
                prm->step_divisor, prm->L_eff);
    if (prm->algo == EC_ALGO_ECONTROL)
        fprintf(o, ", econtrol_eta = %.4g", prm->econtrol_eta);
    if (prm->algo == EC_ALGO_ADIANA)
        fprintf(o, ", eta = %.4g, theta1 = %.4g, theta2 = %.4g, gamma = %.4g,"
                   " beta = %.6g, L = %.6g, sends %s (omega = %.4g, alpha = "
                   "%.4g)",
                prm->eta, prm->theta1, prm->theta2, prm->gamma_z, prm->beta,
                prm->L_eff, ec_comp_name(prm->shift_comp.type), prm->omega,
                prm->alpha);
    if (prm->algo == EC_ALGO_ADEF)
        fprintf(o, ", default = delta/(%g L_eff), L_eff = %.6g (ADEF's "
                   "weights a^2 = step A)",
                prm->step_divisor, prm->L_eff);
    if (ec_algo_is(prm->algo, EC_FAMILY_DIANA))
        fprintf(o, ", shifts %s (omega = %.4g, alpha = %.4g)",
                ec_comp_name(prm->shift_comp.type), prm->omega, prm->alpha);
}

/* What the coordinator resolved, before the run. */
static void print_setup(FILE *o, const struct coord_job *j)
{
    const ec_dataset *ds = j->ds;
    const ec_job *job = &j->spec->job;
    const ec_problem *pb = j->pb;
    const ec_params *prm = j->prm;
    const ec_comp_spec *c = &prm->comp;
    char procs_text[96] = "";

    fprintf(o, "dataset    %s: %u rows, d = %u, nnz = %llu, labels %g -> -1, %g -> +1\n",
            j->shown, ds->n_rows, ds->d, (unsigned long long)ds->nnz,
            ds->label_neg, ds->label_pos);
    fprintf(o, "problem    %s loss, lambda1 = %g, lambda2 = %.6g", ec_loss_name(pb->loss),
            pb->lambda1, pb->lambda2);
    if (!isnan(job->lambda2_rel) && isnan(job->lambda2))
        fprintf(o, " (lambda2_rel %g)", job->lambda2_rel);
    fprintf(o, ", %u workers, %s shards", pb->n, ec_split_name(pb->split));
    if (!isnan(pb->split_alpha))
        fprintf(o, " (alpha %g)", pb->split_alpha);
    fprintf(o, ", zeta*^2 = %.4g\n", pb->zeta_star);
    fprintf(o, "constants  L = %.6g, L_f = %.6g, ", pb->L, pb->L_f);
    if (!isnan(pb->L_tilde))        /* computed for EF21 alone */
        fprintf(o, "L_tilde = %.6g, ", pb->L_tilde);
    fprintf(o, "mu = %.6g, kappa = %.6g", pb->mu, pb->kappa);
    /* lambda_max(A^T A), which L_f and lambda2_rel are built on: NaN on a
       rank given the constants by rank 0 */
    if (!isnan(pb->lambda_max))
        fprintf(o, ", lambda_max = %.15g (%s, Lanczos, %u steps)", pb->lambda_max,
                pb->lmax_cached ? "cached" : "computed", pb->lmax_steps);
    fputc('\n', o);
    if (pb->solve_cached)
        fprintf(o, "optimum    P* = %.15g, P(x0) = %.15g (cached, found by %s, bound %.2g)\n",
                pb->P_star, pb->P0, pb->solve_method, pb->solve_bound);
    else
        fprintf(o, "optimum    P* = %.15g, P(x0) = %.15g (%s, %d iterations, bound %.2g)\n",
                pb->P_star, pb->P0, pb->solve_method, pb->solve_iters,
                pb->solve_bound);
    fprintf(o, "algorithm  %s, compressor %s", ec_algo_name(prm->algo),
            ec_comp_name(c->type));
    if (ec_comp_info_of(c->type)->param == EC_COMP_PARAM_K)
        fprintf(o, " k = %u", c->k);
    if (ec_comp_info_of(c->type)->param == EC_COMP_PARAM_S)
        fprintf(o, " s = %u", c->s);
    fprintf(o, " (delta = %.4g), batch %u", prm->delta, prm->batch);
    if (prm->participants < prm->n)
        fprintf(o, ", participation %g (%u of %u workers a round)",
                prm->participation, prm->participants, prm->n);
    if (prm->comp_down.type != EC_COMP_NONE)
        fprintf(o, ", broadcast %s k = %u (EF21-P, alpha = %.4g)",
                ec_comp_name(prm->comp_down.type), prm->comp_down.k,
                prm->delta_down);
    fputc('\n', o);
    print_params(o, prm);
    if (j->procs && j->local)
        snprintf(procs_text, sizeof procs_text, " (%u workers: %u in the coordinator, "
                 "%u on %u process%s)", job->workers, j->local, job->workers - j->local,
                 j->procs, j->procs == 1 ? "" : "es");
    else if (j->procs)
        snprintf(procs_text, sizeof procs_text, " (%u workers on %u process%s)",
                 job->workers, j->procs, j->procs == 1 ? "" : "es");
    fprintf(o, "\nrun        max_rounds %llu, target %g, eval_every %u, seed %llu, backend %s%s\n",
            (unsigned long long)job->max_rounds, job->target, job->eval_every,
            (unsigned long long)job->seed, j->backend, procs_text);
    print_estimate(o, j);
}

static int on_metric(void *vctx, const ec_metric *row)
{
    struct run_ctx *ctx = vctx;
    char line[512];

    if (ctx->format == FMT_CSV) {
        describe_csv_row(row, line, sizeof line);
        fprintf(ctx->rows, "%s\n", line);
    } else if (ctx->format == FMT_JSON) {
        json_array_append_new(ctx->json_rows, describe_metric(row));
    }
    if (ctx->quiet)
        return 0;
    if (ctx->tty) {
        /* A bar over the log of the gap: from 1 down to the target. */
        double goal = ctx->job->target > 0 ? -log10(ctx->job->target) : 12;
        double by_gap = row->rel_gap > 0 ? -log10(row->rel_gap) / goal : 1;
        double by_rounds = (double)row->round / ctx->job->max_rounds;
        double frac = fmin(1.0, fmax(0.0, fmax(by_gap, by_rounds)));
        int width = 30, fill = (int)(frac * width);

        fprintf(ctx->info, "\r[%.*s%*s] round %llu  rel gap %.3e  %.1f s ",
                fill, "##############################", width - fill, "",
                (unsigned long long)row->round, row->rel_gap, row->seconds);
        fflush(ctx->info);
    } else if (row->round == 0 || ec_clock() - ctx->last_line >= 1.0) {
        fprintf(ctx->info, "round %llu  rel gap %.3e  bits up %.4g  %.2f s\n",
                (unsigned long long)row->round, row->rel_gap, row->bits_up,
                row->seconds);
        ctx->last_line = ec_clock();
    }
    return 0;
}

static void print_summary(FILE *o, const ec_summary *sum, const ec_params *prm)
{
    const ec_metric *r = &sum->last;

    fprintf(o, "stop       %s: %s\n", ec_stop_name(sum->stop), sum->reason);
    fprintf(o, "outcome    %s\n", outcome_name(outcome_of_stop(sum->stop, sum->last.rel_gap)));
    fprintf(o, "rounds     %llu\n", (unsigned long long)sum->rounds);
    fprintf(o, "rel gap    %.4g (P - P* = %.4g, ||grad|| = %.4g)\n",
            r->rel_gap, r->gap, r->grad_norm);
    fprintf(o, "bits up    %.6g per worker (paper bits %.6g); bits down %.6g\n",
            r->bits_up, r->paper_bits, r->bits_down);
    fprintf(o, "oracle     %.6g gradient evaluations per worker\n", r->grad_evals);
    if (r->wire_up > 0 && sum->rounds > 0) {
        /* The least any encoding could send up: k indices and k values. */
        ec_comp_param param = ec_comp_info_of(prm->comp.type)->param;
        double minimum = param == EC_COMP_PARAM_NONE ? 8.0 * prm->d :
                         param == EC_COMP_PARAM_S ? 0.0 : 12.0 * prm->comp.k;
        fprintf(o, "wire       %.1f bytes up per worker per round", r->wire_up / sum->rounds);
        if (minimum > 0)
            fprintf(o, " (minimum %.0f: %s)", minimum,
                    param == EC_COMP_PARAM_NONE ? "d values" : "k indices + k values");
        fprintf(o, ", %.1f bytes down per worker per round\n", r->wire_down / sum->rounds);
    }
    if (prm->algo == EC_ALGO_ECLK)
        print_eclk_end(o, &sum->eclk);
    fprintf(o, "wall time  %.3f s\n", r->seconds);
    {
        struct coord_usage u = coord_usage_now(sum);
        fprintf(o, "usage      %.2f CPU s; peak resident sets %.1f MB here + %.1f MB "
                   "the workers' (shared pages count in each)\n",
                u.cpu_seconds, u.own_rss / 1e6, u.workers_rss / 1e6);
    }
}


/* ---- the coordinator's view ---------------------------------------------- */

static void on_spec(void *vctx, const struct jobspec *spec)
{
    struct run_ctx *ctx = vctx;

    ctx->job = &spec->job;
}

/* Before the job drops its privileges: the rows' file. */
static int on_opened(void *vctx)
{
    struct run_ctx *ctx = vctx;

    if (ctx->output && !(ctx->rows = fopen(ctx->output, "w"))) {
        fprintf(stderr, "ecopt run: %s: %s\n", ctx->output, strerror(errno));
        ctx->rows = stdout;
        return -1;
    }
    return 0;
}

static void on_setup(void *vctx, const struct coord_job *j)
{
    struct run_ctx *ctx = vctx;

    print_setup(ctx->info, j);
    fflush(ctx->info);
    if (ctx->format == FMT_CSV)
        fprintf(ctx->rows, "%s\n", describe_csv_header);
    if (ctx->format == FMT_JSON)
        ctx->json_rows = json_array();
}

/* `--format json`: one document of the spec, the problem, the parameters,
   the summary and the rows. */
static int write_json(struct run_ctx *ctx, const struct coord_job *j, const ec_summary *sum)
{
    json_t *doc = json_pack("{s:o, s:o, s:o, s:o, s:O}", "spec", jobspec_to_json(j->spec),
                            "problem", describe_problem(j->pb), "params",
                            report_params_json(j->prm), "summary", describe_summary(sum),
                            "rows", ctx->json_rows);

    if (doc && j->prm->algo == EC_ALGO_ECLK)
        json_object_set_new(json_object_get(doc, "summary"), "eclk",
                            report_eclk_json(&sum->eclk));
    if (!doc || json_dumpf(doc, ctx->rows, JSON_INDENT(1)) < 0) {
        fprintf(stderr, "ecopt run: cannot write JSON\n");
        json_decref(doc);
        return -1;
    }
    fputc('\n', ctx->rows);
    json_decref(doc);
    return 0;
}

static int on_done(void *vctx, const struct coord_job *j, const ec_summary *sum)
{
    struct run_ctx *ctx = vctx;

    if (ctx->tty && !ctx->quiet)
        fputc('\n', ctx->info);
    if (ctx->format == FMT_JSON && write_json(ctx, j, sum) < 0)
        return -1;
    print_summary(ctx->info, sum, j->prm);
    if (fflush(ctx->rows) != 0 || ferror(ctx->rows)) {
        fprintf(stderr, "ecopt run: writing rows: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the command line ---------------------------------------------------- */

/* Index of the command's own options in the getopt table: after the
   coordinator's. */
enum { OPT_FORMAT = 1000, OPT_OUTPUT, OPT_QUIET, OPT_HELP };

/* The getopt tables: every coordinator option (val: its index) and the
   command's own. *shorts gets the short letters. NULL out of memory. */
static struct option *long_options(char *shorts, size_t len)
{
    size_t n = coord_option_count(), k = 0, s = 0;
    struct option *opts = calloc(n + 5, sizeof *opts);

    if (!opts)
        return NULL;
    s += (size_t)snprintf(shorts, len, "f:o:qh");
    for (size_t i = 0; i < n; i++) {
        opts[k++] = (struct option){coord_option_flag(i),
                                    coord_option_metavar(i) ? required_argument
                                                            : no_argument,
                                    NULL, (int)i};
        if (coord_option_short(i) && s + 2 < len) {
            shorts[s++] = (char)coord_option_short(i);
            shorts[s++] = ':';
            shorts[s] = '\0';
        }
    }
    opts[k++] = (struct option){"format", required_argument, NULL, OPT_FORMAT};
    opts[k++] = (struct option){"output", required_argument, NULL, OPT_OUTPUT};
    opts[k++] = (struct option){"quiet", no_argument, NULL, OPT_QUIET};
    opts[k++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    return opts;
}

/* The option c (getopt's answer) with optarg: 0, 1 to stop with status
   *rc, or -1 on a bad one (said on stderr). */
static int take_option(int c, struct coord_opts *co, struct run_ctx *ctx, int *rc)
{
    char err[256];

    switch (c) {
    case 'f':
    case OPT_FORMAT:
        if (strcmp(optarg, "text") == 0)
            ctx->format = FMT_TEXT;
        else if (strcmp(optarg, "csv") == 0)
            ctx->format = FMT_CSV;
        else if (strcmp(optarg, "json") == 0)
            ctx->format = FMT_JSON;
        else {
            fprintf(stderr, "ecopt run: --format must be text, csv or json (got '%s')\n",
                    optarg);
            return -1;
        }
        return 0;
    case 'o':
    case OPT_OUTPUT:
        ctx->output = optarg;
        return 0;
    case 'q':
    case OPT_QUIET:
        ctx->quiet = 1;
        return 0;
    case 'h':
    case OPT_HELP:
        print_usage(stdout);
        *rc = EXIT_OK;
        return 1;
    }
    for (size_t i = 0; i < coord_option_count(); i++)
        if (c == (int)i || (coord_option_short(i) && c == coord_option_short(i))) {
            if (coord_option_set(co, i, coord_option_metavar(i) ? optarg : NULL, err,
                                 sizeof err) == 0)
                return 0;
            fprintf(stderr, "ecopt run: %s\n", err);
            return -1;
        }
    print_usage(stderr);
    return -1;
}

/* The command line into co and ctx: 0, or 1 with the exit status in *rc. */
static int parse(int argc, char **argv, struct coord_opts *co, struct run_ctx *ctx, int *rc)
{
    char shorts[64];
    struct option *opts = long_options(shorts, sizeof shorts);
    int c, r = 0;

    *rc = EXIT_USAGE;
    if (!opts)
        return 1;
    optind = 1;
    while (r == 0 && (c = getopt_long(argc, argv, shorts, opts, NULL)) != -1)
        r = take_option(c, co, ctx, rc);
    free(opts);
    if (r != 0)
        return 1;
    if (optind != argc - 1) {
        fputs("ecopt run: expected one job file\n", stderr);
        print_usage(stderr);
        return 1;
    }
    if (co->worker_user && co->worker_uid > 0) {
        fprintf(stderr, "ecopt run: give --worker-user or --worker-uid, not both\n");
        return 1;
    }
    co->spec_path = argv[optind];
    co->argc = argc;
    co->argv = argv;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_ctx ctx = {.format = FMT_TEXT, .rows = stdout, .info = stdout};
    struct coord_opts co;
    struct coord_view view = {.spec = on_spec, .opened = on_opened, .setup = on_setup,
                              .metric = on_metric, .done = on_done, .ctx = &ctx};
    int rc;

    coord_opts_init(&co);
    if (parse(argc, argv, &co, &ctx, &rc))
        return rc;
    if (ctx.format != FMT_TEXT)
        ctx.info = stderr;
    ctx.tty = isatty(fileno(ctx.info));
    view.info = ctx.info;
    rc = coord_run(&co, &view);
    if (ctx.rows && ctx.rows != stdout)
        fclose(ctx.rows);
    json_decref(ctx.json_rows);
    return rc;
}
