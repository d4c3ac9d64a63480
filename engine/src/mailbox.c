/*
 * The mailboxes of ecopt/mailbox.h: slots in shared memory, a counter per
 * slot as the futex word, a flag the reader raises before it sleeps so
 * that the writer makes the wake-up call only when someone sleeps, and
 * the CPU each side last ran on, so that a reader does not spin for a
 * writer that its own spin keeps from running.
 */
#define _GNU_SOURCE
#include "ecopt/mailbox.h"

#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
               "the mailbox's counters must be lock-free to be shared");

/* Bytes in the slot meaning: the frame is on the socket. */
#define ON_SOCKET UINT32_MAX

/* One direction. The counter and the flag have a cache line of their own,
 * apart from the frame. */
struct slot {
    _Atomic uint32_t seq;       /* frames published: the futex word */
    _Atomic uint32_t sleeping;  /* the reader sleeps, or is about to */
    _Atomic int32_t cpu;        /* the CPU the writer last ran on, + 1 (0:
                                   not known) */
    _Atomic uint32_t len;       /* bytes in buf, or ON_SOCKET */
    uint8_t pad[64 - 4 * sizeof(uint32_t)];
    uint8_t buf[EC_MAILBOX_CAP];
};

_Static_assert(offsetof(struct slot, buf) == 64,
               "the frame starts on a cache line of its own");

struct ec_mailbox {
    struct slot dir[2];
};

static size_t stride(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return (sizeof(ec_mailbox) + page - 1) / page * page;
}

void *ec_mailbox_map(uint32_t n)
{
    void *map = mmap(NULL, n * stride(), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    return map == MAP_FAILED ? NULL : map;   /* zero-filled: seq 0 */
}

ec_mailbox *ec_mailbox_at(void *map, uint32_t i)
{
    return (ec_mailbox *)((uint8_t *)map + i * stride());
}

void ec_mailbox_keep_only(void *map, uint32_t n, uint32_t i)
{
    size_t s = stride();

    if (i > 0)
        munmap(map, i * s);
    if (i + 1 < n)
        munmap((uint8_t *)map + (i + 1) * s, (n - i - 1) * s);
}

void ec_mailbox_unmap(void *map, uint32_t n)
{
    if (map)
        munmap(map, n * stride());
}

int ec_mailbox_put(ec_mailbox *mb, ec_mailbox_dir dir, const uint8_t *buf,
                   size_t len)
{
    struct slot *s = &mb->dir[dir];
    int fits = len <= EC_MAILBOX_CAP;

    if (fits)
        memcpy(s->buf, buf, len);
    /* Relaxed: the count's increment below publishes it. */
    atomic_store_explicit(&s->len, fits ? (uint32_t)len : ON_SOCKET,
                          memory_order_relaxed);
    /* Where the writer is, for the reader's ec_mailbox_peer_here: a
     * hint, so relaxed (sched_getcpu is -1 where it is not known). */
    atomic_store_explicit(&s->cpu, sched_getcpu() + 1, memory_order_relaxed);
    /* Sequentially consistent, both: either the reader's futex wait sees
     * the new count, or this load sees its flag and wakes it. */
    atomic_fetch_add(&s->seq, 1);
    if (atomic_load(&s->sleeping))
        syscall(SYS_futex, &s->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    return fits;
}

int ec_mailbox_ready(ec_mailbox *mb, ec_mailbox_dir dir, uint32_t seen)
{
    return atomic_load_explicit(&mb->dir[dir].seq, memory_order_acquire) != seen;
}

int ec_mailbox_sleep(ec_mailbox *mb, ec_mailbox_dir dir, uint32_t seen,
                     double seconds)
{
    struct slot *s = &mb->dir[dir];
    struct timespec ts;

    if (seconds < 0)
        seconds = 0;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    atomic_store(&s->sleeping, 1);
    /* The kernel compares the counter with seen before it sleeps: a frame
     * published after the flag went up is never slept through. Not
     * FUTEX_PRIVATE: the word is shared between processes. */
    if (atomic_load(&s->seq) == seen)
        syscall(SYS_futex, &s->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_store(&s->sleeping, 0);
    return ec_mailbox_ready(mb, dir, seen);
}

long ec_mailbox_take(ec_mailbox *mb, ec_mailbox_dir dir, uint8_t *buf,
                     size_t cap)
{
    struct slot *s = &mb->dir[dir];
    /* Read once, as an atomic: the writer may be hostile, and a plain
     * read could be made twice by the compiler, once for the bound and
     * once for the copy. The acquire of the count ordered it already. */
    uint32_t len = atomic_load_explicit(&s->len, memory_order_relaxed);

    if (len == ON_SOCKET)
        return -1;
    if (len > cap || len > EC_MAILBOX_CAP)
        return -2;
    memcpy(buf, s->buf, len);
    return (long)len;
}

void ec_mailbox_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int ec_mailbox_peer_here(ec_mailbox *mb, ec_mailbox_dir dir)
{
    int32_t here = sched_getcpu() + 1;
    ec_mailbox_dir back = dir == EC_MAILBOX_UP ? EC_MAILBOX_DOWN : EC_MAILBOX_UP;

    /* The reader of dir is the writer of the other way. */
    atomic_store_explicit(&mb->dir[back].cpu, here, memory_order_relaxed);
    return here > 0 &&
           atomic_load_explicit(&mb->dir[dir].cpu, memory_order_relaxed) == here;
}
