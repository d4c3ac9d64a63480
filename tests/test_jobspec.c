/*
 * Tests of the job spec parser: defaults, the canonical form round trip,
 * every field's wrong types and ranges with the path and sentence a user
 * sees, and hostile input (truncations, mutations, deep nesting).
 */
#include <math.h>

#include <jansson.h>

#include "ecopt/error.h"
#include "jobspec.h"
#include "testutil.h"

/* Documents in the tables use ' for " so that they stay readable. */
static char *dq(const char *sq)
{
    char *s = strdup(sq);

    ck_assert_ptr_nonnull(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static int parse_sq(const char *sq, struct jobspec *spec,
                    struct jobspec_errors *errs)
{
    char *text = dq(sq);
    int rc = jobspec_parse(text, strlen(text), spec, errs);

    free(text);
    return rc;
}

/* Parses text that must be valid; fails the test with the errors if not. */
static void parse_ok(const char *text, struct jobspec *spec)
{
    struct jobspec_errors errs;
    char msg[4096];
    int rc = jobspec_parse(text, strlen(text), spec, &errs);

    jobspec_errors_format(&errs, msg, sizeof msg);
    ck_assert_msg(rc == 0, "parse failed (%d) for %s:\n%s", rc, text, msg);
    ck_assert_uint_eq(errs.count, 0);
}

static void parse_sq_ok(const char *sq, struct jobspec *spec)
{
    char *text = dq(sq);

    parse_ok(text, spec);
    free(text);
}

static const struct jobspec_error *find_error(
    const struct jobspec_errors *errs, const char *field)
{
    for (unsigned i = 0; i < errs->count; i++)
        if (strcmp(errs->item[i].field, field) == 0)
            return &errs->item[i];
    return NULL;
}

/* Asserts an error at field whose detail contains phrase. */
static void expect_error(const struct jobspec_errors *errs, const char *field,
                         const char *phrase)
{
    const struct jobspec_error *e = find_error(errs, field);
    char msg[4096];

    jobspec_errors_format(errs, msg, sizeof msg);
    ck_assert_msg(e != NULL, "no error at \"%s\"; got:\n%s", field, msg);
    ck_assert_msg(strstr(e->detail, phrase) != NULL,
                  "error at \"%s\" is \"%s\", expected it to contain \"%s\"",
                  field, e->detail, phrase);
}

/* What the REST layer does with an error: it must be valid UTF-8. */
static void expect_json_safe(const struct jobspec_errors *errs)
{
    for (unsigned i = 0; i < errs->count; i++) {
        json_t *f = json_string(errs->item[i].field);
        json_t *d = json_string(errs->item[i].detail);

        ck_assert_msg(f && d, "error %u is not valid UTF-8", i);
        json_decref(f);
        json_decref(d);
    }
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static int spec_equal(const struct jobspec *a, const struct jobspec *b)
{
    const ec_job *x = &a->job, *y = &b->job;

    if (strcmp(x->dataset, y->dataset) || x->loss != y->loss ||
        !same_double(x->lambda1, y->lambda1) ||
        !same_double(x->lambda2, y->lambda2) ||
        !same_double(x->lambda2_rel, y->lambda2_rel) ||
        x->workers != y->workers || x->algorithm != y->algorithm ||
        x->compressor.type != y->compressor.type ||
        x->compressor.k != y->compressor.k ||
        x->compressor.s != y->compressor.s ||
        x->compressor_down.type != y->compressor_down.type ||
        x->compressor_down.k != y->compressor_down.k ||
        x->compressor_down.s != y->compressor_down.s ||
        !same_double(x->k_frac_down, y->k_frac_down) ||
        !same_double(x->participation, y->participation) ||
        !same_double(x->k_frac, y->k_frac) || x->batch != y->batch ||
        !same_double(x->p, y->p) || !same_double(x->step_size, y->step_size) ||
        !same_double(x->step_multiplier, y->step_multiplier) ||
        !same_double(x->smoothness_multiplier, y->smoothness_multiplier) ||
        x->eclk_rule != y->eclk_rule || x->eclk_guard != y->eclk_guard ||
        !same_double(x->eclk_guard_threshold, y->eclk_guard_threshold) ||
        !same_double(x->econtrol_eta, y->econtrol_eta) ||
        x->max_rounds != y->max_rounds || !same_double(x->target, y->target) ||
        x->eval_every != y->eval_every || x->seed != y->seed ||
        x->split != y->split || !same_double(x->split_alpha, y->split_alpha) ||
        !same_double(x->max_seconds, y->max_seconds))
        return 0;
    if (strcmp(a->name, b->name) || a->nlabels != b->nlabels ||
        a->backend != b->backend)
        return 0;
    for (unsigned i = 0; i < a->nlabels; i++)
        if (strcmp(a->labels[i].key, b->labels[i].key) ||
            strcmp(a->labels[i].value, b->labels[i].value))
            return 0;
    return 1;
}

/* spec -> canonical JSON text; the caller frees it. */
static char *canonical(const struct jobspec *spec)
{
    json_t *doc = jobspec_to_json(spec);
    char *text;

    ck_assert_ptr_nonnull(doc);
    text = json_dumps(doc, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    json_decref(doc);
    return text;
}

/* parse -> to_json -> parse gives an equal spec and the same text. */
static void check_round_trip(const struct jobspec *spec)
{
    struct jobspec again;
    char *text = canonical(spec), *text2;

    parse_ok(text, &again);
    ck_assert_msg(spec_equal(spec, &again), "round trip differs: %s", text);
    text2 = canonical(&again);
    ck_assert_str_eq(text, text2);
    free(text);
    free(text2);
}

/* ---- Defaults and valid input ---------------------------------------- */

static void expect_defaults(const struct jobspec *spec)
{
    const ec_job *j = &spec->job;

    ck_assert_str_eq(j->dataset, "a9a");
    ck_assert_int_eq(j->loss, EC_LOSS_LOGISTIC);
    ck_assert(j->lambda1 == 0.0);
    ck_assert(isnan(j->lambda2));
    ck_assert(j->lambda2_rel == 1e-4);
    ck_assert_uint_eq(j->workers, 20);
    ck_assert_int_eq(j->algorithm, EC_ALGO_ECLK);
    ck_assert_int_eq(j->compressor.type, EC_COMP_NONE);
    ck_assert_uint_eq(j->compressor.k, 0);
    ck_assert_uint_eq(j->compressor.s, 0);
    ck_assert(isnan(j->k_frac));
    ck_assert_uint_eq(j->batch, 1);
    ck_assert(isnan(j->p));
    ck_assert(isnan(j->participation));
    ck_assert(isnan(j->step_size));
    ck_assert(j->step_multiplier == 1.0);
    ck_assert_uint_eq(j->max_rounds, 10000);
    ck_assert(j->target == 1e-9);
    ck_assert_uint_eq(j->eval_every, 10);
    ck_assert_uint_eq(j->seed, 1);
    ck_assert_int_eq(j->split, EC_SPLIT_CONTIGUOUS);
    ck_assert(isnan(j->split_alpha));
    ck_assert(j->max_seconds == 3600.0);
    ck_assert_str_eq(spec->name, "");
    ck_assert_uint_eq(spec->nlabels, 0);
    ck_assert_int_eq(spec->backend, JOBSPEC_BACKEND_PROCESS);
}

START_TEST(test_defaults)
{
    struct jobspec spec;

    parse_sq_ok("{'dataset':'a9a'}", &spec);
    expect_defaults(&spec);
}
END_TEST

START_TEST(test_null_means_default)
{
    struct jobspec spec;

    parse_sq_ok("{'dataset':'a9a','loss':null,'lambda1':null,"
                "'lambda2':null,'lambda2_rel':null,'workers':null,"
                "'algorithm':null,'compressor':null,'batch':null,'p':null,"
                "'participation':null,'step_size':null,'step_multiplier':null,'max_rounds':null,"
                "'target':null,'eval_every':null,'seed':null,"
                "'shuffle':null,'split':null,'split_alpha':null,"
                "'max_seconds':null,'name':null,"
                "'labels':null,'backend':null}",
                &spec);
    expect_defaults(&spec);
}
END_TEST

START_TEST(test_full_spec)
{
    struct jobspec spec;

    parse_sq_ok("{'dataset':'mushrooms','loss':'squared','lambda1':0.001,"
                "'lambda2':0.5,'workers':4096,'algorithm':'ec-sgd-diana',"
                "'compressor':{'type':'randk-unbiased','k':7},'batch':8,"
                "'p':1,'participation':0.25,'step_size':0.25,'max_rounds':100000000,'target':0,"
                "'eval_every':3,'seed':9007199254740992,'shuffle':true,"
                "'max_seconds':2592000,'name':'run 1',"
                "'labels':{'team':'opt','a.b-c_d':''},'backend':'mpi'}",
                &spec);
    ck_assert_str_eq(spec.job.dataset, "mushrooms");
    ck_assert_int_eq(spec.job.loss, EC_LOSS_SQUARED);
    ck_assert(spec.job.lambda1 == 0.001);
    ck_assert(spec.job.lambda2 == 0.5);
    ck_assert(isnan(spec.job.lambda2_rel));
    ck_assert_uint_eq(spec.job.workers, 4096);
    ck_assert_int_eq(spec.job.algorithm, EC_ALGO_EC_SGD_DIANA);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_RANDK_UNBIASED);
    ck_assert_uint_eq(spec.job.compressor.k, 7);
    ck_assert(isnan(spec.job.k_frac));
    ck_assert_uint_eq(spec.job.batch, 8);
    ck_assert(spec.job.p == 1.0);               /* integer for a number */
    ck_assert(spec.job.participation == 0.25);
    ck_assert(spec.job.step_size == 0.25);
    ck_assert_uint_eq(spec.job.max_rounds, 100000000);
    ck_assert(spec.job.target == 0.0);
    ck_assert_uint_eq(spec.job.eval_every, 3);
    ck_assert_uint_eq(spec.job.seed, 9007199254740992ULL);
    ck_assert_int_eq(spec.job.split, EC_SPLIT_SHUFFLED);
    ck_assert(spec.job.max_seconds == 2592000.0);
    ck_assert_str_eq(spec.name, "run 1");
    ck_assert_uint_eq(spec.nlabels, 2);
    ck_assert_str_eq(spec.labels[0].key, "a.b-c_d");   /* sorted */
    ck_assert_str_eq(spec.labels[0].value, "");
    ck_assert_str_eq(spec.labels[1].key, "team");
    ck_assert_str_eq(spec.labels[1].value, "opt");
    ck_assert_int_eq(spec.backend, JOBSPEC_BACKEND_MPI);
}
END_TEST

START_TEST(test_compressor_forms)
{
    struct jobspec spec;

    parse_sq_ok("{'dataset':'a9a','compressor':'dither'}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_DITHER);
    ck_assert_uint_eq(spec.job.compressor.s, 1);       /* the default */

    parse_sq_ok("{'dataset':'a9a','compressor':{'type':'dither-unbiased',"
                "'s':65535}}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_DITHER_UNBIASED);
    ck_assert_uint_eq(spec.job.compressor.s, 65535);

    parse_sq_ok("{'dataset':'a9a','compressor':'natural'}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_NATURAL);

    parse_sq_ok("{'dataset':'a9a','compressor':{'type':'natural-dither',"
                "'s':4}}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_NATDITHER);
    ck_assert_uint_eq(spec.job.compressor.s, 4);

    parse_sq_ok("{'dataset':'a9a','compressor':{'type':'topk',"
                "'k_frac':0.01,'k':null,'s':null}}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_TOPK);
    ck_assert_uint_eq(spec.job.compressor.k, 0);
    ck_assert(spec.job.k_frac == 0.01);

    parse_sq_ok("{'dataset':'a9a','compressor':{'type':'randk','k_frac':1}}",
                &spec);
    ck_assert(spec.job.k_frac == 1.0);

    parse_sq_ok("{'dataset':'a9a','compressor':'none'}", &spec);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_NONE);

    /* EF21-P's broadcast compressor: the same forms; absent, none. */
    ck_assert_int_eq(spec.job.compressor_down.type, EC_COMP_NONE);
    ck_assert(isnan(spec.job.k_frac_down));
    parse_sq_ok("{'dataset':'a9a','algorithm':'gd','compressor_down':{'type':'topk',"
                "'k':6}}", &spec);
    ck_assert_int_eq(spec.job.compressor_down.type, EC_COMP_TOPK);
    ck_assert_uint_eq(spec.job.compressor_down.k, 6);
    ck_assert_int_eq(spec.job.compressor.type, EC_COMP_NONE);
    parse_sq_ok("{'dataset':'a9a','compressor':{'type':'topk','k':2},"
                "'compressor_down':{'type':'randk','k_frac':0.01}}", &spec);
    ck_assert_int_eq(spec.job.compressor_down.type, EC_COMP_RANDK);
    ck_assert(spec.job.k_frac_down == 0.01);
    ck_assert(isnan(spec.job.k_frac));
    ck_assert_uint_eq(spec.job.compressor.k, 2);
}
END_TEST

START_TEST(test_lambda_and_step_choices)
{
    struct jobspec spec;

    parse_sq_ok("{'dataset':'a9a','lambda2':1e-6}", &spec);
    ck_assert(spec.job.lambda2 == 1e-6);
    ck_assert(isnan(spec.job.lambda2_rel));

    /* 0 exactly: a general convex problem, which problems and methods
     * take it being the engine's to say. */
    parse_sq_ok("{'dataset':'a9a','lambda2':0}", &spec);
    ck_assert(spec.job.lambda2 == 0.0 && !signbit(spec.job.lambda2));
    ck_assert(isnan(spec.job.lambda2_rel));
    parse_sq_ok("{'dataset':'a9a','lambda2':0.0}", &spec);
    ck_assert(spec.job.lambda2 == 0.0);

    parse_sq_ok("{'dataset':'a9a','lambda2_rel':0.01,'lambda2':null}", &spec);
    ck_assert(isnan(spec.job.lambda2));
    ck_assert(spec.job.lambda2_rel == 0.01);

    parse_sq_ok("{'dataset':'a9a','step_multiplier':2.5}", &spec);
    ck_assert(isnan(spec.job.step_size));
    ck_assert(spec.job.step_multiplier == 2.5);
}
END_TEST

/* ---- Round trips ----------------------------------------------------- */

static const char *const round_trip_docs[] = {
    "{'dataset':'a9a'}",
    "{'dataset':'mushrooms','loss':'squared','lambda1':0.001,"
    "'lambda2':0.5,'workers':4096,'algorithm':'ec-sgd-diana',"
    "'compressor':{'type':'randk-unbiased','k':7},'batch':8,'p':0.3,"
    "'step_size':0.25,'max_rounds':100000000,'target':0,'eval_every':3,"
    "'seed':9007199254740992,'shuffle':true,'max_seconds':2592000,"
    "'name':'r\\u00e9sum\\u00e9 \\ud83d\\ude80','labels':{'z':'1','a':'2',"
    "'m':'\\\\ \\' \\u00e9'},'backend':'inproc'}",
    "{'dataset':'w8a','lambda2_rel':0.1,'compressor':{'type':'topk',"
    "'k_frac':0.05},'step_multiplier':0.5,'seed':0,'target':1e-12}",
    "{'dataset':'/data/a1a.txt','compressor':'dither','lambda1':1e-300,"
    "'max_seconds':1e-3,'p':1e-17,'name':'x'}",
    "{'dataset':'a5a','algorithm':'ef21','compressor':{'type':'dither',"
    "'s':17},'lambda2':1,'step_size':3}",
    "{'dataset':'a9a','split':'dirichlet','split_alpha':0.05,'seed':7}",
    "{'dataset':'w8a','split':'label_skew'}",
    "{'dataset':'a9a','algorithm':'ec-gd-diana','compressor':{'type':'topk','k':3},"
    "'compressor_down':{'type':'randk','k':7},'participation':1}",
    "{'dataset':'a9a','algorithm':'gd','compressor_down':{'type':'topk','k_frac':0.05}}",
    "{'dataset':'a9a','batch':'full','algorithm':'ec-lsvrg'}",
    "{'dataset':'a9a','compressor':{'type':'topk','k':1},'eclk_rule':'plain',"
    "'eclk_guard':true,'eclk_guard_threshold':4}",
    "{'dataset':'a9a','eclk_rule':'nominal','eclk_guard':false,'step_size':0.5}",
    "{'dataset':'a9a','algorithm':'econtrol','compressor':{'type':'topk','k':3},"
    "'econtrol_eta':0.125}",
    "{'dataset':'a9a','algorithm':'econtrol','econtrol_eta':0}",
    "{'dataset':'a9a','algorithm':'ec-gd','compressor':{'type':'topk','k':1},"
    "'smoothness_multiplier':2.5,'step_multiplier':0.5}",
};

START_TEST(test_round_trip)
{
    struct jobspec spec;

    parse_sq_ok(round_trip_docs[_i], &spec);
    check_round_trip(&spec);
}
END_TEST

START_TEST(test_canonical_form)
{
    struct jobspec spec;
    char *text;

    parse_sq_ok("{'dataset':'a9a'}", &spec);
    text = canonical(&spec);
    ck_assert_str_eq(
        text,
        "{\"dataset\":\"a9a\",\"loss\":\"logistic\",\"lambda1\":0.0,"
        "\"lambda2_rel\":0.0001,\"workers\":20,"
        "\"algorithm\":\"eclk\",\"compressor\":{\"type\":\"none\"},"
        "\"batch\":1,\"step_multiplier\":1.0,\"max_rounds\":10000,"
        "\"target\":1.0000000000000001e-9,\"eval_every\":10,\"seed\":1,"
        "\"split\":\"contiguous\",\"max_seconds\":3600.0,"
        "\"labels\":{},\"backend\":\"process\"}");
    free(text);
}
END_TEST

/* ---- One wrong field at a time --------------------------------------- */

#define WITH(members) "{'dataset':'a9a'," members "}"

struct bad_case {
    const char *doc;
    const char *field;
    const char *phrase;
};

static const struct bad_case bad_cases[] = {
    {"{}", "dataset", "is required"},
    {"{'dataset':null}", "dataset", "is required"},
    {"{'dataset':''}", "dataset", "must be a string of 1..1023 bytes (got 0)"},
    {"{'dataset':5}", "dataset", "must be a string of 1..1023 bytes (got 5)"},
    {"{'dataset':['a']}", "dataset", "(got an array)"},
    {"{'dataset':'a\\u0000b'}", "dataset", "NUL"},
    {WITH("'loss':'hinge'"), "loss",
     "must be one of: logistic, squared (got \"hinge\")"},
    {WITH("'loss':1"), "loss", "one of: logistic, squared (got 1)"},
    {WITH("'loss':'logistic\\u0000x'"), "loss",
     "(got \"logistic\\u0000x\")"},
    {WITH("'lambda1':-1"), "lambda1", "must be a number in [0, 1000000] (got -1)"},
    {WITH("'lambda1':true"), "lambda1", "must be a number in [0, 1000000] (got true)"},
    {WITH("'lambda1':1000001"), "lambda1", "(got 1000001)"},
    {WITH("'lambda1':'1'"), "lambda1", "(got \"1\")"},
    {WITH("'lambda2':-0.5"), "lambda2",
     "must be 0 (a general convex problem) or a number in [1e-12, 1000000] (got -0.5)"},
    {WITH("'lambda2':5e-324"), "lambda2", "or a number in [1e-12, 1000000] (got 4.9"},
    {WITH("'lambda2':9.9e-13"), "lambda2", "or a number in [1e-12, 1000000]"},
    {WITH("'lambda2':'0'"), "lambda2", "(got \"0\")"},
    {WITH("'lambda2':false"), "lambda2", "(got false)"},
    {WITH("'lambda2':1e308"), "lambda2", "(got 1e+308)"},
    {WITH("'lambda2':{}"), "lambda2", "(got an object)"},
    {WITH("'lambda2_rel':0"), "lambda2_rel", "must be a number in [1e-12, 1000000] (got 0)"},
    {WITH("'lambda2_rel':1e-300"), "lambda2_rel", "must be a number in [1e-12, 1000000]"},
    {WITH("'lambda2_rel':1e7"), "lambda2_rel", "(got 10000000.0)"},
    {WITH("'lambda2_rel':false"), "lambda2_rel", "(got false)"},
    {WITH("'lambda2':1,'lambda2_rel':1"), "lambda2",
     "cannot be given together with lambda2_rel"},
    {WITH("'workers':0"), "workers",
     "must be an integer in 1..4096 (got 0)"},
    {WITH("'workers':4097"), "workers", "in 1..4096 (got 4097)"},
    {WITH("'workers':3.0"), "workers",
     "must be an integer in 1..4096 (got 3.0)"},
    {WITH("'workers':2.5"), "workers", "(got 2.5)"},
    {WITH("'workers':'20'"), "workers", "(got \"20\")"},
    {WITH("'workers':true"), "workers", "(got true)"},
    {WITH("'workers':-9223372036854775808"), "workers",
     "(got -9223372036854775808)"},
    {WITH("'algorithm':'adam'"), "algorithm",
     "must be one of: eclk, lkatyusha, ec-sgd, ec-gd, ec-lsvrg, ec-sgd-diana, "
     "ec-gd-diana, ef21, gd, sgd, ec-lsvrg-qian, ec-lsvrg-diana, adiana, econtrol, adef (got "
     "\"adam\")"},
    {WITH("'algorithm':'ECLK'"), "algorithm", "(got \"ECLK\")"},
    {WITH("'algorithm':7"), "algorithm", "(got 7)"},
    {WITH("'compressor':5"), "compressor",
     "must be an object {type, k, k_frac, s} or a compressor name, one of: "
     "none, topk, randk, randk-unbiased, dither, dither-unbiased, natural, "
     "natural-dither, natural-dither-unbiased (got 5)"},
    {WITH("'compressor':['topk']"), "compressor", "(got an array)"},
    {WITH("'compressor':'zip'"), "compressor", "one of: none, topk"},
    {WITH("'compressor':'topk'"), "compressor.k",
     "is required for compressor type topk"},
    {WITH("'compressor':{'k':3}"), "compressor.type", "is required; one of"},
    {WITH("'compressor':{'type':null,'k':3}"), "compressor.type",
     "is required"},
    {WITH("'compressor':{'type':7}"), "compressor.type", "(got 7)"},
    {WITH("'compressor':{'type':'randk'}"), "compressor.k",
     "give compressor.k (an integer >= 1) or compressor.k_frac"},
    {WITH("'compressor':{'type':'randk-unbiased','k':null}"), "compressor.k",
     "is required for compressor type randk-unbiased"},
    {WITH("'compressor':{'type':'topk','k':0}"), "compressor.k",
     "must be an integer in 1..4294967295 (got 0)"},
    {WITH("'compressor':{'type':'topk','k':4294967296}"), "compressor.k",
     "(got 4294967296)"},
    {WITH("'compressor':{'type':'topk','k':1.5}"), "compressor.k",
     "must be an integer"},
    {WITH("'compressor':{'type':'topk','k':2,'k_frac':0.1}"), "compressor.k",
     "cannot be given together with compressor.k_frac"},
    {WITH("'compressor':{'type':'randk','k_frac':0}"), "compressor.k_frac",
     "must be a number in (0, 1] (got 0)"},
    {WITH("'compressor':{'type':'randk','k_frac':1.5}"), "compressor.k_frac",
     "(got 1.5)"},
    {WITH("'compressor':{'type':'none','k':3}"), "compressor.k",
     "is not allowed for compressor type none"},
    {WITH("'compressor':{'type':'dither','k_frac':0.5}"),
     "compressor.k_frac", "is not allowed for compressor type dither"},
    {WITH("'compressor_down':5"), "compressor_down",
     "must be an object {type, k, k_frac, s} or a compressor name"},
    {WITH("'compressor_down':'zip'"), "compressor_down", "one of: none, topk"},
    {WITH("'compressor_down':'topk'"), "compressor_down.k",
     "is required for compressor type topk: give compressor_down.k (an "
     "integer >= 1) or compressor_down.k_frac"},
    {WITH("'compressor_down':{'k':3}"), "compressor_down.type", "is required; one of"},
    {WITH("'compressor_down':{'type':'topk','k':0}"), "compressor_down.k",
     "must be an integer in 1..4294967295 (got 0)"},
    {WITH("'compressor_down':{'type':'topk','k':2,'k_frac':0.1}"), "compressor_down.k",
     "cannot be given together with compressor_down.k_frac"},
    {WITH("'compressor_down':{'type':'randk','k_frac':1.5}"), "compressor_down.k_frac",
     "(got 1.5)"},
    {WITH("'compressor_down':{'type':'topk','k':3,'s':2}"), "compressor_down.s",
     "is not allowed for compressor type topk"},
    {WITH("'compressor_down':{'type':'topk','k':3,'z':2}"), "compressor_down.z",
     "unknown key"},
    {WITH("'compressor':{'type':'topk','k':3,'s':2}"), "compressor.s",
     "is not allowed for compressor type topk; only dither, "
     "dither-unbiased, natural-dither and natural-dither-unbiased take s"},
    {WITH("'compressor':{'type':'natural','s':2}"), "compressor.s",
     "is not allowed for compressor type natural"},
    {WITH("'compressor':{'type':'natural','k':2}"), "compressor.k",
     "is not allowed for compressor type natural"},
    {WITH("'compressor':{'type':'dither','s':0}"), "compressor.s",
     "must be an integer in 1..65535 (got 0)"},
    {WITH("'compressor':{'type':'dither','s':65536}"), "compressor.s",
     "(got 65536)"},
    {WITH("'compressor':{'type':'topk','k':1,'x':1}"), "compressor.x",
     "unknown key; allowed keys are: type, k, k_frac, s"},
    {WITH("'batch':0"), "batch", "must be an integer in 1..4294967295 (got 0)"},
    {WITH("'batch':1.0"), "batch", "must be an integer"},
    {WITH("'p':0"), "p", "must be a number in (0, 1] (got 0)"},
    {WITH("'p':1.5"), "p", "(got 1.5)"},
    {WITH("'p':'auto'"), "p", "(got \"auto\")"},
    {WITH("'participation':0"), "participation", "must be a number in (0, 1] (got 0)"},
    {WITH("'participation':1.01"), "participation", "(got 1.01)"},
    {WITH("'participation':-0.5"), "participation", "(got -0.5)"},
    {WITH("'participation':'half'"), "participation", "(got \"half\")"},
    {WITH("'step_size':0"), "step_size", "must be a number > 0 (got 0)"},
    {WITH("'step_size':-1e-3"), "step_size", "(got -0.001)"},
    {WITH("'step_multiplier':0"), "step_multiplier",
     "must be a number > 0 (got 0)"},
    {WITH("'step_size':1,'step_multiplier':1"), "step_size",
     "cannot be given together with step_multiplier"},
    {WITH("'smoothness_multiplier':0"), "smoothness_multiplier",
     "must be a number > 0 (got 0)"},
    {WITH("'smoothness_multiplier':-2"), "smoothness_multiplier", "(got -2)"},
    {WITH("'smoothness_multiplier':'x2'"), "smoothness_multiplier", "(got \"x2\")"},
    {WITH("'eclk_rule':'fast'"), "eclk_rule",
     "must be one of: plain, nominal, online, adaptive (got \"fast\")"},
    {WITH("'eclk_rule':1"), "eclk_rule", "must be one of"},
    {WITH("'eclk_guard':'on'"), "eclk_guard", "must be true or false"},
    {WITH("'eclk_guard':1"), "eclk_guard", "must be true or false"},
    {WITH("'eclk_guard_threshold':1"), "eclk_guard_threshold",
     "must be a number in (1, 1000000] (got 1)"},
    {WITH("'eclk_guard_threshold':1e7"), "eclk_guard_threshold", "(got 10000000.0)"},
    {WITH("'eclk_guard_threshold':'10x'"), "eclk_guard_threshold", "(got \"10x\")"},
    {WITH("'eclk_guard':false,'eclk_guard_threshold':4"), "eclk_guard_threshold",
     "cannot be given with eclk_guard false"},
    {WITH("'algorithm':'econtrol','econtrol_eta':1.5"), "econtrol_eta",
     "must be a number in [0, 1] (got 1.5)"},
    {WITH("'algorithm':'econtrol','econtrol_eta':-0.1"), "econtrol_eta", "(got -0.1)"},
    {WITH("'algorithm':'econtrol','econtrol_eta':'half'"), "econtrol_eta", "(got \"half\")"},
    {WITH("'algorithm':'ec-gd','econtrol_eta':0.5"), "econtrol_eta",
     "applies to algorithm econtrol only (got ec-gd)"},
    {WITH("'algorithm':'ec-gd','eclk_rule':'plain'"), "eclk_rule",
     "applies to algorithm eclk only (got ec-gd)"},
    {WITH("'algorithm':'lkatyusha','eclk_guard':true"), "eclk_guard",
     "applies to algorithm eclk only (got lkatyusha)"},
    {WITH("'max_rounds':0"), "max_rounds",
     "must be an integer in 1..100000000 (got 0)"},
    {WITH("'max_rounds':100000001"), "max_rounds", "(got 100000001)"},
    {WITH("'max_rounds':1e3"), "max_rounds", "(got 1000.0)"},
    {WITH("'target':1"), "target", "must be a number in [0, 1) (got 1)"},
    {WITH("'target':-0.1"), "target", "(got -0.1)"},
    {WITH("'eval_every':0"), "eval_every", "must be an integer in 1.."},
    {WITH("'seed':-1"), "seed",
     "must be an integer in 0..9007199254740992 (got -1)"},
    {WITH("'seed':9007199254740993"), "seed", "(got 9007199254740993)"},
    {WITH("'seed':9223372036854775807"), "seed", "0..9007199254740992"},
    {WITH("'seed':1.0"), "seed", "must be an integer"},
    {WITH("'shuffle':1"), "shuffle", "must be true or false (got 1)"},
    {WITH("'shuffle':'true'"), "shuffle", "(got \"true\")"},
    {WITH("'split':'random'"), "split",
     "must be one of: contiguous, shuffled, label_skew, dirichlet "
     "(got \"random\")"},
    {WITH("'split':1"), "split", "(got 1)"},
    {WITH("'batch':'all'"), "batch",
     "must be an integer >= 1 or \"full\" (the whole shard) (got \"all\")"},
    {WITH("'batch':0"), "batch", "must be an integer in 1.."},
    {WITH("'split':'label_skew','shuffle':true"), "shuffle",
     "true means split \"shuffled\" and cannot be given with split "
     "\"label_skew\""},
    {WITH("'split_alpha':0.5"), "split_alpha",
     "applies to split \"dirichlet\" alone (split is \"contiguous\")"},
    {WITH("'split':'dirichlet','split_alpha':0"), "split_alpha",
     "must be a number in (0, 1000000] (got 0)"},
    {WITH("'split':'dirichlet','split_alpha':1e7"), "split_alpha",
     "(got 10000000.0)"},
    {WITH("'split':'dirichlet','split_alpha':'1'"), "split_alpha",
     "(got \"1\")"},
    {WITH("'max_seconds':0"), "max_seconds",
     "must be a number in (0, 2592000] (got 0)"},
    {WITH("'max_seconds':2592001"), "max_seconds", "(got 2592001)"},
    {WITH("'max_seconds':1e300"), "max_seconds", "(got 1e+300)"},
    {WITH("'name':''"), "name", "must be a string of 1..128 bytes (got 0)"},
    {WITH("'name':5"), "name", "(got 5)"},
    {WITH("'name':'a\\u0000'"), "name", "must not contain a NUL"},
    {WITH("'name':'\\u001b]52;c;aGk=\\u0007'"), "name",
     "must not contain control characters (U+001B at byte 0)"},
    {WITH("'name':'ring\\u0007'"), "name", "(U+0007 at byte 4)"},
    {WITH("'name':'a\\nb'"), "name", "(U+000A at byte 1)"},
    {WITH("'name':'del\\u007f'"), "name", "(U+007F at byte 3)"},
    {WITH("'name':'csi\\u009b2J'"), "name", "(U+009B at byte 3)"},
    {WITH("'labels':{'team':'a\\u001b[2J'}"), "labels.team",
     "must not contain control characters (U+001B at byte 1)"},
    {WITH("'labels':[]"), "labels", "must be an object"},
    {WITH("'labels':'team=opt'"), "labels", "(got \"team=opt\")"},
    {WITH("'labels':{'team':5}"), "labels.team",
     "must be a string of 0..256 bytes (got 5)"},
    {WITH("'labels':{'team':null}"), "labels.team", "(got null)"},
    {WITH("'labels':{'team':{'a':{'b':[1]}}}"), "labels.team",
     "(got an object)"},
    {WITH("'labels':{'team':'a\\u0000'}"), "labels.team", "NUL"},
    {WITH("'labels':{'bad key':'x'}"), "labels",
     "key \"bad key\" must be 1..64 characters of A-Z, a-z, 0-9"},
    {WITH("'labels':{'':'x'}"), "labels", "key \"\" must be"},
    {WITH("'labels':{'t\\u00e9am':'x'}"), "labels", "key \"t\u00e9am\""},
    {WITH("'backend':'threads'"), "backend",
     "must be one of: inproc, process, mpi (got \"threads\")"},
    {WITH("'backend':1"), "backend", "(got 1)"},
    {WITH("'workerz':20"), "workerz",
     "unknown key; allowed keys are: dataset, loss, lambda1, lambda2, "
     "lambda2_rel, workers, algorithm, compressor, compressor_down, batch, "
     "participation, p, step_size, step_multiplier, smoothness_multiplier, eclk_rule, "
     "eclk_guard, eclk_guard_threshold, econtrol_eta, max_rounds, target, "
     "eval_every, seed, split, split_alpha, shuffle, max_seconds, name, "
     "labels, backend, procs"},
    {WITH("'Dataset':'x'"), "Dataset", "unknown key"},
    {WITH("'w\\u00f6rkers':1"), "w\u00f6rkers", "unknown key"},
    {WITH("'x\\n\\u001b[31m':1"), "x\\u000a\\u001b[31m", "unknown key"},
};

START_TEST(test_bad_field)
{
    const struct bad_case *bc = &bad_cases[_i];
    struct jobspec spec;
    struct jobspec_errors errs;
    char msg[4096];
    int rc = parse_sq(bc->doc, &spec, &errs);

    jobspec_errors_format(&errs, msg, sizeof msg);
    ck_assert_msg(rc == EC_EINVAL, "%s: rc %d", bc->doc, rc);
    ck_assert_msg(errs.count == 1, "%s: %u errors:\n%s", bc->doc, errs.count,
                  msg);
    expect_error(&errs, bc->field, bc->phrase);
    expect_json_safe(&errs);
    /* A failed parse leaves the defaults, not half a spec. */
    ck_assert_str_eq(spec.job.dataset, "");
    ck_assert_uint_eq(spec.job.workers, 20);
}
END_TEST

/* ---- Not JSON, or not an object -------------------------------------- */

static const struct bad_case syntax_cases[] = {
    {"", "", "the document is empty"},
    {" \n\t ", "", "the document is empty"},
    {"{", "", "invalid JSON at line 1, column 1"},
    {"{'dataset':'a9a',}", "", "invalid JSON at line 1"},
    {"{'dataset':'a9a'} {}", "", "invalid JSON"},
    {"{'dataset':'a9a'}\n\n  x", "", "invalid JSON at line 3, column 3"},
    {"{'dataset':'a9a','dataset':'b'}", "", "duplicate key at line 1"},
    {WITH("'compressor':{'type':'topk','type':'none'}"), "", "duplicate key"},
    {WITH("'labels':{'x':'1','x':'2'}"), "", "duplicate key"},
    {WITH("'workers':99999999999999999999"), "", "number out of range"},
    {WITH("'seed':-99999999999999999999"), "", "number out of range"},
    {WITH("'lambda1':1e400"), "", "number out of range"},
    {WITH("'lambda1':NaN"), "", "invalid JSON"},
    {WITH("'lambda1':Infinity"), "", "invalid JSON"},
    {WITH("'lambda1':-inf"), "", "invalid JSON"},
    {WITH("'workers':0x10"), "", "invalid JSON"},
    {WITH("'workers':+1"), "", "invalid JSON"},
    {WITH("'workers':01"), "", "invalid JSON"},
    {WITH("'name':'\xff'"), "", "invalid JSON"},
    {WITH("'name':'\xc3'"), "", "invalid JSON"},
    {WITH("'name':'\\ud800'"), "", "invalid JSON"},
    {WITH("'a\\u0000':1"), "", "NUL"},
    {"{dataset:'a9a'}", "", "invalid JSON"},
    {"{'dataset':'a9a' // comment\n}", "", "invalid JSON"},
};

START_TEST(test_syntax_error)
{
    const struct bad_case *bc = &syntax_cases[_i];
    struct jobspec spec;
    struct jobspec_errors errs;
    int rc = parse_sq(bc->doc, &spec, &errs);

    ck_assert_msg(rc == EC_EPARSE, "%s: rc %d", bc->doc, rc);
    ck_assert_uint_eq(errs.count, 1);
    expect_error(&errs, bc->field, bc->phrase);
    expect_json_safe(&errs);
}
END_TEST

static const struct bad_case not_object_cases[] = {
    {"[]", "", "must be a JSON object (got an array)"},
    {"[{'dataset':'a9a'}]", "", "(got an array)"},
    {"42", "", "must be a JSON object (got 42)"},
    {"'a9a'", "", "(got \"a9a\")"},
    {"null", "", "(got null)"},
    {"true", "", "(got true)"},
    {"1.5", "", "(got 1.5)"},
};

START_TEST(test_not_an_object)
{
    const struct bad_case *bc = &not_object_cases[_i];
    struct jobspec spec;
    struct jobspec_errors errs;

    ck_assert_int_eq(parse_sq(bc->doc, &spec, &errs), EC_EINVAL);
    ck_assert_uint_eq(errs.count, 1);
    expect_error(&errs, bc->field, bc->phrase);
}
END_TEST

/* ---- Several problems at once ---------------------------------------- */

START_TEST(test_all_errors_reported)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    char msg[4096];
    size_t need;

    ck_assert_int_eq(
        parse_sq("{'loss':'hinge','workers':0,'compressor':{'type':'topk',"
                 "'s':3},'p':2,'colour':'red','labels':{'team':1},"
                 "'lambda2':1,'lambda2_rel':2,'seed':-5}",
                 &spec, &errs),
        EC_EINVAL);
    ck_assert_uint_eq(errs.count, 10);
    ck_assert_uint_eq(errs.dropped, 0);
    expect_error(&errs, "colour", "unknown key");
    expect_error(&errs, "dataset", "is required");
    expect_error(&errs, "loss", "one of");
    expect_error(&errs, "lambda2", "together with lambda2_rel");
    expect_error(&errs, "workers", "1..4096");
    expect_error(&errs, "compressor.k", "is required for compressor type topk");
    expect_error(&errs, "compressor.s", "is not allowed");
    expect_error(&errs, "p", "(0, 1]");
    expect_error(&errs, "seed", "(got -5)");
    expect_error(&errs, "labels.team", "must be a string");

    need = jobspec_errors_format(&errs, msg, sizeof msg);
    ck_assert_uint_eq(need, strlen(msg));
    ck_assert_msg(
        strstr(msg, "workers: must be an integer in 1..4096 (got 0)\n"),
        "%s", msg);
    ck_assert_msg(strncmp(msg, "colour: unknown key;", 20) == 0, "%s", msg);
}
END_TEST

START_TEST(test_error_overflow_counted)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    json_t *doc = json_object();
    char key[24], msg[16384];

    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "extra%d", i);
        json_object_set_new(doc, key, json_integer(i));
    }
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    ck_assert_uint_eq(errs.count, JOBSPEC_MAX_ERRORS);
    ck_assert_uint_eq(errs.dropped, 41 - JOBSPEC_MAX_ERRORS);  /* + dataset */
    jobspec_errors_format(&errs, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "\n(and 9 more problems)"), "%s", msg);
    /* Without a place for errors the verdict is the same. */
    ck_assert_int_eq(jobspec_from_json(doc, &spec, NULL), EC_EINVAL);
    json_decref(doc);
}
END_TEST

START_TEST(test_format_truncates)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    char small[20], full[1024];
    size_t need;

    parse_sq("{'workers':0}", &spec, &errs);
    need = jobspec_errors_format(&errs, full, sizeof full);
    ck_assert_uint_eq(jobspec_errors_format(&errs, small, sizeof small), need);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert(strncmp(small, full, sizeof small - 1) == 0);
    ck_assert_uint_eq(jobspec_errors_format(&errs, NULL, 0), need);
    ck_assert_str_eq(full, "dataset: is required: a path or a dataset name "
                           "of 1..1023 bytes\nworkers: must be an integer "
                           "in 1..4096 (got 0)");
    ck_assert_uint_eq(jobspec_errors_format(NULL, full, sizeof full), 0);
    ck_assert_str_eq(full, "");
}
END_TEST

/* ---- Lengths and counts at their limits ------------------------------ */

/* {"dataset":"a9a", "<key>": "<n times ch>"} */
static char *doc_with_string(const char *key, size_t n, char ch)
{
    size_t cap = n + strlen(key) + 64;
    char *doc = malloc(cap);
    int head;

    ck_assert_ptr_nonnull(doc);
    head = snprintf(doc, cap, "{\"dataset\":\"a9a\",\"%s\":\"", key);
    memset(doc + head, ch, n);
    strcpy(doc + head + n, "\"}");
    return doc;
}

static int parse_text(const char *text, struct jobspec *spec,
                      struct jobspec_errors *errs)
{
    return jobspec_parse(text, strlen(text), spec, errs);
}

START_TEST(test_string_limits)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    char *doc;

    /* dataset is the one key doc_with_string cannot vary. */
    doc = malloc(2000);
    ck_assert_ptr_nonnull(doc);
    strcpy(doc, "{\"dataset\":\"");
    memset(doc + 12, 'd', 1023);
    strcpy(doc + 12 + 1023, "\"}");
    parse_ok(doc, &spec);
    ck_assert_uint_eq(strlen(spec.job.dataset), 1023);
    strcpy(doc + 12 + 1023, "d\"}");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "dataset", "1..1023 bytes (got 1024)");
    free(doc);

    doc = doc_with_string("name", 128, 'n');
    parse_ok(doc, &spec);
    ck_assert_uint_eq(strlen(spec.name), 128);
    free(doc);
    doc = doc_with_string("name", 129, 'n');
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "name", "1..128 bytes (got 129)");
    free(doc);
}
END_TEST

START_TEST(test_label_limits)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    json_t *doc = json_pack("{s:s}", "dataset", "a9a");
    json_t *labels = json_object();
    char key[80], value[300];

    json_object_set_new(doc, "labels", labels);
    for (int i = 0; i < JOBSPEC_LABELS_MAX; i++) {
        snprintf(key, sizeof key, "k%02d", JOBSPEC_LABELS_MAX - i);
        json_object_set_new(labels, key, json_string("v"));
    }
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), 0);
    ck_assert_uint_eq(spec.nlabels, JOBSPEC_LABELS_MAX);
    ck_assert_str_eq(spec.labels[0].key, "k01");
    check_round_trip(&spec);

    json_object_set_new(labels, "k33", json_string("v"));
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    ck_assert_uint_eq(errs.count, 1);
    expect_error(&errs, "labels", "at most 32 entries (got 33)");
    json_object_clear(labels);

    memset(key, 'k', 64);
    key[64] = '\0';
    memset(value, 'v', 256);
    value[256] = '\0';
    json_object_set_new(labels, key, json_string(value));
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), 0);
    ck_assert_str_eq(spec.labels[0].value, value);
    check_round_trip(&spec);

    json_object_clear(labels);
    key[64] = 'k';
    key[65] = '\0';
    json_object_set_new(labels, key, json_string("v"));
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "labels", "must be 1..64 characters");

    json_object_clear(labels);
    value[256] = 'v';
    value[257] = '\0';
    json_object_set_new(labels, "team", json_string(value));
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "labels.team", "0..256 bytes (got 257)");
    json_decref(doc);
}
END_TEST

/* Keys and values that Jansson lets a caller build but JSON text cannot. */
START_TEST(test_built_documents)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    json_t *doc = json_pack("{s:s}", "dataset", "a9a");

    json_object_setn_new(doc, "workers\0x", 9, json_integer(3));
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "workers\\u0000x", "unknown key");
    json_decref(doc);

    doc = json_pack("{s:s#}", "dataset", "a9a\0", (int)4);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(jobspec_from_json(doc, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "dataset", "NUL");
    json_decref(doc);

    ck_assert_int_eq(jobspec_from_json(NULL, &spec, &errs), EC_EINVAL);
    expect_error(&errs, "", "must be a JSON object");
}
END_TEST

/* User text in details is cut, escaped and still valid UTF-8. */
START_TEST(test_quoted_text_is_safe)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    char *doc;
    size_t n = 300;
    size_t cap = 5 * n + 64;

    doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    strcpy(doc, "{\"dataset\":\"a9a\",\"loss\":\"");
    for (size_t i = 0; i < n; i++)
        strcat(doc, "\xc3\xa9");                          /* e acute */
    strcat(doc, "\",\"");
    for (size_t i = 0; i < n; i++)
        strcat(doc, "\xe2\x82\xac");                      /* euro sign */
    strcat(doc, "\":1}");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EINVAL);
    ck_assert_uint_eq(errs.count, 2);
    expect_error(&errs, "loss", "\xc3\xa9...\")");
    ck_assert_uint_lt(strlen(errs.item[0].field), sizeof errs.item[0].field);
    expect_json_safe(&errs);
    free(doc);

    ck_assert_int_eq(parse_sq(WITH("'loss':'a\\'b\\\\c\\u0007'"), &spec,
                              &errs),
                     EC_EINVAL);
    expect_error(&errs, "loss", "(got \"a\\\"b\\\\c\\u0007\")");
}
END_TEST

/* ---- Hostile input --------------------------------------------------- */

static const char full_doc[] =
    "{\"dataset\":\"mushrooms\",\"loss\":\"squared\",\"lambda1\":1e-3,"
    "\"lambda2_rel\":0.5,\"workers\":8,\"algorithm\":\"ec-lsvrg\","
    "\"compressor\":{\"type\":\"topk\",\"k\":3},\"batch\":2,\"p\":0.5,"
    "\"step_multiplier\":2,\"max_rounds\":500,\"target\":1e-6,"
    "\"eval_every\":5,\"seed\":42,\"shuffle\":true,\"max_seconds\":60.5,"
    "\"name\":\"n\\u00e9\",\"labels\":{\"team\":\"opt\",\"x\":\"\\\"\"},"
    "\"backend\":\"inproc\"}";

/* Every strict prefix of a document is an error, read through an exact-size
 * buffer so that an over-read shows up under AddressSanitizer. */
START_TEST(test_every_prefix_fails)
{
    size_t len = strlen(full_doc);
    struct jobspec spec;
    struct jobspec_errors errs;

    parse_ok(full_doc, &spec);
    check_round_trip(&spec);
    for (size_t n = 0; n < len; n++) {
        char *buf = malloc(n ? n : 1);

        ck_assert_ptr_nonnull(buf);
        memcpy(buf, full_doc, n);
        ck_assert_msg(jobspec_parse(buf, n, &spec, &errs) == EC_EPARSE,
                      "prefix of %zu bytes parsed", n);
        ck_assert_uint_eq(errs.count, 1);
        ck_assert_str_eq(errs.item[0].field, "");
        expect_json_safe(&errs);
        free(buf);
    }
}
END_TEST

/* Each byte replaced by each of a few troublemakers: never a crash, errors
 * always printable as JSON, and whatever parses survives a round trip. */
START_TEST(test_mutations)
{
    static const char subst[] = {'"', '}', '{', '[', ']', ',', ':', '0', '-',
                                 '.', 'e', '\\', ' ', '\0', '\x80', '\xff',
                                 'n', 't'};
    size_t len = strlen(full_doc);
    struct jobspec spec;
    struct jobspec_errors errs;
    char *buf = malloc(len);
    unsigned parsed = 0;

    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < len; i++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            int rc;

            memcpy(buf, full_doc, len);
            buf[i] = subst[s];
            rc = jobspec_parse(buf, len, &spec, &errs);
            if (rc == 0) {
                parsed++;
                check_round_trip(&spec);
            } else {
                ck_assert(rc == EC_EPARSE || rc == EC_EINVAL);
                ck_assert_uint_ge(errs.count, 1);
                expect_json_safe(&errs);
            }
        }
    }
    ck_assert_uint_gt(parsed, 0);
    free(buf);
}
END_TEST

static char *repeat(const char *head, const char *unit, size_t times,
                    const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1), *p;

    ck_assert_ptr_nonnull(s);
    memcpy(s, head, hl);
    p = s + hl;
    for (size_t i = 0; i < times; i++, p += ul)
        memcpy(p, unit, ul);
    memcpy(p, tail, tl + 1);
    return s;
}

START_TEST(test_deep_nesting)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    char *doc;

    doc = repeat("", "[", 100000, "");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EPARSE);
    expect_error(&errs, "", "nesting too deep");
    free(doc);

    doc = repeat("", "{\"a\":", 100000, "");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EPARSE);
    expect_error(&errs, "", "nesting too deep");
    free(doc);

    doc = repeat("{\"dataset\":\"a9a\",\"labels\":{\"x\":", "[", 100000, "");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EPARSE);
    expect_error(&errs, "", "nesting too deep");
    free(doc);

    /* Deep but within Jansson's limit: a plain type error, no descent. */
    doc = repeat("{\"dataset\":\"a9a\",\"labels\":{\"x\":", "[", 2000, "");
    {
        char *closed = repeat(doc, "]", 2000, "}}");

        ck_assert_int_eq(parse_text(closed, &spec, &errs), EC_EINVAL);
        ck_assert_uint_eq(errs.count, 1);
        expect_error(&errs, "labels.x", "(got an array)");
        free(closed);
    }
    free(doc);

    doc = repeat("{\"dataset\":\"a9a\",\"compressor\":", "{\"type\":", 2000,
                 "");
    ck_assert_int_eq(parse_text(doc, &spec, &errs), EC_EPARSE);
    free(doc);
}
END_TEST

START_TEST(test_odd_buffers)
{
    struct jobspec spec;
    struct jobspec_errors errs;
    const char with_nul[] = "{\"dataset\":\"a9a\"}\0garbage";

    /* The length is what counts: a NUL byte before it is an error... */
    ck_assert_int_eq(jobspec_parse(with_nul, sizeof with_nul - 1, &spec,
                                   &errs),
                     EC_EPARSE);
    /* ...and bytes after it are not read. */
    ck_assert_int_eq(jobspec_parse(with_nul, 17, &spec, &errs), 0);
    ck_assert_int_eq(jobspec_parse(NULL, 0, &spec, &errs), EC_EPARSE);
    expect_error(&errs, "", "empty");
    ck_assert_int_eq(jobspec_parse("{}", 2, &spec, NULL), EC_EINVAL);
}
END_TEST

START_TEST(test_backend_names)
{
    enum jobspec_backend b;

    for (int i = 0; i < JOBSPEC_BACKEND_COUNT; i++) {
        ck_assert_int_eq(
            jobspec_backend_from_name(jobspec_backend_name(i), &b), 0);
        ck_assert_int_eq(b, i);
    }
    ck_assert_ptr_null(jobspec_backend_name(JOBSPEC_BACKEND_COUNT));
    ck_assert_int_lt(jobspec_backend_from_name("threads", &b), 0);
}
END_TEST

static Suite *jobspec_suite(void)
{
    Suite *s = suite_create("jobspec");
    TCase *valid = tcase_create("valid");
    TCase *bad = tcase_create("bad");
    TCase *hostile = tcase_create("hostile");

    tcase_add_test(valid, test_defaults);
    tcase_add_test(valid, test_null_means_default);
    tcase_add_test(valid, test_full_spec);
    tcase_add_test(valid, test_compressor_forms);
    tcase_add_test(valid, test_lambda_and_step_choices);
    tcase_add_loop_test(valid, test_round_trip, 0,
                        (int)(sizeof round_trip_docs /
                              sizeof round_trip_docs[0]));
    tcase_add_test(valid, test_canonical_form);
    tcase_add_test(valid, test_backend_names);
    suite_add_tcase(s, valid);

    tcase_add_loop_test(bad, test_bad_field, 0,
                        (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_loop_test(bad, test_syntax_error, 0,
                        (int)(sizeof syntax_cases / sizeof syntax_cases[0]));
    tcase_add_loop_test(bad, test_not_an_object, 0,
                        (int)(sizeof not_object_cases /
                              sizeof not_object_cases[0]));
    tcase_add_test(bad, test_all_errors_reported);
    tcase_add_test(bad, test_error_overflow_counted);
    tcase_add_test(bad, test_format_truncates);
    tcase_add_test(bad, test_string_limits);
    tcase_add_test(bad, test_label_limits);
    tcase_add_test(bad, test_built_documents);
    tcase_add_test(bad, test_quoted_text_is_safe);
    suite_add_tcase(s, bad);

    tcase_add_test(hostile, test_every_prefix_fails);
    tcase_add_test(hostile, test_mutations);
    tcase_add_test(hostile, test_deep_nesting);
    tcase_add_test(hostile, test_odd_buffers);
    tcase_set_timeout(hostile, 120);
    suite_add_tcase(s, hostile);
    return s;
}

int main(void)
{
    return tu_run(jobspec_suite());
}
