/*
 * The budget of failed authentications (auth.h): per client address, in a
 * fixed table whose live slots are never taken over.
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

static int live(const struct auth_bucket *b, double now)
{
    return b->count && now - b->first < AUTH_FAIL_WINDOW;
}

/* key's live bucket, else a slot whose window has passed, else a new
   slot, else NULL (every slot live); the caller holds fail_lock. */
static struct auth_bucket *bucket(struct auth *a, const unsigned char key[16], double now)
{
    struct auth_bucket *free_slot = NULL;

    for (size_t i = 0; i < a->naddrs; i++) {
        if (live(&a->addrs[i], now) && memcmp(a->addrs[i].key, key, 16) == 0)
            return &a->addrs[i];
        if (!free_slot && !live(&a->addrs[i], now))
            free_slot = &a->addrs[i];
    }
    if (!free_slot && a->naddrs < AUTH_FAIL_SLOTS)
        free_slot = &a->addrs[a->naddrs++];
    if (free_slot) {
        memcpy(free_slot->key, key, 16);
        free_slot->first = now;
        free_slot->count = 0;
    }
    return free_slot;
}

double auth_failed(struct auth *a, const char *addr)
{
    unsigned char key[16];
    double now = ec_clock(), wait = 0;
    struct auth_bucket *b;

    if (a->off || !addr)
        return 0;
    address_key(addr, key);
    pthread_mutex_lock(&a->fail_lock);
    if ((b = bucket(a, key, now))) {
        if (b->count < AUTH_FAIL_MAX)
            b->count++;
        else
            wait = AUTH_FAIL_WINDOW - (now - b->first);
    }
    pthread_mutex_unlock(&a->fail_lock);
    return wait;
}
