/*
 * Termination signals for the runtimes: a flag to poll and a self-pipe to
 * wake poll(), so SIGTERM ends a job cleanly within a round.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "ecopt/run.h"

/* Signals are process-wide, so this state is too. */
static volatile sig_atomic_t caught;
static int pipe_fds[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;

    caught = sig;
    if (pipe_fds[1] >= 0) {
        char c = (char)sig;
        ssize_t r = write(pipe_fds[1], &c, 1);   /* full pipe: already awake */
        (void)r;
    }
    errno = saved;
}

int ec_signal_install(ec_err *e)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;

    if (pipe_fds[0] < 0 && pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return ec_err_set(e, EC_EIO, "cannot create the signal pipe: %s",
                          strerror(errno));
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    /* A dead worker's socket must show up as an error, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int ec_signal_caught(void)
{
    return caught;
}

int ec_signal_fd(void)
{
    return pipe_fds[0];
}
