/*
 * The real server under a hostile client's hand: trickled headers and
 * bodies, anonymous bodies, many connections from one address, wrong
 * tokens from a shared address, header bytes a proxy reads otherwise,
 * the tokens file's traps and the modes of the files the service makes.
 * Every loop is bounded; figures (answer times, the server's memory) are
 * printed, and only generous bounds that prove "answered" are asserted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serverutil.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static void write_tokens(const struct server *s, const char *text)
{
    char path[128], tmp[160];
    FILE *f;

    snprintf(path, sizeof path, "%s/tokens", s->dir);
    snprintf(tmp, sizeof tmp, "%s/tokens.new", s->dir);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static int log_has(const struct server *s, const char *phrase)
{
    char path[128], text[1 << 16];
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "%s/server.log", s->dir);
    if (!(f = fopen(path, "r")))
        return 0;
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return strstr(text, phrase) != NULL;
}

/*
 * Runs `ecopt serve` on a tokens file of text that it must refuse: it
 * exits 2 before it listens, and what it says holds phrase.
 */
static void assert_refused_at_start(const char *text, const char *phrase)
{
    const char *bin = getenv("ECOPT_BIN");
    char dir[] = "/tmp/ecopt-tokens-XXXXXX", tok[96], db[96], err[2048] = "";
    int p[2], st;
    ssize_t n = 0, got = 0;
    pid_t pid;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(tok, sizeof tok, "%s/tokens", dir);
    snprintf(db, sizeof db, "%s/ecopt.db", dir);
    f = fopen(tok, "w");
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(bin && *bin ? bin : "build/ecopt", "ecopt", "serve", "--listen",
              "127.0.0.1:0", "--tokens-file", tok, "--db", db, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* A server that took the file listens and goes on: 10 s at most. */
    for (double until = tu_now() + 10; tu_now() < until && got < (ssize_t)sizeof err - 1;) {
        struct pollfd pf = {p[0], POLLIN, 0};

        if (poll(&pf, 1, 100) == 1 &&
            (n = read(p[0], err + got, sizeof err - 1 - (size_t)got)) <= 0)
            break;
        if (pf.revents & POLLIN && n > 0)
            got += n;
    }
    err[got] = '\0';
    close(p[0]);
    kill(pid, SIGKILL);             /* gone already, unless it served */
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "served a tokens file with %s: %s",
                  phrase, err);
    ck_assert_msg(strstr(err, phrase), "the refusal does not say '%s': %s", phrase, err);
    ck_assert_msg(!strstr(err, "0123456789"), "the refusal quotes a secret: %s", err);
    unlink(tok);
    unlink(db);
    rmdir(dir);
}

/* ---- the tokens file -------------------------------------------------------- */

/* A secret on two lines (a tenant holding an admin's secret by mistake)
 * and a secret no bearer header can carry are refused at start, naming
 * the line, never the secret. */
START_TEST(test_tokens_refused_at_start)
{
    assert_refused_at_start("alice:shared-secret-0123456789\n"
                            "# the admin\n"
                            "root:shared-secret-0123456789:admin\n",
                            "tokens:3: the secret of 'root' is also the secret on line 1");
    assert_refused_at_start("alice:alice\\secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice\"secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice,secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice-secret-01234\001" "56789\n",
                            "tokens:1: the secret of 'alice' holds a character");
}
END_TEST

/* The same at reload (SIGHUP): the tokens loaded before are kept, and the
 * log says why. */
START_TEST(test_tokens_refused_at_reload)
{
    static const char *const bad[][2] = {
        {"alice:alice-secret-0123456789\nbob:alice-secret-0123456789:admin\n",
         "tokens:2: the secret of 'bob' is also the secret on line 1"},
        {"alice:alice-secret-0123456789\ncarol:carol%secret-0123456789\n",
         "tokens:2: the secret of 'carol' holds a character"},
    };
    struct server s;
    struct reply r;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_tokens(&s, bad[i][0]);
        ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
        for (double until = tu_now() + 10; !log_has(&s, bad[i][1]);) {
            ck_assert_msg(tu_now() < until, "no word of '%s' in the log", bad[i][1]);
            usleep(20000);
        }
        ck_assert(log_has(&s, "kept the tokens loaded before"));
        /* bob is still bob, and no admin. */
        r = req(&s, "GET", "/v1/jobs", BOB, NULL, NULL);
        ck_assert_msg(r.status == 200, "bob after a refused reload: %ld", r.status);
        free(r.body);
        r = req(&s, "GET", "/v1/jobs?limit=1", ROOT, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("hardening");
    TCase *tc = tcase_create("tokens");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tokens_refused_at_start);
    tcase_add_test(tc, test_tokens_refused_at_reload);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
