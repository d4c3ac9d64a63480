/*
 * Uploads under pressure, against the real `ecopt serve`: several large
 * gzip uploads at once (validated off the HTTP threads, by a bounded
 * number of validator processes whose memory does not grow with the
 * file, /livez answered meanwhile), the limits on uploads in progress
 * (429 per token, 503 for the server, each naming its limit), two tenants
 * racing for one new name and one tenant racing itself (the owner check,
 * the row and the file move as one), a file found in the data directory
 * (validated by the validator with its limits, never parsed by the
 * server, keeping its name's owner), and what the validator process may
 * touch (its file read-only, no other descriptor of the server).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <zlib.h>

#include "serverutil.h"
#include "sha256.h"

/* ---- the data ---------------------------------------------------------- */

/*
 * A gzip file of `mb` MiB of long decimal lines ("+1 1:0.123...9 2:..."):
 * they compress about 170 to 1, as the hostile uploads did.
 */
static unsigned char *long_decimals_gz(unsigned mb, size_t *len)
{
    char line[4096];
    size_t n = 0, cap = (size_t)mb << 15, line_len;
    unsigned char *out = malloc(cap);
    z_stream z = {0};
    uint64_t total = 0;

    ck_assert_ptr_nonnull(out);
    for (int lab = 0; lab < 2; lab++) {
        int k = snprintf(line + n, sizeof line - n, "%s", lab ? "-1" : "+1");

        n += (size_t)k;
        for (int i = 1; i <= 25; i++)
            n += (size_t)snprintf(line + n, sizeof line - n,
                                  " %d:0.123456789012345678901234567890123456789012345678901234567", i);
        line[n++] = '\n';
    }
    line_len = n;
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY),
                     Z_OK);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    while (total < (uint64_t)mb << 20) {
        z.next_in = (unsigned char *)line;
        z.avail_in = (uInt)line_len;
        ck_assert_int_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
        ck_assert_uint_gt(z.avail_out, 0);
        total += line_len;
    }
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *len = z.total_out;
    deflateEnd(&z);
    return out;
}

static void sha_hex(const void *data, size_t len, char hex[SHA256_HEX_SIZE])
{
    struct sha256 h;

    sha256_init(&h);
    sha256_update(&h, data, len);
    sha256_final_hex(&h, hex);
}

/* ---- uploads in flight ------------------------------------------------- */

struct up {
    CURL *e;
    struct curl_slist *h;
    const unsigned char *data;
    size_t len, off;
    struct reply r;
    long status;
    int done;
    int hold;               /* pause the body after HOLD_AT bytes */
    int paused;
};

#define HOLD_AT 65536

static size_t up_read(char *buf, size_t sz, size_t n, void *ctx)
{
    struct up *u = ctx;
    size_t k = sz * n < u->len - u->off ? sz * n : u->len - u->off;

    if (u->hold && u->off >= HOLD_AT) {
        u->paused = 1;
        return CURL_READFUNC_PAUSE;
    }

    memcpy(buf, u->data + u->off, k);
    u->off += k;
    return k;
}

static void up_start(CURLM *m, struct up *u, const struct server *s, const char *token,
                     const char *query, const void *data, size_t len)
{
    char url[512], auth[128];

    memset(u, 0, sizeof *u);
    u->data = data;
    u->len = len;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/datasets?%s", s->port, query);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    u->h = curl_slist_append(u->h, auth);
    u->h = curl_slist_append(u->h, "Expect:");
    u->e = curl_easy_init();
    curl_easy_setopt(u->e, CURLOPT_URL, url);
    curl_easy_setopt(u->e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(u->e, CURLOPT_CUSTOMREQUEST, "POST");
    curl_easy_setopt(u->e, CURLOPT_READFUNCTION, up_read);
    curl_easy_setopt(u->e, CURLOPT_READDATA, u);
    curl_easy_setopt(u->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(u->e, CURLOPT_HTTPHEADER, u->h);
    curl_easy_setopt(u->e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(u->e, CURLOPT_WRITEDATA, &u->r);
    curl_easy_setopt(u->e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(u->e, CURLOPT_HEADERDATA, &u->r);
    curl_easy_setopt(u->e, CURLOPT_TIMEOUT, 300L);
    curl_easy_setopt(u->e, CURLOPT_PRIVATE, u);
    curl_multi_add_handle(m, u->e);
}

/* Moves the transfers on for up to ms; marks those that ended. */
static int up_pump(CURLM *m, int ms)
{
    CURLMsg *msg;
    int running, left;

    curl_multi_perform(m, &running);
    if (running && ms > 0) {
        curl_multi_poll(m, NULL, 0, ms, NULL);
        curl_multi_perform(m, &running);
    }
    while ((msg = curl_multi_info_read(m, &left))) {
        struct up *u;

        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&u);
        ck_assert_msg(msg->data.result == CURLE_OK, "upload: %s",
                      curl_easy_strerror(msg->data.result));
        curl_easy_getinfo(u->e, CURLINFO_RESPONSE_CODE, &u->status);
        u->done = 1;
    }
    return running;
}

static void up_free(CURLM *m, struct up *u)
{
    curl_multi_remove_handle(m, u->e);
    curl_easy_cleanup(u->e);
    curl_slist_free_all(u->h);
    free(u->r.body);
}

/* ---- the server's processes -------------------------------------------- */

/* The validator processes the server runs now, into pids (up to max). */
static int validators(pid_t server, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d))) {
        char path[300], buf[512];
        int ppid = 0;
        FILE *f;
        size_t k;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = '\0';
        {
            char *rp = strrchr(buf, ')');

            if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != server)
                continue;
        }
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = '\0';
        /* argv[0] NUL argv[1]: the command is the second word */
        if (k > strlen(buf) + 1 && strcmp(buf + strlen(buf) + 1, "__validate-upload") == 0 &&
            n < max)
            pids[n++] = atoi(de->d_name);
    }
    closedir(d);
    return n;
}

/* A field of /proc/PID/status in kB, or -1 when the process is gone. */
static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t fl = strlen(field);
    long v = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    return v;
}

static double livez_seconds(const struct server *s, long *status)
{
    double t0 = tu_now();
    struct reply r = req(s, "GET", "/livez", NULL, NULL, NULL);

    *status = r.status;
    free(r.body);
    return tu_now() - t0;
}

/* Starts the server on a data directory of its own (a new one unless
   reuse), with the environment given as NAME=VALUE pairs. */
static void start(struct server *s, int reuse, const char *const *env)
{
    static char data_arg[128];
    const char *extra[] = {"--data-dir", data_arg, NULL};
    char tok[128];
    FILE *f;

    for (int i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    if (!reuse) {
        snprintf(s->dir, sizeof s->dir, "/tmp/ecopt-uploads-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(s->dir));
        snprintf(s->db, sizeof s->db, "%s/ecopt.db", s->dir);
        snprintf(tok, sizeof tok, "%s/tokens", s->dir);
        ck_assert_ptr_nonnull(f = fopen(tok, "w"));
        fputs(tokens, f);
        fclose(f);
        snprintf(data_arg, sizeof data_arg, "%s/data", s->dir);
        ck_assert_int_eq(mkdir(data_arg, 0750), 0);
    }
    snprintf(data_arg, sizeof data_arg, "%s/data", s->dir);
    server_start_with(s, 1, extra);
}

static void unset_env(const char *const *env)
{
    for (int i = 0; env && env[i]; i++) {
        char name[64];

        snprintf(name, sizeof name, "%.*s", (int)strcspn(env[i], "="), env[i]);
        unsetenv(name);
    }
}

static json_t *dataset_get(const struct server *s, const char *name)
{
    char path[256];
    struct reply r;
    json_t *doc;

    snprintf(path, sizeof path, "/v1/datasets/%s", name);
    r = req(s, "GET", path, ROOT, NULL, NULL);      /* an admin sees private ones */
    ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
    doc = json_of(&r);
    free(r.body);
    return doc;
}

/* ---- the tests ---------------------------------------------------------- */

/*
 * Six uploads of a large gzip at once, from two tenants: each validated by
 * a validator process, at most --upload-validators of them at once, the
 * rest waiting; /livez is answered while the HTTP threads would all be
 * taken if validation ran on them (as many validators as HTTP threads);
 * neither the server nor a validator grows with the data.
 */
START_TEST(test_six_large_uploads)
{
    static const char *const env[] = {"ECOPT_THREADS=2", "ECOPT_UPLOAD_VALIDATORS=2",
                                      "ECOPT_UPLOAD_QUEUE=8", "ECOPT_UPLOAD_PER_TOKEN=3",
                                      NULL};
    struct server s;
    size_t len;
    unsigned char *gz = long_decimals_gz(160, &len);
    CURLM *m = curl_multi_init();
    struct up u[6];
    pid_t pids[16];
    long rss0, rss_max = 0, vrss_max = 0, st;
    double live_max = 0, t0;
    int nmax = 0, answered_busy = 0, samples = 0, left = 6;

    start(&s, 0, env);
    rss0 = status_kb(s.pid, "VmRSS");
    t0 = tu_now();
    for (int i = 0; i < 6; i++) {
        char q[64];

        snprintf(q, sizeof q, "name=big%d", i);
        up_start(m, &u[i], &s, i % 2 ? BOB : ALICE, q, gz, len);
    }
    /* At most 1200 rounds of about 100 ms: bounded whatever happens. */
    for (int round = 0; round < 1200 && left; round++) {
        int before, after;
        double t;

        up_pump(m, 100);
        before = validators(s.pid, pids, 16);
        for (int i = 0; i < before; i++) {
            long v = status_kb(pids[i], "VmRSS");

            if (v > vrss_max)
                vrss_max = v;
        }
        t = livez_seconds(&s, &st);
        ck_assert_int_eq(st, 200);
        after = validators(s.pid, pids, 16);
        if (t > live_max)
            live_max = t;
        if (before > nmax)
            nmax = before;
        if (before >= 2 && after >= 2)
            answered_busy++;
        {
            long v = status_kb(s.pid, "VmRSS");

            if (v > rss_max)
                rss_max = v;
        }
        samples++;
        left = 0;
        for (int i = 0; i < 6; i++)
            left += !u[i].done;
    }
    printf("six uploads of %.1f MB gzip (160 MiB of long decimal lines each): %.1f s; "
           "/livez worst %.3f s over %d samples, %d answered while 2 validators ran; "
           "validators at once %d; server RSS %ld -> max %ld kB; validator RSS max %ld kB\n",
           len / 1e6, tu_now() - t0, live_max, samples, answered_busy, nmax, rss0, rss_max,
           vrss_max);
    fflush(stdout);
    ck_assert_msg(left == 0, "%d uploads still going", left);
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(u[i].status == 201, "upload %d: %ld %s", i, u[i].status, u[i].r.body);
        up_free(m, &u[i]);
    }
    ck_assert_int_le(nmax, 2);
    ck_assert_msg(answered_busy > 0, "/livez was never answered while validators "
                  "ran on as many threads as the server has");
    /* The matrix of one file would be about 30 MB (12 bytes a nonzero).  Under
     * AddressSanitizer an idle validator already holds about 29 MB of shadow and
     * runtime, and a matrix would come on top of that, with redzones. */
#ifdef __SANITIZE_ADDRESS__
    ck_assert_msg(vrss_max < 45 * 1024, "a validator used %ld kB", vrss_max);
#else
    ck_assert_msg(vrss_max < 20 * 1024, "a validator used %ld kB", vrss_max);
#endif
    {
        json_t *doc = dataset_get(&s, "big3");

        ck_assert_int_eq(json_integer_value(json_object_get(doc, "d")), 25);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "owner")), "bob");
        json_decref(doc);
    }
    curl_multi_cleanup(m);
    free(gz);
    server_stop(&s, SIGTERM);
    unset_env(env);
}
END_TEST

/* Temporary files of uploads in the data directory: one per upload the
   server has admitted and not yet answered. */
static int temp_files(const struct server *s)
{
    char path[128];
    struct dirent *de;
    DIR *d;
    int n = 0;

    snprintf(path, sizeof path, "%s/data", s->dir);
    ck_assert_ptr_nonnull(d = opendir(path));
    while ((de = readdir(d)))
        n += strncmp(de->d_name, ".upload-", 8) == 0;
    closedir(d);
    return n;
}

/* Pumps (bounded) until the server holds n uploads in progress. */
static void wait_admitted(CURLM *m, const struct server *s, int n)
{
    for (int i = 0; i < 400; i++) {
        up_pump(m, 50);
        if (temp_files(s) >= n)
            return;
    }
    ck_abort_msg("the server did not take %d uploads within 20 s", n);
}

static void expect_limit(struct reply r, long status, const char *limit)
{
    json_t *doc;

    ck_assert_msg(r.status == status, "status %ld, want %ld: %s", r.status, status, r.body);
    doc = json_of(&r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")), limit);
    ck_assert_msg(strstr(json_string_value(json_object_get(doc, "detail")), limit),
                  "detail: %s", json_string_value(json_object_get(doc, "detail")));
    ck_assert_str_ne(r.retry_after, "");
    json_decref(doc);
    free(r.body);
}

/* A token's second upload while its first is in progress is 429; an
   upload when the server holds as many as it takes is 503; both name the
   limit and are decided on the headers, and the uploads in progress end
   well. (The uploads in progress are held halfway through their bodies.) */
START_TEST(test_upload_limits)
{
    static const char *const env[] = {"ECOPT_UPLOAD_QUEUE=2", "ECOPT_UPLOAD_PER_TOKEN=1",
                                      NULL};
    struct server s;
    size_t len;
    unsigned char *gz = long_decimals_gz(16, &len);
    CURLM *m = curl_multi_init();
    struct up a, b;
    char path[200];

    ck_assert_uint_gt(len, HOLD_AT);
    start(&s, 0, env);
    up_start(m, &a, &s, ALICE, "name=first", gz, len);
    a.hold = 1;
    wait_admitted(m, &s, 1);
    expect_limit(req(&s, "POST", "/v1/datasets?name=second", ALICE, "+1 1:1\n", NULL), 429,
                 "upload_per_token");
    up_start(m, &b, &s, BOB, "name=third", gz, len);
    b.hold = 1;
    wait_admitted(m, &s, 2);
    expect_limit(req(&s, "POST", "/v1/datasets?name=fourth", ROOT, "+1 1:1\n", NULL), 503,
                 "upload_queue");
    a.hold = b.hold = 0;
    curl_easy_pause(a.e, CURLPAUSE_CONT);
    curl_easy_pause(b.e, CURLPAUSE_CONT);
    for (int i = 0; i < 3000 && (!a.done || !b.done); i++)
        up_pump(m, 100);
    ck_assert_msg(a.status == 201 && b.status == 201, "statuses %ld %ld: %s %s", a.status,
                  b.status, a.r.body, b.r.body);
    up_free(m, &a);
    up_free(m, &b);
    snprintf(path, sizeof path, "%s/data/second", s.dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(temp_files(&s), 0);
    /* Nothing in progress now: the token may upload again. */
    {
        struct reply r = req(&s, "POST", "/v1/datasets?name=second", ALICE, "+1 1:1\n", NULL);

        ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
        free(r.body);
    }
    curl_multi_cleanup(m);
    free(gz);
    server_stop(&s, SIGTERM);
    unset_env(env);
}
END_TEST

#define ROUNDS 120

/* Two uploads started together; their statuses. */
static void race(const struct server *s, const char *t1, const char *t2, const char *query,
                 const char *d1, const char *d2, long st[2])
{
    CURLM *m = curl_multi_init();
    struct up u[2];

    up_start(m, &u[0], s, t1, query, d1, strlen(d1));
    up_start(m, &u[1], s, t2, query, d2, strlen(d2));
    for (int i = 0; i < 1200 && (!u[0].done || !u[1].done); i++)
        up_pump(m, 50);
    ck_assert(u[0].done && u[1].done);
    for (int i = 0; i < 2; i++) {
        st[i] = u[i].status;
        /* An answer no race should give says why, for the log. */
        if (st[i] >= 500)
            fprintf(stderr, "race %s: %ld %.*s\n", query, st[i],
                    (int)(u[i].r.len < 400 ? u[i].r.len : 400),
                    u[i].r.body ? u[i].r.body : "");
        up_free(m, &u[i]);
    }
    curl_multi_cleanup(m);
}

/* The races make a name a round, more than a token's quota of names. */
static const char *const names_quota[] = {"ECOPT_QUOTA_DATASET_NAMES=1000", NULL};

/*
 * Two tenants upload the same new name with replace=true at once, 120
 * times: one gets 201 and the other 403 (never both 201, one file
 * silently replaced), and the name holds the winner's file, as its owner.
 */
START_TEST(test_owner_race)
{
    static const char da[] = "+1 1:1\n-1 2:1\n", db[] = "+1 3:1\n-1 1:1 2:2\n";
    struct server s;
    char sha_a[SHA256_HEX_SIZE], sha_b[SHA256_HEX_SIZE];
    int both = 0;

    sha_hex(da, strlen(da), sha_a);
    sha_hex(db, strlen(db), sha_b);
    start(&s, 0, names_quota);
    for (int round = 0; round < ROUNDS; round++) {
        char q[64], name[32];
        long st[2];
        json_t *doc;
        int w;

        snprintf(name, sizeof name, "race%d", round);
        snprintf(q, sizeof q, "name=%s&replace=true", name);
        race(&s, ALICE, BOB, q, da, db, st);
        if (st[0] == 201 && st[1] == 201) {
            both++;
            continue;
        }
        ck_assert_msg((st[0] == 201 && st[1] == 403) || (st[0] == 403 && st[1] == 201),
                      "round %d: statuses %ld and %ld", round, st[0], st[1]);
        w = st[0] == 201 ? 0 : 1;
        doc = dataset_get(&s, name);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "owner")),
                         w ? "bob" : "alice");
        ck_assert_str_eq(json_string_value(json_object_get(doc, "sha256")),
                         w ? sha_b : sha_a);
        json_decref(doc);
    }
    printf("owner race: both tenants got 201 in %d of %d rounds\n", both, ROUNDS);
    fflush(stdout);
    ck_assert_msg(both == 0, "both tenants got 201 in %d of %d rounds", both, ROUNDS);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * One tenant uploads two versions of a name at once, 120 times: both
 * succeed, and the row stays the file's (the name is the uploader's, with
 * its upload time), then and after a restart.
 */
START_TEST(test_self_race)
{
    static const char d1[] = "+1 1:1\n-1 2:1\n", d2[] = "+1 3:1\n-1 1:1 2:2\n";
    struct server s;
    int bad = 0, twice = 0;

    start(&s, 0, names_quota);
    for (int round = 0; round < ROUNDS; round++) {
        char q[64], name[32];
        long st[2];
        json_t *doc;

        snprintf(name, sizeof name, "self%d", round);
        snprintf(q, sizeof q, "name=%s&replace=true", name);
        race(&s, ALICE, ALICE, q, d1, d2, st);
        ck_assert_msg((st[0] == 201 || st[0] == 200) && (st[1] == 201 || st[1] == 200),
                      "round %d: statuses %ld and %ld", round, st[0], st[1]);
        /* One created the name, the other replaced it. */
        twice += st[0] == 201 && st[1] == 201;
        doc = dataset_get(&s, name);
        if (!json_is_string(json_object_get(doc, "owner")) ||
            !json_is_integer(json_object_get(doc, "uploaded_at")))
            bad++;
        json_decref(doc);
    }
    server_stop(&s, SIGTERM);
    start(&s, 1, NULL);
    for (int round = 0; round < ROUNDS; round++) {
        char name[32];
        json_t *doc;

        snprintf(name, sizeof name, "self%d", round);
        doc = dataset_get(&s, name);
        if (!json_is_string(json_object_get(doc, "owner")) ||
            strcmp(json_string_value(json_object_get(doc, "owner")), "alice") != 0)
            bad++;
        json_decref(doc);
    }
    printf("self race: row and file out of step in %d of %d rounds (after the restart "
           "too), both 201 in %d\n", bad, ROUNDS, twice);
    fflush(stdout);
    ck_assert_msg(bad == 0, "row and file out of step in %d of %d rounds", bad, ROUNDS);
    ck_assert_msg(twice == 0, "both uploads said they created the name in %d rounds",
                  twice);
    server_stop(&s, SIGTERM);
}
END_TEST

static void spit(const char *dir, const char *name, const char *text)
{
    char path[256], tmp[300];
    FILE *f;

    snprintf(path, sizeof path, "%s/data/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    ck_assert_ptr_nonnull(f = fopen(tmp, "w"));
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

/*
 * A file the server finds in the data directory is validated as an upload
 * is, by the validator with its limits; a name whose file changed behind
 * the server's back (as a crash between an upload's row and its rename
 * leaves it) keeps its owner.
 */
START_TEST(test_found_files)
{
    static const char *const env[] = {"ECOPT_UPLOAD_MAX_ROWS=5", NULL};
    struct server s;
    json_t *doc;
    struct reply r;

    start(&s, 0, env);
    spit(s.dir, "tall", "+1 1:1\n-1 1:1\n+1 1:1\n-1 1:1\n+1 1:1\n-1 1:1\n+1 1:1\n");
    doc = dataset_get(&s, "tall");
    ck_assert_msg(json_is_string(json_object_get(doc, "error")) &&
                      strstr(json_string_value(json_object_get(doc, "error")),
                             "upload_max_rows"),
                  "a file over the validator's row limit: %s",
                  json_dumps(doc, JSON_COMPACT));
    json_decref(doc);
    r = req(&s, "POST", "/v1/datasets?name=mine", ALICE, "+1 1:1\n-1 2:1\n", NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
    spit(s.dir, "mine", "+1 1:1\n-1 2:1\n+1 2:3\n");
    start(&s, 1, env);
    doc = dataset_get(&s, "mine");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "rows")), 3);
    ck_assert_msg(json_is_string(json_object_get(doc, "owner")) &&
                      strcmp(json_string_value(json_object_get(doc, "owner")), "alice") == 0,
                  "the name lost its owner: %s", json_dumps(doc, JSON_COMPACT));
    json_decref(doc);
    /* And so bob still may not take it. */
    r = req(&s, "POST", "/v1/datasets?name=mine&replace=true", BOB, "+1 1:1\n", NULL);
    ck_assert_msg(r.status == 403, "%ld %s", r.status, r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
    unset_env(env);
}
END_TEST

/*
 * The validator process holds its file read-only and no other descriptor
 * of the server, even one the server inherited without close-on-exec.
 */
START_TEST(test_validator_descriptors)
{
    struct server s;
    size_t len;
    unsigned char *gz = long_decimals_gz(96, &len);
    CURLM *m = curl_multi_init();
    struct up u;
    pid_t pids[4];
    int leak = open("/dev/null", O_RDONLY), n = 0, seen = 0, unreadable = 0, early = 0;

    ck_assert_int_ge(leak, 3);          /* no O_CLOEXEC: ecopt serve inherits it */
    start(&s, 0, NULL);
    close(leak);
    up_start(m, &u, &s, ALICE, "name=fds", gz, len);
    for (int i = 0; i < 600 && !seen && !u.done; i++) {
        char path[64], line[128], fds[512] = "";
        DIR *d;
        struct dirent *de;
        FILE *f;
        long flags = -1, pos = 0;

        up_pump(m, 50);
        if (validators(s.pid, pids, 4) < 1)
            continue;
        snprintf(path, sizeof path, "/proc/%d/fd", (int)pids[0]);
        if (!(d = opendir(path))) {
            /* Another uid's descriptors need CAP_SYS_PTRACE (not in a
               container's default set). */
            unreadable += errno == EACCES || errno == EPERM;
            continue;
        }
        n = 0;
        {
            char fp[300], in[128] = "", to[128];
            ssize_t tl;

            snprintf(fp, sizeof fp, "%s/0", path);
            if ((tl = readlink(fp, in, sizeof in - 1)) >= 0)
                in[tl] = '\0';
            while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                    continue;
                snprintf(fp, sizeof fp, "%s/%.16s", path, de->d_name);
                strcpy(to, "?");
                if ((tl = readlink(fp, to, sizeof to - 1)) >= 0)
                    to[tl] = '\0';
                snprintf(fds + strlen(fds), sizeof fds - strlen(fds), " %.16s=%.40s",
                         de->d_name, to);
                /* Its gzip reader's close-on-exec copy of its own input
                 * is the validator's, not one of the server's. */
                if (atoi(de->d_name) < 3 || strcmp(to, in) != 0)
                    n++;
            }
        }
        closedir(d);
        snprintf(path, sizeof path, "/proc/%d/fdinfo/0", (int)pids[0]);
        if (!(f = fopen(path, "r"))) {
            unreadable += errno == EACCES || errno == EPERM;
            continue;
        }
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "flags:", 6) == 0)
                flags = strtol(line + 6, NULL, 8);
            if (strncmp(line, "pos:", 4) == 0)
                pos = strtol(line + 4, NULL, 10);
        }
        fclose(f);
        /* Until it reads its file the validator may still be in the
         * dynamic loader, whose library descriptors come and go. */
        if (flags < 0 || pos == 0) {
            early++;
            continue;
        }
        seen = 1;
        printf("validator descriptors:%s; stdin flags 0%lo\n", fds, flags);
        fflush(stdout);
        ck_assert_msg(n == 3, "the validator holds %d descriptors besides copies of "
                      "its input:%s", n, fds);
        ck_assert_msg((flags & O_ACCMODE) == O_RDONLY, "the validator's file is open "
                      "with flags 0%lo, not read-only", flags);
    }
    if (!seen && unreadable)
        tu_skip("PTRACE", "test_uploads: the validator's /proc/PID/fd is not "
                "readable here (no CAP_SYS_PTRACE)");
    else if (!seen && early)
        tu_skip("PTRACE", "test_uploads: the validator was seen %d times, always "
                "before it had read its file (as in a container, where it ends "
                "between two looks): its descriptors were not checked", early);
    else
        ck_assert_msg(seen, "no validator was seen");
    for (int i = 0; i < 3000 && !u.done; i++)
        up_pump(m, 100);
    ck_assert_int_eq(u.status, 201);
    up_free(m, &u);
    curl_multi_cleanup(m);
    free(gz);
    server_stop(&s, SIGTERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("uploads");
    TCase *tc = tcase_create("server");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_six_large_uploads);
    tcase_add_test(tc, test_upload_limits);
    tcase_add_test(tc, test_owner_race);
    tcase_add_test(tc, test_self_race);
    tcase_add_test(tc, test_found_files);
    tcase_add_test(tc, test_validator_descriptors);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
