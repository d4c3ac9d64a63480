#!/usr/bin/python3
"""Shows that the reference check catches real bugs (docs/testing.md,
"Mutations the reference check catches").

Each mutation below is a deliberate bug in the engine, at least one per
algorithm. For each, a temporary copy of engine/ and tests/reference/ gets
the bug, trace_run is rebuilt there, and tests/reference/run.sh runs the
cases of the algorithm the bug is aimed at: the check must fail. The tree
itself is never touched. Prints a table (mutation, cases run, the first
failure) and exits 1 if any mutation went unnoticed.

    tools/mutation-check.py [WORD]     only the mutations whose name has WORD
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = os.environ.get("CC", "cc")
CFLAGS = ["-std=c11", "-O2", "-D_DEFAULT_SOURCE", "-D_POSIX_C_SOURCE=200809L",
          "-Iengine/include"]

# (name, file, text, replacement, the cases to run: a run.sh filter)
MUTATIONS = [
    ("eclk: the error memory keeps half of what was sent",
     "engine/src/algo.c",
     "        w->e[q->idx[i]] -= q->val[i];\n    for (uint32_t j = 0; j < d; j++)\n        out +=",
     "        w->e[q->idx[i]] -= 0.5 * q->val[i];\n    for (uint32_t j = 0; j < d; j++)\n        out +=",
     "eclk compressor=topk"),
    ("eclk: the online estimate counts the rounds before 1/delta too",
     "engine/src/algo.c",
     "(double)m->round * p->delta < 1.0)",
     "(double)m->round * p->delta < 0.0)",
     "eclk compressor=topk k=5 batch"),
    ("eclk adaptive: the guard measures P(w)'s rise from P(x0), not from its best",
     "engine/src/algo.c",
     "    return v - m->value_best > EC_ECLK_GUARD_OBJECTIVE",
     "    return v - m->value_start > EC_ECLK_GUARD_OBJECTIVE",
     "eclk compressor=randk k=2 eclk_rule=adaptive"),
    ("eclk adaptive: the guard never moves its snapshot past x0",
     "engine/src/algo.c",
     "        if (v < m->value_best) {",
     "        if (v < m->value_best && 0) {",
     "eclk compressor=randk k=2 eclk_rule=adaptive"),
    ("eclk adaptive: the fall back on a rise past 1 (P(x0) - best), not 2",
     "engine/src/algo.c",
     "v - m->value_best > EC_ECLK_GUARD_SEVERE *",
     "v - m->value_best > 1.0 *",
     "eclk compressor=randk k=2 eclk_rule=adaptive seed=2"),
    ("eclk guard: a restart keeps the workers' error memories",
     "engine/src/algo.c",
     "            memset(w->e, 0, d * sizeof *w->e);\n            w->ef_in = w->ef_out = 0.0;",
     "            w->ef_in = w->ef_out = 0.0;",
     "eclk compressor=randk k=1 eclk_rule=adaptive seed=2"),
    ("eclk, lkatyusha: x mixes y and w with each other's weights",
     "engine/src/algo.c",
     "p->theta2 * m->w[j] + t3 * m->y[j]",
     "p->theta2 * m->y[j] + t3 * m->w[j]",
     "eclk compressor=randk"),
    ("lkatyusha: z' without the eta sigma x term",
     "engine/src/algo.c",
     "m->tmp[j] = (es * m->x[j] + m->z[j] -",
     "m->tmp[j] = (m->z[j] -",
     "lkatyusha compressor=none"),
    ("lkatyusha: the coin keeps the old full gradient u",
     "engine/src/algo.c",
     "            memcpy(m->u, down->a, d * sizeof *m->u);\n        }\n        for (uint32_t j = 0; j < d; j++) {",
     "        }\n        for (uint32_t j = 0; j < d; j++) {",
     "lkatyusha compressor=none"),
    ("ec-sgd: a minibatch gradient without lambda2 x",
     "engine/src/problem.c",
     "    } else {\n        for (uint32_t j = 0; j < pb->d; j++)\n            g[j] = pb->lambda2 * x[j];\n    }",
     "    } else {\n        for (uint32_t j = 0; j < pb->d; j++)\n            g[j] = 0.0;\n    }",
     "ec-sgd compressor=topk"),
    ("ec-gd: no error feedback (the memory is dropped after each send)",
     "engine/src/algo.c",
     "    ec_compress(w->comp, w->e, &w->rng, q);\n    for (uint32_t i = 0; i < q->nnz; i++)\n        w->e[q->idx[i]] -= q->val[i];\n}",
     "    ec_compress(w->comp, w->e, &w->rng, q);\n    for (uint32_t i = 0; i < q->nnz; i++)\n        w->e[q->idx[i]] -= q->val[i];\n    memset(w->e, 0, w->pb->d * sizeof *w->e);\n}",
     "ec-gd compressor=topk"),
    ("ec-lsvrg: the reference point is never refreshed",
     "engine/src/algo.c",
     "    if (w->refreshed) {",
     "    if (0 && w->refreshed) {",
     "ec-lsvrg compressor=topk"),
    ("ec-lsvrg: the refresh takes w_tau but keeps the old full gradient",
     "engine/src/algo.c",
     "        ec_shard_grad(w->pb, w->tau, w->w_local, w->mu_local);\n    }\n}",
     "    }\n}",
     "ec-lsvrg compressor=randk"),
    ("ec-lsvrg-diana: g_hat without the control variate (a plain minibatch gradient)",
     "engine/src/algo.c",
     "            lsvrg_grad(w, m->x, g);\n        else",
     "            local_grad(w, m->x, NULL, g);\n        else",
     "ec-lsvrg-diana compressor=topk"),
    ("ec-lsvrg-diana: the error memory takes gamma (g_hat - h_tau), without the mean shift h",
     "engine/src/algo.c",
     "                ef[j] += gamma * (t + u[j]);",
     "                ef[j] += gamma * t;",
     "ec-lsvrg-diana compressor=randk"),
    ("ec-lsvrg-diana: the worker's reference point is never refreshed",
     "engine/src/algo.c",
     "    if (w->refreshed) {",
     "    if (0 && w->refreshed) {",
     "ec-lsvrg-diana compressor=dither"),
    ("ec-lsvrg-qian: the coin moves w but keeps the old full gradient u",
     "engine/src/algo.c",
     "        if (m->coin)\n            memcpy(m->u, down->a, d * sizeof *m->u);\n        m->round++;",
     "        m->round++;",
     "ec-lsvrg-qian compressor=topk"),
    ("ec-lsvrg-qian: the server step without the snapshot's gradient u",
     "engine/src/algo.c",
     "            m->x[j] = m->x[j] - down->v[j] - p->gamma * m->u[j];",
     "            m->x[j] = m->x[j] - down->v[j];",
     "ec-lsvrg-qian compressor=randk"),
    ("adiana: the coin moves w to the new y, not to the y before the round",
     "engine/src/algo.c",
     "        if (m->coin)\n            memcpy(m->w, m->y, d * sizeof *m->w);\n        memcpy(m->y, m->tmp, d * sizeof *m->y);",
     "        memcpy(m->y, m->tmp, d * sizeof *m->y);\n        if (m->coin)\n            memcpy(m->w, m->y, d * sizeof *m->w);",
     "adiana compressor=randk"),
    ("adiana: z' without its (1 - beta) x term",
     "engine/src/algo.c",
     "            m->z[j] = beta * m->z[j] + (1.0 - beta) * m->x[j] +",
     "            m->z[j] = beta * m->z[j] +",
     "adiana compressor=dither"),
    ("econtrol: the compressed vector without its eta e term (EF21's)",
     "engine/src/algo.c",
     "                b[j] = eta * ef[j] + g[j];",
     "                b[j] = g[j];",
     "econtrol compressor=topk"),
    ("econtrol: the server's h does not take the mean Delta before the step",
     "engine/src/algo.c",
     "            m->u[j] += down->v[j];\n            m->x[j] -= p->gamma * m->u[j];",
     "            m->x[j] -= p->gamma * m->u[j];\n            m->u[j] += down->v[j];",
     "econtrol compressor=randk"),
    ("partial participation: gd averages the sampled workers' messages over all n",
     "engine/src/algo.c",
     "    double inv = 1.0 / (down->mean_over_participants ? down->participants : n);",
     "    double inv = 1.0 / n;",
     "gd compressor=none participation"),
    ("partial participation: ef21 averages the sampled workers' changes over the sample, not n",
     "engine/src/algo.c",
     "        down->part != NULL && ec_algo_is(m->prm->algo, EC_FAMILY_SGD);",
     "        down->part != NULL;",
     "ef21 compressor=topk k=5 participation"),
    ("partial participation: the workers not sampled step too",
     "engine/src/algo.c",
     "    return !m->part || !m->initialised || m->part[tau];",
     "    return 1;",
     "sgd compressor=none batch=8 participation"),
    ("ef21p: the proxy w is not moved by the broadcast c_t",
     "engine/src/algo.c",
     "            m->x[j] += down->v[j];",
     "            m->x[j] += 0.0 * down->v[j];",
     "compressor_down=topk"),
    ("ef21p: the server steps from the proxy w_t, not from its own x_t",
     "engine/src/algo.c",
     "        x1[j] = m->x_server[j] - down->v[j];",
     "        x1[j] = m->x[j] - down->v[j];",
     "compressor_down=topk"),
    ("ef21p: the server compresses x_{t+1} itself, not x_{t+1} - w_t",
     "engine/src/algo.c",
     "        down->v[j] = x1[j] - m->x[j];",
     "        down->v[j] = x1[j];",
     "compressor_down=randk"),
    ("ec-sgd-diana: the mean shift h moves by the full message, not alpha times it",
     "engine/src/algo.c",
     "                m->u[j] += p->alpha * down->a[j];",
     "                m->u[j] += down->a[j];",
     "ec-sgd-diana compressor=topk"),
    ("ec-gd-diana: a worker's shift h_tau moves by the full message",
     "engine/src/algo.c",
     "        ec_msg_axpy(&up->extra, p->alpha, w->h);",
     "        ec_msg_axpy(&up->extra, 1.0, w->h);",
     "ec-gd-diana compressor=randk"),
    ("ec-gd-diana: DIANA's randk shift unscaled (biased)",
     "engine/src/compress.c",
     "                          ? (double)d / (double)spec->k\n",
     "                          ? 1.0\n",
     "ec-gd-diana compressor=topk"),
    ("ef21: a worker's g_tau never takes its message",
     "engine/src/algo.c",
     "        ec_compress(w->comp, g, &w->rng, &up->q);\n        ec_msg_axpy(&up->q, 1.0, w->h);",
     "        ec_compress(w->comp, g, &w->rng, &up->q);",
     "ef21 compressor=topk"),
    ("ef21: the step factor 64 becomes 32",
     "engine/src/algo.c",
     "#define EF21_STEP_FACTOR 64.0",
     "#define EF21_STEP_FACTOR 32.0",
     "ef21 compressor=randk"),
    ("gd: the step 1/(L_f + lambda2) instead of 1/L_f",
     "engine/src/algo.c",
     "        p->theory_step = 1.0 / pb->L_f;",
     "        p->theory_step = 1.0 / (pb->L_f + pb->lambda2);",
     "gd compressor=none"),
    ("sgd: a minibatch gradient without its shard's weight",
     "engine/src/problem.c",
     "    double scale = pb->shards[tau].weight / nrows;",
     "    double scale = 1.0 / nrows;",
     "sgd compressor=none"),
    ("dither: the contraction without its 1/(1 + omega) scaling",
     "engine/src/compress.c",
     "spec->type == EC_COMP_NATDITHER\n                          ? 1.0 / (1.0 + ec_comp_omega(spec, d))",
     "spec->type == EC_COMP_NATDITHER\n                          ? 1.0",
     "ec-sgd compressor=dither"),
    ("natural: delta 1 - 2 omega instead of 1 - omega",
     "engine/src/compress.c",
     "        return 1.0 - ec_comp_omega(spec, d);",
     "        return 1.0 - 2.0 * ec_comp_omega(spec, d);",
     "ef21 compressor=natural"),
    ("natural: each value 1e-6 off its power of two",
     "engine/src/compress.c",
     "            v = copysign(natural_round(fabs(v), rng), v);",
     "            v = copysign(natural_round(fabs(v), rng) * (1 + 1e-6), v);",
     "ec-gd-diana compressor=natural"),
    ("natural-dither: the levels 1/4 and below sent two levels high",
     "engine/src/compress.c",
     "level = (int)s + e - 1;     /* p = 2^(e-1) */",
     "level = (int)s + e - 1 + (e < 0) * 2;     /* p = 2^(e-1) */",
     "eclk compressor=natural-dither"),
    ("adef: the error memory keeps D - delta unscaled by the round's weight a",
     "engine/src/algo.c",
     "        w->e[j] = -a * t[j];\n    ec_msg_axpy(&up->q, a, w->e);",
     "        w->e[j] = -t[j];\n    ec_msg_axpy(&up->q, 1.0, w->e);",
     "adef compressor=topk"),
    ("adef: the server's control variate ignores the compressed differences",
     "engine/src/algo.c",
     "        m->u[j] += down->a[j];\n        m->z[j] -= a",
     "        m->z[j] -= a",
     "adef compressor=randk"),
    ("adef: theta_{t+1} averages in y_t, not nu_{t+1}",
     "engine/src/algo.c",
     "        m->x[j] = (A * m->x[j] + a * m->z[j]) / A1;\n    m->adef_A",
     "        m->x[j] = (A * m->x[j] + a * m->y[j]) / A1;\n    m->adef_A",
     "adef compressor=none"),
    ("prox: the l1 threshold halved",
     "engine/src/problem.c",
     "void ec_prox_l1(double *x, uint32_t d, double t)\n{",
     "void ec_prox_l1(double *x, uint32_t d, double t)\n{\n    t *= 0.5;",
     "ec-gd compressor=topk k=5 lambda1"),
]


def run(cmd, cwd, env=None):
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def build_objects(work):
    objs = []
    for name in sorted(os.listdir(os.path.join(work, "engine/src"))):
        if name.endswith(".c"):
            obj = os.path.join(work, "obj", name[:-2] + ".o")
            compile_one(work, "engine/src/" + name, obj)
            objs.append(obj)
    return objs


def compile_one(work, src, obj):
    r = run([CC] + CFLAGS + ["-c", src, "-o", obj], work)
    if r.returncode:
        raise SystemExit("mutation-check: %s does not compile:\n%s" % (src, r.stdout))


def link(work, objs):
    r = run([CC] + CFLAGS + ["-o", "trace_run", "tests/reference/trace_run.c"] + objs
            + ["-lz", "-lm"], work)
    return r.returncode == 0, r.stdout


def main(argv):
    word = argv[1] if len(argv) > 1 else ""
    env = dict(os.environ)
    env.setdefault("ECOPT_DATA_DIR", os.path.abspath(os.path.join(ROOT, "../shared/datasets")))
    work = tempfile.mkdtemp(prefix="ecopt-mutation-")
    unnoticed = 0
    try:
        shutil.copytree(os.path.join(ROOT, "engine"), os.path.join(work, "engine"))
        shutil.copytree(os.path.join(ROOT, "tests/reference"),
                        os.path.join(work, "tests/reference"))
        os.mkdir(os.path.join(work, "obj"))
        objs = build_objects(work)
        env["TRACE_RUN"] = os.path.join(work, "trace_run")
        print("| mutation | cases | the reference check says |")
        print("|---|---|---|")
        for name, path, old, new, cases in MUTATIONS:
            if word not in name:
                continue
            src = os.path.join(work, path)
            with open(src) as f:
                text = f.read()
            if text.count(old) != 1:
                print("| %s | - | NOT APPLIED: its text is not in %s once |" % (name, path))
                unnoticed += 1
                continue
            obj = os.path.join(work, "obj", os.path.basename(path)[:-2] + ".o")
            try:
                with open(src, "w") as f:
                    f.write(text.replace(old, new))
                compile_one(work, path, obj)
                ok, out = link(work, objs)
                t0 = time.time()
                r = run(["sh", "tests/reference/run.sh", cases], work, env)
                secs = time.time() - t0
            finally:
                with open(src, "w") as f:
                    f.write(text)
                compile_one(work, path, obj)
            fails = [l for l in r.stdout.splitlines() if l.startswith("FAIL")]
            if r.returncode and fails:
                first = fails[0][5:].strip()
                print("| %s | `%s` | fails (%.0f s): %s |" % (name, cases, secs,
                                                             " ".join(first.split())))
            else:
                unnoticed += 1
                print("| %s | `%s` | NOT CAUGHT |" % (name, cases))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("mutation-check: %d mutations, %d not caught" %
          (sum(1 for m in MUTATIONS if word in m[0]), unnoticed))
    return 1 if unnoticed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
