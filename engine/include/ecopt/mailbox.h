/*
 * The mailboxes of the process backend: one per worker process, in memory
 * the coordinator maps shared before it forks, carrying the frames of
 * ecopt/wire.h after the handshake. A frame is copied into its direction's
 * slot and published by a counter; the reader sees the counter move,
 * spinning or asleep on a futex, so a round's hand-off makes no system
 * call while both sides are awake, where a socket makes about eight
 * (bench/results/waits.md). A frame longer than a slot goes on the
 * socket: the slot then only says that it does.
 */
#ifndef ECOPT_MAILBOX_H
#define ECOPT_MAILBOX_H

#include <stddef.h>
#include <stdint.h>

/* The longest frame a slot holds. */
#define EC_MAILBOX_CAP (32u << 10)

typedef enum {
    EC_MAILBOX_DOWN,            /* coordinator to process: STEP, STOP */
    EC_MAILBOX_UP               /* process to coordinator: UPS, ERROR */
} ec_mailbox_dir;

typedef struct ec_mailbox ec_mailbox;

/* n mailboxes in one shared anonymous mapping (inherited by fork), or
   NULL with errno set. */
void *ec_mailbox_map(uint32_t n);
/* Mailbox i of a mapping of n. */
ec_mailbox *ec_mailbox_at(void *map, uint32_t i);
/* In a forked process: unmaps every mailbox but its own, i, so a process
   cannot write another's. */
void ec_mailbox_keep_only(void *map, uint32_t n, uint32_t i);
void ec_mailbox_unmap(void *map, uint32_t n);   /* NULL is a no-op */

/*
 * Publishes a frame in direction dir and wakes the reader if it sleeps.
 * 1 when the frame is in the slot; 0 when it is longer than
 * EC_MAILBOX_CAP, in which case the slot says so and the caller must
 * send the frame on the socket.
 */
int ec_mailbox_put(ec_mailbox *mb, ec_mailbox_dir dir, const uint8_t *buf,
                   size_t len);
/* Whether a frame has been published since the reader had seen `seen`
   (the count of frames it has taken). */
int ec_mailbox_ready(ec_mailbox *mb, ec_mailbox_dir dir, uint32_t seen);
/* Sleeps until a frame comes after `seen`, a signal, or `seconds` pass:
   1 when one has come. */
int ec_mailbox_sleep(ec_mailbox *mb, ec_mailbox_dir dir, uint32_t seen,
                     double seconds);
/*
 * Copies the published frame into buf (cap bytes) and returns its
 * length; -1 when it is on the socket; -2 when the slot claims more than
 * cap bytes (a process that broke the protocol). The frame is copied
 * before it is read, so a writer cannot change it under the decoder.
 */
long ec_mailbox_take(ec_mailbox *mb, ec_mailbox_dir dir, uint8_t *buf,
                     size_t cap);

/*
 * For a reader waiting on dir: whether dir's writer last ran (published,
 * or looked here for its own frame) on the CPU the caller runs on. Then
 * it is not running now, and a spin only keeps it from the CPU: wait
 * asleep. Records the caller's CPU for the other side's look the other
 * way. 0 where the CPU is not known.
 */
int ec_mailbox_peer_here(ec_mailbox *mb, ec_mailbox_dir dir);

/* Waits a little in a spin: tells the CPU so (x86 pause, Arm yield). */
void ec_mailbox_relax(void);

#endif
