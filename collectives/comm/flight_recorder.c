/*
 * flight_recorder.c - the last N collectives of a communicator, and the
 * dump that tells where each rank was when the job stopped.
 *
 * The recorder is a ring of entries that only the thread driving the
 * communicator writes (the caller's, or the progress thread's: one at a
 * time, comm_state.c), so the hooks take no lock: a begin claims the next
 * slot and fills it, a post or a wait updates its step. A reader on
 * another thread (the fatal-signal handler, the status answer) may see an
 * entry half updated; every field is a plain word, so the worst it sees
 * is a step that is one state behind.
 *
 * The dump is written with write(2) from a buffer that this file formats
 * itself (integers by hand, strings that are all static), because a fatal
 * signal may arrive inside malloc or stdio, where nothing else is safe. The
 * same writer serves the ordinary path (a timeout, an abort), so the
 * signal path is exercised by every failure test, not only by crashes.
 *
 * Process-wide state: the fatal-signal handler must find the recorders
 * with a dump directory, and a handler gets no argument, so they are
 * listed in one static table of atomic pointers (a handful of slots; a
 * recorder that finds none free still dumps on failures, only not on a
 * signal). It is the one exception to "no global state" in this file and
 * exists only when GW_FR_DUMP is set.
 */
#include "collectives/comm/flight_recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/fr_internal.h"
#include "collectives/comm/trace.h"
#include "common/clock.h"
#include "common/env.h"

/* ---- the fatal-signal handler ------------------------------------------ */

#define DUMPERS 16
static _Atomic(gw_fr_t *) dumpers[DUMPERS];
static atomic_int handlers_installed;
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
static struct sigaction previous[NFATAL];

static const char *signal_word(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    case SIGABRT:
        return "SIGABRT";
    default:
        return "SIGTERM";
    }
}

static void on_fatal(int sig)
{
    int saved = errno;
    for (int i = 0; i < DUMPERS; i++) {
        gw_fr_t *fr = atomic_load(&dumpers[i]);
        if (fr)
            gw__fr_write(fr, signal_word(sig), 1);
    }
    /* Hand the signal to whoever had it before us (the default action
     * ends the process): restore that action and raise it again. A fault
     * (SIGSEGV) comes back by itself when the instruction is retried. */
    for (size_t k = 0; k < NFATAL; k++)
        if (fatal_signals[k] == sig)
            sigaction(sig, &previous[k], NULL);
    errno = saved;
    raise(sig);
}

static void install_handlers(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&handlers_installed, &expected, 1))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    for (size_t k = 0; k < NFATAL; k++) {
        struct sigaction old;
        if (sigaction(fatal_signals[k], NULL, &old) != 0)
            continue;
        /* A signal the process ignores stays ignored: it is not fatal. */
        if (old.sa_handler == SIG_IGN)
            continue;
        previous[k] = old;
        sigaction(fatal_signals[k], &sa, NULL);
    }
}

static void register_dumper(gw_fr_t *fr)
{
    for (int i = 0; i < DUMPERS; i++) {
        gw_fr_t *none = NULL;
        if (atomic_compare_exchange_strong(&dumpers[i], &none, fr)) {
            install_handlers();
            return;
        }
    }
    GW_INFO(fr->log, "coll",
            "more than %d recorders with a dump directory: this one dumps on "
            "failures, not on fatal signals",
            DUMPERS);
}

static void unregister_dumper(gw_fr_t *fr)
{
    for (int i = 0; i < DUMPERS; i++) {
        gw_fr_t *me = fr;
        atomic_compare_exchange_strong(&dumpers[i], &me, NULL);
    }
}

/* ---- life ------------------------------------------------------------- */

gw_fr_t *gw__fr_create(const gw_logger_t *log, int entries, int rank, int size, uint32_t comm_id,
                       const char *dump_dir)
{
    if (entries <= 0)
        return NULL;
    gw_fr_t *fr = calloc(1, sizeof(*fr));
    if (!fr || !(fr->ring = calloc((size_t)entries, sizeof(*fr->ring))) ||
        !(fr->peer_sent = calloc((size_t)size, sizeof(uint64_t))) ||
        !(fr->peer_recv = calloc((size_t)size, sizeof(uint64_t)))) {
        if (fr) {
            free(fr->ring);
            free(fr->peer_sent);
        }
        free(fr);
        return NULL;
    }
    fr->log = log;
    fr->cap = (uint32_t)entries;
    fr->rank = rank;
    fr->size = size;
    fr->comm_id = comm_id;
    if (dump_dir) {
        /* The directory is made here, not on the signal path; 0700, as the
         * dumps are 0600: they say what the job was doing. */
        if (mkdir(dump_dir, 0700) != 0 && errno != EEXIST)
            GW_WARN(log, "coll", "GW_FR_DUMP: cannot create %s: %m; no dump will be written",
                    dump_dir);
        else if (comm_id)
            snprintf(fr->path, sizeof(fr->path), "%s/rank-%d.comm-%08x.json", dump_dir, rank,
                     (unsigned)comm_id);
        else
            snprintf(fr->path, sizeof(fr->path), "%s/rank-%d.json", dump_dir, rank);
        if (fr->path[0])
            register_dumper(fr);
    }
    return fr;
}

gw_status_t gw__fr_from_env(const gw_logger_t *log, int rank, int size, uint32_t comm_id,
                            gw_fr_t **out)
{
    long entries;
    const char *dir = NULL, *trace = NULL;
    *out = NULL;
    if (gw__env_int(log, GW_ENV_FR_ENTRIES, &entries) != GW_OK ||
        gw__env_str(log, GW_ENV_FR_DUMP, &dir) != GW_OK ||
        gw__env_str(log, GW_ENV_TRACE, &trace) != GW_OK)
        return GW_ERR_CONFIG;
    /* The trace is fed by the recorder's hooks: it needs a recorder, if
     * only of one entry. A sub-communicator traces into its root's file
     * only through its root's calls: one file per rank. */
    if (entries == 0 && trace && !comm_id)
        entries = 1;
    if (entries == 0)
        return GW_OK;
    gw_fr_t *fr = gw__fr_create(log, (int)entries, rank, size, comm_id, dir);
    if (!fr) {
        GW_ERROR(log, "coll", "no memory for a flight recorder of %ld entries", entries);
        return GW_ERR_NO_MEMORY;
    }
    if (trace && !comm_id) {
        gw_status_t st = gw__trace_open(log, trace, rank, &fr->trace);
        if (st != GW_OK) {
            gw__fr_destroy(fr);
            return st;
        }
    }
    *out = fr;
    return GW_OK;
}

void gw__fr_destroy(gw_fr_t *fr)
{
    if (!fr)
        return;
    unregister_dumper(fr);
    gw__trace_close(fr->trace);
    free(fr->ring);
    free(fr->peer_sent);
    free(fr->peer_recv);
    free(fr);
}

gw_trace_t *gw__fr_trace(const gw_fr_t *fr) { return fr ? fr->trace : NULL; }

/* ---- the hooks --------------------------------------------------------- */

void gw__fr_begin(gw_fr_t *fr, uint64_t seq, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                  gw_algo_t algo)
{
    if (!fr)
        return;
    gw_fr_entry_t *e = &fr->ring[fr->next % fr->cap];
    fr->next++;
    fr->running = 1;
    size_t esize = gw_dtype_size(dtype);
    e->seq = seq;
    e->bytes = (uint64_t)count * (esize ? esize : 1);
    e->t_start_ns = gw__fr_now(fr);
    e->t_end_ns = 0;
    e->kind = (uint32_t)kind;
    e->dtype = (int32_t)dtype;
    e->algo = (int32_t)algo;
    e->status = GW_OK;
    e->state = GW_FR_STARTED;
    e->step = 0;
    e->step_state = GW_FR_NONE;
    e->step_peer = -1;
    e->step_posted_ns = e->step_started_ns = e->step_done_ns = 0;
    e->step_bytes = 0;
    e->npeers = 0;
}

static gw_fr_entry_t *running(gw_fr_t *fr)
{
    return fr && fr->running ? &fr->ring[(fr->next - 1) % fr->cap] : NULL;
}

void gw__fr_end(gw_fr_t *fr, gw_status_t status)
{
    gw_fr_entry_t *e = running(fr);
    if (!e)
        return;
    e->t_end_ns = gw__fr_now(fr);
    e->status = status;
    e->state = status == GW_OK ? GW_FR_DONE : GW_FR_FAILED;
    fr->running = 0;
    if (status == GW_OK)
        fr->done++;
    if (fr->trace)
        gw__trace_op(fr->trace, e);
}

void gw__fr_post(gw_fr_t *fr, int peer, int is_send, size_t len)
{
    gw_fr_entry_t *e = running(fr);
    if (!e)
        return;
    if (e->step_state != GW_FR_POSTED) {
        /* The first post after a wait opens the next step. */
        e->step++;
        e->step_state = GW_FR_POSTED;
        e->step_posted_ns = gw__fr_now(fr);
        e->step_started_ns = e->step_done_ns = 0;
        e->step_bytes = 0;
        e->step_peer = -1;
    }
    if (is_send)
        e->step_bytes += len;
    if (peer >= 0 && peer < fr->size) {
        uint64_t *by_peer = is_send ? fr->peer_sent : fr->peer_recv;
        by_peer[peer] += len;
        *(is_send ? &fr->bytes_sent : &fr->bytes_recv) += len;
    }
    uint32_t n = e->npeers < GW_FR_PEERS ? e->npeers : GW_FR_PEERS;
    for (uint32_t i = 0; i < n; i++)
        if (e->peers[i] == peer)
            return;
    if (n < GW_FR_PEERS)
        e->peers[n] = peer;
    e->npeers++;
}

void gw__fr_wait(gw_fr_t *fr, int peer)
{
    gw_fr_entry_t *e = running(fr);
    if (!e)
        return;
    if (e->step_state == GW_FR_NONE || e->step_state == GW_FR_DONE)
        e->step++; /* a wait for messages posted in an earlier step */
    e->step_state = GW_FR_STARTED;
    e->step_started_ns = gw__fr_now(fr);
    e->step_done_ns = 0;
    e->step_peer = peer;
}

void gw__fr_waited(gw_fr_t *fr)
{
    gw_fr_entry_t *e = running(fr);
    if (!e)
        return;
    e->step_state = GW_FR_DONE;
    e->step_done_ns = gw__fr_now(fr);
    if (fr->trace)
        gw__trace_step(fr->trace, e);
}

const gw_fr_entry_t *gw__fr_current(const gw_fr_t *fr)
{
    if (!fr || fr->next == 0)
        return NULL;
    return &fr->ring[(fr->next - 1) % fr->cap];
}

uint64_t gw__fr_done_count(const gw_fr_t *fr) { return fr ? fr->done : 0; }

gw_status_t gw__fr_dump(gw_fr_t *fr, const char *why)
{
    if (!fr || !fr->path[0] || fr->dumped)
        return GW_OK;
    fr->dumped = 1; /* the first failure's picture is the one that matters */
    gw_status_t st = gw__fr_write(fr, why, 0);
    if (st == GW_OK)
        GW_INFO(fr->log, "coll", "flight recorder written to %s (%s)", fr->path, why);
    else
        GW_WARN(fr->log, "coll", "cannot write the flight recorder to %s: %s", fr->path,
                gw_status_str(st));
    return st;
}
