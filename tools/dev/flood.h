/*
 * flood.h - strangers on a bootstrap root's port: a process that holds many
 * TCP connections to rank 0's root address at once and behaves on each as
 * a port scanner, a confused client or an attacker would. The flood tool
 * (bootstrap_flood.c, `gradwire-bootstrap-flood`) and the bootstrap's flood
 * test (tests/transport/bootstrap/test_bootstrap_flood.c) share it.
 *
 * The flood runs in a process of its own (forked by gw_flood_start), so
 * that its descriptors count against its own RLIMIT_NOFILE, which it raises
 * (as root, the hard limit too), and not against the root's or the test's.
 * Every connection that ends, whoever ended it, is replaced at once by a new
 * one: the root always faces `conns` strangers, not a burst that drains.
 * Connections come from loopback source addresses 127.0.0.1, 127.0.0.2, ...
 * (`sources` of them), which multiplies the source ports available to
 * connections that end and are replaced (each leaves a TIME_WAIT behind).
 */
#ifndef GW_TOOLS_DEV_FLOOD_H
#define GW_TOOLS_DEV_FLOOD_H

#include <sys/types.h>

typedef enum gw_flood_kind {
    GW_FLOOD_IDLE,        /* connect and send nothing */
    GW_FLOOD_GARBAGE,     /* connect and send 64 bytes that are not a bootstrap message */
    GW_FLOOD_WRONG_TOKEN, /* a well-formed HELLO claiming a rank of the job, then a
                           * RESPONSE whose proof is made with another token */
    GW_FLOOD_CHURN,       /* connect and close at once (with a reset) */
    GW_FLOOD_KINDS
} gw_flood_kind_t;

typedef struct gw_flood_opts {
    const char *host; /* the root's IPv4 address, "127.0.0.1" */
    int port;
    int conns; /* connections held at once */
    gw_flood_kind_t kind;
    int job_size; /* wrong-token hellos claim ranks 1 .. job_size - 1 and this size */
    int sources;  /* loopback source addresses to spread over (1: 127.0.0.1 only) */
} gw_flood_opts_t;

typedef struct gw_flood_stats {
    long long opened;    /* connect() calls */
    long long connected; /* connections that completed */
    long long ended;     /* connections that the root closed or reset */
    long long failed;    /* connect() or a transfer failed on our side */
    int open_now;        /* connections open when the report was written */
    int conns;           /* connections held at once (fewer than asked when
                          * the descriptor limit could not be raised) */
    double ms;           /* since the flood started */
} gw_flood_stats_t;

typedef struct gw_flood {
    pid_t pid;
    int rfd; /* the reports of the flood process */
} gw_flood_t;

/* Fork the flood process and wait until `conns` connections have completed
 * (or ready_ms has passed): *ready (may be NULL) says how far it got. 0, or
 * -1 with a message on stderr. */
int gw_flood_start(gw_flood_t *f, const gw_flood_opts_t *o, int ready_ms, gw_flood_stats_t *ready);
/* Stop the flood process, reap it, and fill *total (may be NULL) with what it
 * did. 0, or -1 when it died or reported nothing. */
int gw_flood_stop(gw_flood_t *f, gw_flood_stats_t *total);

const char *gw_flood_kind_name(gw_flood_kind_t k);
/* "idle", "garbage", "wrongtoken", "churn"; 0, or -1 for anything else. */
int gw_flood_kind_parse(const char *s, gw_flood_kind_t *k);

#endif
