/*
 * fr_cmd.c - `gradwire fr DIR`: the ranks' flight recorder dumps
 * (GW_FR_DUMP=DIR, rank-N.json, and rank-N.comm-X.json for a communicator
 * that gw_comm_split made) merged into one report per communicator that
 * says where each rank was and where they diverged.
 *
 * For every rank: why it wrote (timeout, abort, a signal), how many calls
 * it had completed, and its newest call: kind, sequence number, size,
 * state, the step it was in and the rank that step waited for. Then the
 * divergence: ranks grouped by the call they were in (the ranks in the
 * oldest call are the ones behind), calls that ranks recorded with other
 * arguments under one sequence number (a mismatch), the chain of waits,
 * and the ranks that wrote no dump (stopped or killed outright).
 *
 * The dumps are read with the library's reader (collectives/comm/
 * fr_read.c, compiled in: the library exports only the public API), which
 * refuses anything malformed, naming the file and the byte.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/flight_recorder.h"
#include "fr_cmd.h"
#include "kit.h"

#define MAX_DUMP_BYTES (64u << 20)

static int usage(FILE *out, int code)
{
    fprintf(out, "usage: gradwire fr DIR\n"
                 "\n"
                 "Merge the flight recorder dumps in DIR (GW_FR_DUMP=DIR: rank-N.json, one per\n"
                 "rank, and rank-N.comm-X.json for a communicator made by gw_comm_split) into\n"
                 "one report per communicator: where each rank was, where the ranks diverged,\n"
                 "and which ranks wrote no dump.\n");
    return code;
}

static int read_dump(const char *path, gw_fr_dump_t *d)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gradwire fr: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(MAX_DUMP_BYTES);
    size_t n = buf ? fread(buf, 1, MAX_DUMP_BYTES, f) : 0;
    int too_big = buf && n == MAX_DUMP_BYTES && fgetc(f) != EOF;
    fclose(f);
    if (!buf || too_big) {
        fprintf(stderr, "gradwire fr: %s: %s\n", path,
                buf ? "larger than 64 MiB: not a dump" : "out of memory");
        free(buf);
        return -1;
    }
    char err[256];
    gw_status_t st = gw__fr_parse(buf, n, d, err, sizeof(err));
    free(buf);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire fr: %s: not a readable dump: %s\n", path, err);
        return -1;
    }
    return 0;
}

/* The newest entry of a dump, NULL when it recorded none. */
static const gw_fr_entry_t *newest(const gw_fr_dump_t *d)
{
    return d->nentries ? &d->entries[d->nentries - 1] : NULL;
}

static void describe(const gw_fr_dump_t *d, char *buf, size_t cap)
{
    const gw_fr_entry_t *e = newest(d);
    if (!e) {
        snprintf(buf, cap, "no collective recorded");
        return;
    }
    size_t len =
        (size_t)snprintf(buf, cap, "%s #%llu (%llu bytes of %s, %s)", gw__fr_kind_name(e->kind),
                         (unsigned long long)e->seq, (unsigned long long)e->bytes,
                         gw_dtype_name(e->dtype), gw_algo_name(e->algo));
    if (len >= cap)
        return;
    if (e->state != GW_FR_STARTED) {
        snprintf(buf + len, cap - len, " %s, %s", gw__fr_state_name(e->state),
                 gw_status_name(e->status));
        return;
    }
    double for_s = (double)(d->now_ns - e->t_start_ns) / 1e9;
    len += (size_t)snprintf(buf + len, cap - len, " running for %.3f s, step %u %s", for_s, e->step,
                            gw__fr_state_name(e->step_state));
    if (len < cap && e->step_state == GW_FR_STARTED && e->step_peer >= 0)
        snprintf(buf + len, cap - len, ", waiting for rank %d for %.3f s", e->step_peer,
                 (double)(d->now_ns - e->step_started_ns) / 1e9);
}

/* The entry of sequence number seq in d, NULL when d has none. */
static const gw_fr_entry_t *find_seq(const gw_fr_dump_t *d, uint64_t seq)
{
    for (int i = d->nentries - 1; i >= 0; i--)
        if (d->entries[i].seq == seq)
            return &d->entries[i];
    return NULL;
}

static void report(gw_fr_dump_t *dumps, int size, const char *dir)
{
    int have = 0;
    for (int r = 0; r < size; r++)
        have += dumps[r].size > 0;
    printf("flight recorder dumps in %s: %d of %d ranks\n\n", dir, have, size);
    printf("%-5s %-9s %-6s %s\n", "rank", "why", "done", "newest call");
    for (int r = 0; r < size; r++) {
        char what[256];
        if (!dumps[r].size) {
            printf("%-5d %-9s %-6s %s\n", r, "-", "-", "no dump (stopped, killed, or not run)");
            continue;
        }
        describe(&dumps[r], what, sizeof(what));
        printf("%-5d %-9s %-6llu %s\n", r, dumps[r].why, (unsigned long long)dumps[r].done, what);
    }
    /* Where they diverged: the ranks grouped by their newest call. */
    printf("\n");
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < size; r++) {
        const gw_fr_entry_t *e = dumps[r].size ? newest(&dumps[r]) : NULL;
        if (!e)
            continue;
        lo = e->seq < lo ? e->seq : lo;
        hi = e->seq > hi ? e->seq : hi;
    }
    if (lo == UINT64_MAX) {
        printf("no rank recorded a collective\n");
    } else if (lo == hi) {
        printf("no divergence: every rank with a dump is in call #%llu\n", (unsigned long long)lo);
    } else {
        /* Each distinct call, oldest first (a few ranks: quadratic is fine). */
        printf("diverged: the ranks are in different calls\n");
        for (uint64_t s = lo, next;; s = next) {
            const gw_fr_entry_t *first = NULL;
            int n = 0;
            next = UINT64_MAX;
            for (int r = 0; r < size; r++) {
                const gw_fr_entry_t *e = dumps[r].size ? newest(&dumps[r]) : NULL;
                if (e && e->seq == s) {
                    printf("%s%d", n ? "," : (first = e, "  rank(s) "), r);
                    n++;
                } else if (e && e->seq > s && e->seq < next) {
                    next = e->seq;
                }
            }
            printf(" in %s #%llu%s\n", gw__fr_kind_name(first->kind), (unsigned long long)s,
                   s == lo ? " (behind)" : "");
            if (next == UINT64_MAX)
                break;
        }
    }
    /* One sequence number, other arguments: a mismatch. */
    for (int r = 1; r < size; r++) {
        if (!dumps[r].size)
            continue;
        for (int i = 0; i < dumps[r].nentries; i++) {
            const gw_fr_entry_t *e = &dumps[r].entries[i];
            for (int q = 0; q < r; q++) {
                const gw_fr_entry_t *o = dumps[q].size ? find_seq(&dumps[q], e->seq) : NULL;
                if (o && (o->kind != e->kind || o->bytes != e->bytes || o->dtype != e->dtype)) {
                    printf("mismatch in #%llu: rank %d called %s of %llu bytes of %s, rank %d "
                           "%s of %llu bytes of %s\n",
                           (unsigned long long)e->seq, q, gw__fr_kind_name(o->kind),
                           (unsigned long long)o->bytes, gw_dtype_name(o->dtype), r,
                           gw__fr_kind_name(e->kind), (unsigned long long)e->bytes,
                           gw_dtype_name(e->dtype));
                    break;
                }
            }
        }
    }
    /* The waits, and where they lead. */
    int waits = 0;
    for (int r = 0; r < size; r++) {
        const gw_fr_entry_t *e = dumps[r].size ? newest(&dumps[r]) : NULL;
        if (e && e->state == GW_FR_STARTED && e->step_state == GW_FR_STARTED && e->step_peer >= 0) {
            printf("%s%d -> %d", waits ? ", " : "waits: ", r, e->step_peer);
            waits++;
        }
    }
    if (waits)
        printf("\n");
    for (int r = 0; r < size; r++) {
        const gw_fr_entry_t *e = dumps[r].size ? newest(&dumps[r]) : NULL;
        if (!e || e->state != GW_FR_STARTED || e->step_peer < 0 || e->step_peer >= size)
            continue;
        if (!dumps[e->step_peer].size)
            printf("rank %d waits for rank %d, which wrote no dump: look there first\n", r,
                   e->step_peer);
    }
}

/* The dumps of one communicator: the job's (id 0) or one that
 * gw_comm_split made, whose ranks are numbered within it. */
typedef struct fr_group {
    uint32_t comm_id;
    int size;
    gw_fr_dump_t *dumps; /* size of them, by rank; .size 0: no dump */
} fr_group_t;

/* Put d into its communicator's group (made on its first dump); 0, or -1
 * with the reason printed (d is then freed). */
static int add_dump(fr_group_t **groups, int *ngroups, const char *path, gw_fr_dump_t *d)
{
    fr_group_t *g = NULL;
    for (int i = 0; i < *ngroups; i++)
        if ((*groups)[i].comm_id == d->comm_id)
            g = &(*groups)[i];
    if (!g) {
        fr_group_t *more = realloc(*groups, (size_t)(*ngroups + 1) * sizeof(*more));
        gw_fr_dump_t *dumps = calloc((size_t)d->size, sizeof(*dumps));
        if (!more || !dumps) {
            if (more)
                *groups = more;
            free(dumps);
            fprintf(stderr, "gradwire fr: out of memory\n");
            gw__fr_dump_free(d);
            return -1;
        }
        *groups = more;
        g = &more[(*ngroups)++];
        *g = (fr_group_t){.comm_id = d->comm_id, .size = d->size, .dumps = dumps};
    }
    if (d->size != g->size || g->dumps[d->rank].size) {
        fprintf(stderr, "gradwire fr: %s: a communicator of %d ranks, the others' of %d\n", path,
                d->size, g->size);
        gw__fr_dump_free(d);
        return -1;
    }
    g->dumps[d->rank] = *d;
    return 0;
}

static int by_comm_id(const void *a, const void *b)
{
    uint32_t x = ((const fr_group_t *)a)->comm_id, y = ((const fr_group_t *)b)->comm_id;
    return x < y ? -1 : x > y;
}

int gw_fr_main(int argc, char **argv)
{
    if (argc != 2)
        return usage(stderr, 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return usage(stdout, 0);
    const char *dir = argv[1];
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "gradwire fr: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    fr_group_t *groups = NULL;
    int ngroups = 0, bad = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        /* rank-N.json, the job's communicator; rank-N.comm-X.json, one
         * that gw_comm_split made (id X, its own rank numbers). */
        int rank, used = 0;
        unsigned comm_id = 0;
        size_t len = strlen(de->d_name);
        if (!(sscanf(de->d_name, "rank-%d.json%n", &rank, &used) == 1 && (size_t)used == len) &&
            !(sscanf(de->d_name, "rank-%d.comm-%8x.json%n", &rank, &comm_id, &used) == 2 &&
              (size_t)used == len && comm_id != 0))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        gw_fr_dump_t d;
        if (read_dump(path, &d) != 0) {
            bad = 1;
            continue;
        }
        if (d.rank != rank || d.comm_id != comm_id) {
            fprintf(stderr, "gradwire fr: %s holds rank %d's dump of communicator %08x\n", path,
                    d.rank, (unsigned)d.comm_id);
            gw__fr_dump_free(&d);
            bad = 1;
            continue;
        }
        if (add_dump(&groups, &ngroups, path, &d) != 0)
            bad = 1;
    }
    closedir(dp);
    if (!ngroups) {
        fprintf(stderr, "gradwire fr: no readable dump (rank-N.json, rank-N.comm-X.json) in %s\n",
                dir);
        return 1;
    }
    qsort(groups, (size_t)ngroups, sizeof(*groups), by_comm_id);
    for (int i = 0; i < ngroups; i++) {
        if (i)
            printf("\n");
        if (groups[i].comm_id)
            printf("== communicator %08x (made by gw_comm_split; its own rank numbers)\n",
                   (unsigned)groups[i].comm_id);
        else if (ngroups > 1)
            printf("== the job's communicator\n");
        report(groups[i].dumps, groups[i].size, dir);
        for (int r = 0; r < groups[i].size; r++)
            gw__fr_dump_free(&groups[i].dumps[r]);
        free(groups[i].dumps);
    }
    free(groups);
    return bad;
}
