/*
 * The reference trace (see ecopt/trace.h, and docs/testing.md, "The
 * reference trace"): a line-oriented text file, every double in %.17g so
 * that it reads back to the same bits.
 */
#include "ecopt/trace.h"

#include <math.h>

static void put_vec(FILE *f, const char *tag, const double *v, uint32_t d)
{
    fputs(tag, f);
    for (uint32_t j = 0; j < d; j++)
        fprintf(f, " %.17g", v[j]);
    fputc('\n', f);
}

int ec_trace_header(FILE *f, const ec_problem *pb, const ec_params *prm,
                    const ec_job *job)
{
    fprintf(f, "ecopt-trace %d\n", EC_TRACE_VERSION);
    fprintf(f, "dataset %s\n", job->dataset);
    fprintf(f, "job algorithm %s loss %s n %u d %u batch %u m %u seed %llu\n",
            ec_algo_name(prm->algo), ec_loss_name(pb->loss), prm->n, prm->d,
            prm->batch, prm->m, (unsigned long long)prm->seed);
    fprintf(f, "compressor %s k %u s %u\n", ec_comp_name(prm->comp.type),
            prm->comp.k, prm->comp.s);
    fprintf(f, "shift %s k %u s %u\n", ec_comp_name(prm->shift_comp.type),
            prm->shift_comp.k, prm->shift_comp.s);
    /* EF21-P's broadcast compressor (none: the broadcast uncompressed). */
    if (prm->comp_down.type != EC_COMP_NONE)
        fprintf(f, "down %s k %u s %u\n", ec_comp_name(prm->comp_down.type),
                prm->comp_down.k, prm->comp_down.s);
    fprintf(f, "problem lambda1 %.17g lambda2 %.17g L_f %.17g L %.17g "
               "L_tilde %.17g mu %.17g\n",
            pb->lambda1, pb->lambda2, pb->L_f, pb->L, pb->L_tilde, pb->mu);
    fprintf(f, "params gamma %.17g p %.17g alpha %.17g delta %.17g "
               "omega %.17g step_multiplier %.17g step_given %d "
               "theta2 %.17g eclk_rule %s eclk_guard %d participation %.17g "
               "participants %u\n",
            prm->gamma, prm->p, prm->alpha, prm->delta, prm->omega,
            prm->step_multiplier, prm->step_given, prm->theta2,
            ec_eclk_rule_name(prm->eclk_rule), prm->eclk_guard,
            prm->participation, prm->participants);
    for (uint32_t t = 0; t < pb->n; t++)
        fprintf(f, "shard %u %u %u\n", t, pb->shards[t].begin, pb->shards[t].end);
    return ferror(f) ? -1 : 0;
}

/*
 * The random part of a message, and for top-k its choice: the indices of
 * rand-k and top-k, the indices and levels of dithering and natural
 * dithering, the power of two natural compression sent for each entry (e
 * of +-2^e; z for a zero). A dense message (none) has no choice to record.
 */
static void put_choice(FILE *f, const char *tag, uint32_t tau,
                       const ec_msg *q)
{
    if (q->type == EC_COMP_NONE)
        return;
    fprintf(f, "%s %u %u", tag, tau, q->nnz);
    for (uint32_t i = 0; i < q->nnz; i++)
        fprintf(f, " %u", q->idx[i]);
    if (ec_comp_info_of(q->type)->layout == EC_COMP_LAYOUT_LEVELS) {
        fputs(" levels", f);
        for (uint32_t i = 0; i < q->nnz; i++)
            fprintf(f, " %u", (unsigned)ec_msg_level(q, i));
    }
    if (q->type == EC_COMP_NATURAL) {
        fputs(" powers", f);
        for (uint32_t i = 0; i < q->nnz; i++) {
            if (q->val[i] == 0.0)
                fputs(" z", f);
            else
                fprintf(f, " %d", ilogb(q->val[i]));
        }
    }
    fputc('\n', f);
}

int ec_trace_exchange(FILE *f, const ec_model *m, const ec_worker *ws,
                      const ec_up *ups, uint32_t n)
{
    const ec_params *p = m->prm;
    int katyusha = ec_algo_is(p->algo, EC_FAMILY_KATYUSHA);

    if (!m->initialised) {
        fputs("init\n", f);
        return ferror(f) ? -1 : 0;
    }
    fprintf(f, "round %llu\n", (unsigned long long)m->round + 1);
    if (katyusha)
        fprintf(f, "coin %d constants %.17g %.17g %.17g %.17g "
                   "delta_eff %.17g inflation %.17g restarts %llu\n",
                m->coin, m->gamma, m->theta1, m->eta, m->sigma, m->delta_eff,
                m->inflation, (unsigned long long)m->restarts);
    else if (p->algo == EC_ALGO_EC_LSVRG_QIAN)
        fprintf(f, "coin %d constants %.17g 0 0 0 delta_eff %.17g "
                   "inflation 1 restarts 0\n",
                m->coin, p->gamma, p->delta);
    else if (p->algo == EC_ALGO_ADIANA)
        fprintf(f, "coin %d constants %.17g %.17g %.17g %.17g delta_eff "
                   "%.17g inflation 1 restarts 0\n",
                m->coin, p->eta, p->theta1, p->gamma_z, p->beta, p->delta);
    if (m->part) {
        fputs("part", f);
        for (uint32_t t = 0; t < n; t++)
            if (m->part[t])
                fprintf(f, " %u", t);
        fputc('\n', f);
    }
    for (uint32_t t = 0; t < n; t++) {
        const ec_worker *w = &ws[t];

        if (!ec_model_participates(m, t))
            continue;

        if (ec_algo_samples_rows(p)) {
            fprintf(f, "rows %u", t);
            for (uint32_t r = 0; r < p->batch; r++)
                fprintf(f, " %u", w->rows[r]);
            fputc('\n', f);
        }
        if (p->algo == EC_ALGO_EC_LSVRG || p->algo == EC_ALGO_EC_LSVRG_DIANA)
            fprintf(f, "refresh %u %d\n", t, w->refreshed);
        put_choice(f, "q", t, &ups[t].q);
        if (ups[t].has_extra && (ec_algo_is(p->algo, EC_FAMILY_DIANA) ||
                                 p->algo == EC_ALGO_ADIANA))
            put_choice(f, "shift", t, &ups[t].extra);
        if (ups[t].has_extra && ec_algo_is(p->algo, EC_FAMILY_ADEF))
            put_choice(f, "diff", t, &ups[t].extra);
    }
    return ferror(f) ? -1 : 0;
}

int ec_trace_broadcast(FILE *f, const ec_down *down)
{
    if (down->primal)
        put_choice(f, "down", 0, &down->down_msg);
    return ferror(f) ? -1 : 0;
}

int ec_trace_state(FILE *f, const ec_model *m)
{
    const ec_params *p = m->prm;

    put_vec(f, "x", m->x, m->d);
    if (m->x_server)
        put_vec(f, "xs", m->x_server, m->d);
    if (ec_algo_is(p->algo, EC_FAMILY_KATYUSHA) ||
        p->algo == EC_ALGO_ADIANA) {
        put_vec(f, "y", m->y, m->d);
        put_vec(f, "z", m->z, m->d);
        put_vec(f, "w", m->w, m->d);
    }
    if (p->algo == EC_ALGO_EC_LSVRG_QIAN)
        put_vec(f, "w", m->w, m->d);
    if (ec_algo_is(p->algo, EC_FAMILY_ADEF)) {
        put_vec(f, "y", m->y, m->d);
        put_vec(f, "z", m->z, m->d);
        put_vec(f, "A", &m->adef_A, 1);
    }
    if (ec_algo_is(p->algo, EC_FAMILY_ADEF) ||
        ec_algo_is(p->algo, EC_FAMILY_KATYUSHA) ||
        p->algo == EC_ALGO_EC_LSVRG_QIAN || p->algo == EC_ALGO_ADIANA ||
        ec_algo_is(p->algo, EC_FAMILY_DIANA) || p->algo == EC_ALGO_EF21 ||
        p->algo == EC_ALGO_ECONTROL)
        put_vec(f, "u", m->u, m->d);
    return ferror(f) ? -1 : 0;
}
