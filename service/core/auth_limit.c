/*
 * The budgets of failed authentications (auth.h): per address, per
 * network and from everywhere, in fixed tables whose live slots are never
 * taken over.
 */
#include "auth.h"

#include <arpa/inet.h>
#include <string.h>

#include "ecopt/clock.h"

/* addr ("127.0.0.1", "::1") as 16 bytes, IPv4 mapped into IPv6; anything
   else (an address that could not be read) is one key of all ones. */
static void address_key(const char *addr, unsigned char key[16])
{
    unsigned char v4[4];

    memset(key, 0xff, 16);
    if (inet_pton(AF_INET, addr, v4) == 1) {
        memset(key, 0, 10);
        key[10] = key[11] = 0xff;
        memcpy(key + 12, v4, 4);
    } else {
        inet_pton(AF_INET6, addr, key);
    }
}

static int is_v4(const unsigned char key[16])
{
    static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    return memcmp(key, prefix, 12) == 0;
}

/* The network an address belongs to: loopback as a whole (127.0.0.0/8
   and ::1 are one host), else an IPv4 /24 or an IPv6 /64. */
static void network_key(const unsigned char addr[16], unsigned char key[16])
{
    static const unsigned char v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                  0, 0, 0, 0, 0, 0, 0, 1};

    memcpy(key, addr, 16);
    if ((is_v4(addr) && addr[12] == 127) || memcmp(addr, v6_loopback, 16) == 0) {
        memset(key, 0, 16);
        key[10] = key[11] = 0xff;
        key[12] = 127;
    } else if (is_v4(addr)) {
        key[15] = 0;
    } else {
        memset(key + 8, 0, 8);
    }
}

static int live(const struct auth_bucket *b, double now)
{
    return b->count && now - b->first < AUTH_FAIL_WINDOW;
}

/* The live bucket of key in a table, or NULL; the caller holds fail_lock. */
static struct auth_bucket *find(struct auth_bucket *tab, size_t used,
                                const unsigned char key[16], double now)
{
    for (size_t i = 0; i < used; i++)
        if (live(&tab[i], now) && memcmp(tab[i].key, key, 16) == 0)
            return &tab[i];
    return NULL;
}

/* Seconds left of b's window when it is spent, else 0. */
static double spent(const struct auth_bucket *b, unsigned max, double now)
{
    return b && live(b, now) && b->count >= max ? AUTH_FAIL_WINDOW - (now - b->first) : 0;
}

double auth_blocked(struct auth *a, const char *addr, enum auth_limit *which)
{
    unsigned char key[16], net[16];
    double wait = 0, w, now = ec_clock();

    *which = AUTH_LIMIT_NONE;
    if (a->off || !addr)
        return 0;
    address_key(addr, key);
    network_key(key, net);
    pthread_mutex_lock(&a->fail_lock);
    if ((w = spent(&a->global, AUTH_FAIL_GLOBAL_MAX, now)) > wait)
        wait = w, *which = AUTH_LIMIT_GLOBAL;
    if ((w = spent(find(a->nets, a->nnets, net, now), AUTH_FAIL_NET_MAX, now)) > wait)
        wait = w, *which = AUTH_LIMIT_NETWORK;
    if ((w = spent(find(a->addrs, a->naddrs, key, now), AUTH_FAIL_MAX, now)) > wait)
        wait = w, *which = AUTH_LIMIT_ADDRESS;
    pthread_mutex_unlock(&a->fail_lock);
    return wait;
}

/* One more failure of key in a table: its live bucket, else a slot whose
   window has passed, else a new slot; never one that is live. */
static void count(struct auth_bucket *tab, size_t *used, const unsigned char key[16],
                  double now)
{
    struct auth_bucket *b = find(tab, *used, key, now);

    for (size_t i = 0; !b && i < *used; i++)
        if (!live(&tab[i], now))
            b = &tab[i];
    if (!b && *used < AUTH_FAIL_SLOTS)
        b = &tab[(*used)++];
    if (!b)
        return;         /* cannot happen (auth.h); the global budget still counts */
    if (!live(b, now)) {
        memcpy(b->key, key, 16);
        b->first = now;
        b->count = 0;
    }
    b->count++;
}

void auth_failed(struct auth *a, const char *addr)
{
    unsigned char key[16], net[16];
    double now = ec_clock();

    if (!addr)
        return;
    address_key(addr, key);
    network_key(key, net);
    pthread_mutex_lock(&a->fail_lock);
    count(a->addrs, &a->naddrs, key, now);
    count(a->nets, &a->nnets, net, now);
    if (!live(&a->global, now)) {
        a->global.first = now;
        a->global.count = 0;
    }
    a->global.count++;
    pthread_mutex_unlock(&a->fail_lock);
}
