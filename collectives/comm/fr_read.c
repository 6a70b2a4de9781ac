/*
 * fr_read.c - reading a flight recorder's dump back (fr_write.c writes it;
 * `gradwire fr` merges the ranks' dumps).
 *
 * The files come from outside the process (a directory anyone may have
 * written to, a dump cut short by a crash), so this is a strict reader of
 * the one shape fr_write.c writes: a JSON object of known keys whose values
 * are numbers, strings without escapes, one array of numbers ("peers") and
 * one array of objects ("entries"). Keys it does not know are skipped if
 * their value is a number or a string; anything else, any number out of
 * its field's range, more than GW_FR_READ_MAX entries or a cut is an
 * error that says where it is (tests/fuzz/fuzz_fr_dump.c).
 *
 * It also holds the names of kinds and states that the dump uses, so that
 * `gradwire fr` compiles this one file in (the library exports only the
 * public API) and needs nothing else.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/fr_internal.h"

#define GW_FR_READ_MAX (1u << 20)

/* The names the dump uses (fr_write.c writes them, this file reads them,
 * and `gradwire fr` compiles this file in: it needs nothing else). */
static const char *const kind_names[GW_COLL_KIND_END] = {
    [GW_COLL_ALLREDUCE] = "allreduce",
    [GW_COLL_BROADCAST] = "broadcast",
    [GW_COLL_REDUCE] = "reduce",
    [GW_COLL_ALLGATHER] = "allgather",
    [GW_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [GW_COLL_BARRIER] = "barrier",
    [GW_COLL_ALLREDUCE_COMPRESSED] = "allreduce_compressed",
    [GW_COLL_ALLTOALL] = "alltoall",
    [GW_COLL_ALLTOALLV] = "alltoallv",
    [GW_COLL_GATHER] = "gather",
    [GW_COLL_SCATTER] = "scatter",
    [GW_COLL_ALLGATHERV] = "allgatherv",
};

const char *gw__fr_kind_name(uint32_t kind)
{
    return kind < GW_COLL_KIND_END && kind_names[kind] ? kind_names[kind] : "?";
}

const char *gw__fr_state_name(uint32_t s)
{
    switch (s) {
    case GW_FR_POSTED:
        return "posted";
    case GW_FR_STARTED:
        return "started";
    case GW_FR_DONE:
        return "done";
    case GW_FR_FAILED:
        return "failed";
    default:
        return "none";
    }
}

typedef struct rd {
    const char *p, *end, *start;
    char *err;
    size_t cap;
    int failed;
} rd_t;

__attribute__((format(printf, 2, 3))) static int fail(rd_t *r, const char *fmt, ...)
{
    if (r->failed)
        return -1;
    r->failed = 1;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(r->err, r->cap, "%s at byte %zu", what, (size_t)(r->p - r->start));
    return -1;
}

static void ws(rd_t *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static int expect(rd_t *r, char c)
{
    ws(r);
    if (r->p >= r->end || *r->p != c)
        return fail(r, "expected '%c'", c);
    r->p++;
    return 0;
}

/* A peek at the next character, after white space; 0 at the end. */
static char peek(rd_t *r)
{
    ws(r);
    return r->p < r->end ? *r->p : '\0';
}

/* A string without escapes, into buf (cut to cap - 1). */
static int string(rd_t *r, char *buf, size_t cap)
{
    if (expect(r, '"'))
        return -1;
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c == '\\' || c < 0x20)
            return fail(r, "escape or control character in a string");
        if (n + 1 < cap)
            buf[n++] = (char)c;
        r->p++;
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    buf[n] = '\0';
    return 0;
}

/* An integer in [lo, hi]. */
static int integer(rd_t *r, int64_t lo, uint64_t hi, int64_t *out_s, uint64_t *out_u)
{
    ws(r);
    int neg = r->p < r->end && *r->p == '-';
    if (neg)
        r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return fail(r, "expected a number");
    uint64_t v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return fail(r, "number too large");
        v = v * 10 + d;
        r->p++;
    }
    if (neg ? (lo >= 0 || v > (uint64_t) - (lo + 1) + 1) : v > hi)
        return fail(r, "number out of range");
    if (out_u)
        *out_u = v;
    if (out_s)
        *out_s = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int i64(rd_t *r, int64_t *out) { return integer(r, INT64_MIN, INT64_MAX, out, NULL); }
static int i32(rd_t *r, int32_t *out)
{
    int64_t v;
    if (integer(r, INT32_MIN, INT32_MAX, &v, NULL))
        return -1;
    *out = (int32_t)v;
    return 0;
}
static int u32(rd_t *r, uint32_t *out)
{
    uint64_t v;
    if (integer(r, 0, UINT32_MAX, NULL, &v))
        return -1;
    *out = (uint32_t)v;
    return 0;
}
static int u64(rd_t *r, uint64_t *out) { return integer(r, 0, UINT64_MAX, NULL, out); }

/* A value of a key this reader does not know: a number or a string. */
static int skip(rd_t *r)
{
    char c = peek(r);
    char tmp[8];
    if (c == '"')
        return string(r, tmp, sizeof(tmp));
    int64_t v;
    return i64(r, &v);
}

int gw__fr_state_parse(const char *name)
{
    for (uint32_t s = GW_FR_NONE; s <= GW_FR_FAILED; s++)
        if (strcmp(name, gw__fr_state_name(s)) == 0)
            return (int)s;
    return strcmp(name, "running") == 0 ? GW_FR_STARTED : -1;
}

static int named(rd_t *r, const char *what, const char *name, int *out, int n,
                 const char *(*name_of)(int))
{
    for (int i = 0; i < n; i++)
        if (strcmp(name, name_of(i)) == 0) {
            *out = i;
            return 0;
        }
    return fail(r, "unknown %s \"%s\"", what, name);
}

static const char *kind_of(int i) { return gw__fr_kind_name((uint32_t)i); }
static const char *dtype_of(int i) { return gw_dtype_name((gw_dtype_t)i); }
static const char *algo_of(int i) { return gw_algo_name((gw_algo_t)i); }

static int status_of(rd_t *r, const char *name, int32_t *out)
{
    for (int s = 0; s < 64; s++)
        if (strcmp(name, gw_status_name((gw_status_t)s)) == 0) {
            *out = s;
            return 0;
        }
    return fail(r, "unknown status \"%s\"", name);
}

static int entry(rd_t *r, gw_fr_entry_t *e)
{
    memset(e, 0, sizeof(*e));
    e->step_peer = -1;
    if (expect(r, '{'))
        return -1;
    if (peek(r) == '}')
        return expect(r, '}');
    for (;;) {
        char k[32], v[40];
        int x = 0;
        if (string(r, k, sizeof(k)) || expect(r, ':'))
            return -1;
        int rc;
        if (!strcmp(k, "seq"))
            rc = u64(r, &e->seq);
        else if (!strcmp(k, "bytes"))
            rc = u64(r, &e->bytes);
        else if (!strcmp(k, "start_ns"))
            rc = i64(r, &e->t_start_ns);
        else if (!strcmp(k, "end_ns"))
            rc = i64(r, &e->t_end_ns);
        else if (!strcmp(k, "step"))
            rc = u32(r, &e->step);
        else if (!strcmp(k, "step_peer"))
            rc = i32(r, &e->step_peer);
        else if (!strcmp(k, "step_posted_ns"))
            rc = i64(r, &e->step_posted_ns);
        else if (!strcmp(k, "step_started_ns"))
            rc = i64(r, &e->step_started_ns);
        else if (!strcmp(k, "step_done_ns"))
            rc = i64(r, &e->step_done_ns);
        else if (!strcmp(k, "step_bytes"))
            rc = u64(r, &e->step_bytes);
        else if (!strcmp(k, "npeers"))
            rc = u32(r, &e->npeers);
        else if (!strcmp(k, "kind")) {
            rc = string(r, v, sizeof(v)) || named(r, "kind", v, &x, GW_COLL_KIND_END, kind_of);
            e->kind = (uint32_t)x;
        } else if (!strcmp(k, "dtype")) {
            rc = string(r, v, sizeof(v)) || named(r, "dtype", v, &x, GW_DTYPE_COUNT, dtype_of);
            e->dtype = x;
        } else if (!strcmp(k, "algo")) {
            rc = string(r, v, sizeof(v)) || named(r, "algorithm", v, &x, GW_ALGO_COUNT, algo_of);
            e->algo = x;
        } else if (!strcmp(k, "status")) {
            rc = string(r, v, sizeof(v)) || status_of(r, v, &e->status);
        } else if (!strcmp(k, "state") || !strcmp(k, "step_state")) {
            rc = string(r, v, sizeof(v));
            int s = rc ? 0 : gw__fr_state_parse(v);
            if (!rc && s < 0)
                rc = fail(r, "unknown state \"%s\"", v);
            if (!strcmp(k, "state"))
                e->state = (uint32_t)s;
            else
                e->step_state = (uint32_t)s;
        } else if (!strcmp(k, "peers")) {
            rc = expect(r, '[');
            for (int n = 0; !rc && peek(r) != ']'; n++) {
                if (n && (rc = expect(r, ',')))
                    break;
                int32_t p;
                if ((rc = i32(r, &p)))
                    break;
                if (n >= GW_FR_PEERS)
                    rc = fail(r, "more than %d peers", GW_FR_PEERS);
                else
                    e->peers[n] = p;
            }
            if (!rc)
                rc = expect(r, ']');
        } else {
            rc = skip(r);
        }
        if (rc)
            return -1;
        char c = peek(r);
        if (c == '}')
            return expect(r, '}');
        if (expect(r, ','))
            return -1;
    }
}

static int entries(rd_t *r, gw_fr_dump_t *d)
{
    if (expect(r, '['))
        return -1;
    size_t cap = 0;
    for (int n = 0; peek(r) != ']'; n++) {
        if (n && expect(r, ','))
            return -1;
        if ((size_t)n >= GW_FR_READ_MAX)
            return fail(r, "more than %u entries", GW_FR_READ_MAX);
        if ((size_t)n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            gw_fr_entry_t *g = realloc(d->entries, ncap * sizeof(*g));
            if (!g)
                return fail(r, "out of memory");
            d->entries = g;
            cap = ncap;
        }
        if (entry(r, &d->entries[n]))
            return -1;
        d->nentries = n + 1;
    }
    return expect(r, ']');
}

gw_status_t gw__fr_parse(const char *text, size_t len, gw_fr_dump_t *out, char *err, size_t cap)
{
    char none[1];
    rd_t r = {.p = text,
              .end = text + len,
              .start = text,
              .err = cap ? err : none,
              .cap = cap ? cap : sizeof(none)};
    gw_fr_dump_t d = {.rank = -1, .size = 0};
    int have_magic = 0, rc = expect(&r, '{');
    while (!rc) {
        char k[32];
        if ((rc = string(&r, k, sizeof(k)) || expect(&r, ':')))
            break;
        int64_t v;
        if (!strcmp(k, "gradwire_fr")) {
            rc = i64(&r, &v);
            if (!rc && v != 1)
                rc = fail(&r, "unknown dump version %lld", (long long)v);
            have_magic = 1;
        } else if (!strcmp(k, "rank") || !strcmp(k, "size")) {
            int32_t x;
            rc = i32(&r, &x);
            if (!rc && x < 0)
                rc = fail(&r, "negative %s", k);
            *(k[0] == 'r' ? &d.rank : &d.size) = x;
        } else if (!strcmp(k, "comm")) {
            char hex[16], *end = NULL;
            rc = string(&r, hex, sizeof(hex));
            unsigned long id = rc ? 0 : strtoul(hex, &end, 16);
            if (!rc && (!hex[0] || *end || id > UINT32_MAX))
                rc = fail(&r, "bad communicator id \"%s\"", hex);
            d.comm_id = (uint32_t)id;
        } else if (!strcmp(k, "why")) {
            rc = string(&r, d.why, sizeof(d.why));
        } else if (!strcmp(k, "now_ns")) {
            rc = i64(&r, &d.now_ns);
        } else if (!strcmp(k, "done")) {
            rc = u64(&r, &d.done);
        } else if (!strcmp(k, "entries")) {
            rc = entries(&r, &d);
        } else {
            rc = skip(&r);
        }
        if (rc || peek(&r) == '}')
            break;
        rc = expect(&r, ',');
    }
    if (!rc)
        rc = expect(&r, '}');
    if (!rc && !have_magic)
        rc = fail(&r, "not a flight recorder dump (no \"gradwire_fr\")");
    if (!rc && (d.rank < 0 || d.size < 1 || d.rank >= d.size))
        rc = fail(&r, "rank %d of size %d", d.rank, d.size);
    if (rc) {
        free(d.entries);
        return GW_ERR_PROTOCOL;
    }
    *out = d;
    return GW_OK;
}

void gw__fr_dump_free(gw_fr_dump_t *d)
{
    if (!d)
        return;
    free(d->entries);
    d->entries = NULL;
    d->nentries = 0;
}
