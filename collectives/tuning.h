/*
 * tuning.h - the alpha-beta cost model that picks each collective's
 * algorithm: allreduce (tuning.c), allgather, reduce-scatter, broadcast and
 * reduce (tuning_coll.c); and the tuning file that overrides its figures,
 * its measured rules and its choices (tuning_file.c).
 *
 * T(algo, n, S) = a_alpha(algo, n) * alpha + a_beta(algo, n) * S * beta
 *               + a_gamma(algo, n) * S * gamma
 * with alpha the per-message latency (s), beta the per-byte wire time (s/B)
 * and gamma the per-byte reduction time (s/B). The coefficients of each
 * algorithm are derived in tuning.c.
 */
#ifndef GW_COLLECTIVES_TUNING_H
#define GW_COLLECTIVES_TUNING_H

#include <stddef.h>
#include <stdio.h>

#include "collectives/msg/tag.h"
#include "common/log.h"
#include "gradwire.h"

typedef struct gw_tuning {
    double alpha;       /* seconds per message */
    double beta;        /* seconds per byte on a link */
    double gamma;       /* seconds per byte reduced */
    size_t chunk_bytes; /* pipeline chunk of ring and tree */
    double beta_local;  /* seconds per byte inside a host (shared memory) */
    /* Seconds each further message of a round costs a rank inside a host
     * when it sends to several peers at once (the hierarchical
     * allreduce's local phases): the wire latencies overlap, the CPU's
     * per-message work does not (a system call per TCP message, a few
     * stores per shared-memory one). A transport's default; no key of
     * the tuning file. */
    double alpha_local;
    /* The measured rules that override the model's allreduce choice
     * (tuning.c says where each came from), in bytes and ranks: keys of
     * the tuning file of the same names. */
    size_t direct_large_min;     /* one host, 2..direct_large_max_ranks: direct from here */
    int direct_large_max_ranks;  /* (0 turns the rule off) */
    size_t direct_max_bytes;     /* one host over shm: direct's small form up to here */
    int direct_max_ranks;        /* on at most this many ranks */
    size_t direct_pair_min;      /* 2 ranks over shm: direct from here (0: off) */
    size_t tree4_min, tree4_end; /* 4 ranks over shm: tree in [min, end) */
    size_t direct_shm_min;       /* one host over shm, 3..direct_large_max_ranks: direct */
    /* An algorithm forced per kind of collective (index: gw_coll_kind_t;
     * GW_ALGO_AUTO, the default: the model chooses per call). Keys
     * "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce". */
    gw_algo_t force[GW_COLL_KIND_END];
    /* The keys a tuning file gave (bit k: key k of tuning_file.c), so that
     * only those replace a communicator's defaults (gw__tuning_merge). */
    uint64_t from_file;
} gw_tuning_t;

/* The transports a communicator's pairs of ranks use, as bits. */
#define GW_TUNING_LINK_SHM 1u
#define GW_TUNING_LINK_TCP 2u
#define GW_TUNING_LINK_IB 4u

/* The default figures for a communicator whose pairs on one host use the
 * transports `intra` and whose pairs on different hosts use `inter`: alpha
 * and beta of the worst of them all (a flat algorithm waits for its slowest
 * edge), beta_local of the worst inside a host; TCP's when both are 0. */
void gw__tuning_links(gw_tuning_t *t, unsigned intra, unsigned inter);

/* Defaults for every pair on one transport ("shm", "tcp", "ib"; anything
 * else, "self" included, is TCP's). */
void gw__tuning_defaults(gw_tuning_t *t, const char *transport);

/* Predicted seconds for an allreduce of bytes over nranks with algo, one
 * rank per host (GW_ALGO_HIER is then the ring over the hosts). */
double gw__tuning_predict(const gw_tuning_t *t, gw_algo_t algo, int nranks, size_t bytes);
/* The same on nhosts hosts with at most local_max ranks on one. */
double gw__tuning_predict_hosts(const gw_tuning_t *t, gw_algo_t algo, int nranks, int nhosts,
                                int local_max, size_t bytes);

/* The measured rules' defaults: measured on the 2-core test machine
 * (tuning.c says how; `gradwire-bench tune` measures a machine's own). */
#define GW_TUNING_DIRECT_LARGE_MIN ((size_t)8 << 20)
#define GW_TUNING_DIRECT_LARGE_MAX_RANKS 4
#define GW_TUNING_DIRECT_MAX_RANKS 8
#define GW_TUNING_DIRECT_MAX_BYTES ((size_t)16 * 1024)
#define GW_TUNING_DIRECT_PAIR_MIN ((size_t)64 * 1024)
#define GW_TUNING_TREE4_MIN ((size_t)0) /* off: direct_shm_min took its sizes */
#define GW_TUNING_TREE4_END ((size_t)0)
#define GW_TUNING_DIRECT_SHM_MIN ((size_t)32 * 1024)

/* Set those defaults, no algorithm forced, no key from a file.
 * gw__tuning_links and gw__tuning_defaults set them too. */
void gw__tuning_rules_default(gw_tuning_t *t);

/* The cheapest allreduce algorithm by the model (never GW_ALGO_AUTO), one
 * rank per host and on nhosts hosts of at most local_max ranks (GW_ALGO_HIER
 * a candidate when local_max > 1, one host included). On one host of 2 to
 * t->direct_large_max_ranks ranks, messages of t->direct_large_min bytes
 * and more take GW_ALGO_DIRECT's large form: a measured rule, not the
 * model's (tuning.c). */
gw_algo_t gw__tuning_pick(const gw_tuning_t *t, int nranks, size_t bytes);
gw_algo_t gw__tuning_pick_hosts(const gw_tuning_t *t, int nranks, int nhosts, int local_max,
                                size_t bytes);

/* The choice when every rank is on one host and reached through shared
 * memory: the cheapest of the general candidates on one host (hier among
 * them) and, for messages up to t->direct_max_bytes on up to
 * t->direct_max_ranks ranks, GW_ALGO_DIRECT's one-round small form (chosen
 * on a tie); on exactly 2 ranks, from t->direct_pair_min bytes, the direct
 * large form; on exactly 4 ranks, in [t->tree4_min, t->tree4_end), the
 * tree; on 3 to t->direct_large_max_ranks ranks, from t->direct_shm_min
 * bytes, the direct large form (measured rules, tuning.c). */
gw_algo_t gw__tuning_pick_shm(const gw_tuning_t *t, int nranks, size_t bytes);

/* The other collectives (tuning_coll.c): the predicted seconds of algo for
 * a call of kind on nranks ranks moving `bytes` (the whole vector: for
 * allgather and reduce-scatter all n blocks, for broadcast and reduce the
 * buffer), HUGE_VAL for an algorithm the kind does not have; and the
 * cheapest of the kind's algorithms, or the one t->force names. on_shm:
 * every rank on one host over shared memory (the direct exchanges' home,
 * as for allreduce). Every rank computes the same choice from the same
 * figures. */
double gw__tuning_predict_coll(const gw_tuning_t *t, gw_coll_kind_t kind, gw_algo_t algo,
                               int nranks, size_t bytes, int on_shm);
gw_algo_t gw__tuning_pick_coll(const gw_tuning_t *t, gw_coll_kind_t kind, int nranks, size_t bytes,
                               int on_shm);
/* Whether kind runs algo (GW_ALGO_AUTO: yes, the model's choice). */
int gw__tuning_coll_has(gw_coll_kind_t kind, gw_algo_t algo);

/*
 * Tuning files hold measured figures (`gradwire-bench tune --out FILE`
 * writes one) and replace the defaults when GW_TUNING_FILE names one:
 *
 *   gradwire-tuning 1            <- version line, first (blank and # lines
 *   # measured ...                  may come before it)
 *   alpha = 3.1e-05              <- seconds per message
 *   beta = 4.2e-09               <- seconds per byte on a link
 *   gamma = 1.9e-10              <- seconds per byte reduced
 *   chunk_bytes = 524288         <- pipeline chunk of ring and tree
 *   beta_local = 6e-10           <- seconds per byte inside a host (the
 *                                   hierarchical allreduce's local phases)
 *   alpha_local = 5e-07          <- seconds per further message of a round
 *   direct_pair_min = 65536      <- the measured rules, in bytes and ranks
 *   ...                             (gw_tuning_t above, tuning.c)
 *   allgather = ring             <- an algorithm forced for every call of a
 *                                   kind (auto: the model's choice)
 *
 * One key = value per line, spaces around '=' allowed, '#' starts a comment
 * anywhere. Every key is optional (a missing one keeps its default) but may
 * appear only once; an unknown key, a bad value, an algorithm the kind does
 * not have or a version this library does not know is an error naming the
 * line.
 */
#define GW_TUNING_FILE_VERSION 1
/* The most bytes a tuning file may hold (it is a few lines). */
#define GW_TUNING_FILE_MAX ((size_t)1 << 20)

/* Apply the file read from f (name is for messages) to *t. On error *t is
 * unchanged, the problem is logged with name and line number, and the
 * result is GW_ERR_CONFIG. */
gw_status_t gw__tuning_parse(gw_tuning_t *t, FILE *f, const char *name, const gw_logger_t *lg);

/* Read the tuning file at path into *t (as gw__tuning_parse); a file that
 * cannot be opened, is not a regular file (a FIFO, /dev/zero) or holds more
 * than GW_TUNING_FILE_MAX bytes is GW_ERR_CONFIG naming the path. */
gw_status_t gw__tuning_load(gw_tuning_t *t, const char *path, const gw_logger_t *lg);

/* gw__tuning_load of $GW_TUNING_FILE when it is set and not empty; GW_OK
 * without touching *t otherwise. */
gw_status_t gw__tuning_load_env(gw_tuning_t *t, const gw_logger_t *lg);

/* Write *t as a tuning file (version line, then every key). */
gw_status_t gw__tuning_write(const gw_tuning_t *t, FILE *f);

/* Replace in *t every field that file's tuning file gave (file->from_file). */
void gw__tuning_merge(gw_tuning_t *t, const gw_tuning_t *file);

/* A line for the log: the keys file gave, "key=value" separated by spaces
 * ("" for none), into buf of size len. */
void gw__tuning_describe_file(const gw_tuning_t *file, char *buf, size_t len);

#endif
