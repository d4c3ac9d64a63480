/*
 * What every core module uses of the app while it serves: the pool of
 * reader connections and the hooks to the floor above. Apart from app.c,
 * which makes the parts that themselves use these.
 */
#include "app.h"

struct store *app_reader(struct app *a)
{
    struct store *st = NULL;

    pthread_mutex_lock(&a->rlock);
    for (;;) {
        for (size_t i = 0; i < a->nreaders; i++) {
            if (!a->reader_busy[i]) {
                a->reader_busy[i] = 1;
                st = a->readers[i];
                break;
            }
        }
        if (st)
            break;
        pthread_cond_wait(&a->rcond, &a->rlock);
    }
    pthread_mutex_unlock(&a->rlock);
    return st;
}

void app_reader_done(struct app *a, struct store *st)
{
    pthread_mutex_lock(&a->rlock);
    for (size_t i = 0; i < a->nreaders; i++)
        if (a->readers[i] == st)
            a->reader_busy[i] = 0;
    pthread_cond_signal(&a->rcond);
    pthread_mutex_unlock(&a->rlock);
}

void app_job_changed(struct app *a, const char *job_id)
{
    if (a->hooks.job_changed)
        a->hooks.job_changed(a->hooks.ctx, job_id);
}

void app_tick(struct app *a)
{
    if (a->hooks.tick)
        a->hooks.tick(a->hooks.ctx);
}
