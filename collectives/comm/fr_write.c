/*
 * fr_write.c - the flight recorder's dump: JSON, one entry per line, oldest
 * first, written with nothing but open(2), write(2) and close(2) from a
 * buffer formatted here, so that the fatal-signal handler can call it
 * (printf and malloc are not async-signal-safe). Every string it writes is
 * static text (names of kinds, dtypes, algorithms, statuses) or digits.
 *
 * The format (read back by fr_read.c and `gradwire fr`):
 *   {"gradwire_fr":1,"rank":R,"size":N,"comm":"XXXXXXXX","why":"timeout",
 *    "now_ns":T,"done":D,"entries":[
 *   {"seq":S,"kind":"allreduce","bytes":B,"dtype":"float32","algo":"ring",
 *    "state":"running","status":"GW_OK","start_ns":T,"end_ns":0,"step":3,
 *    "step_state":"started","step_peer":1,"step_posted_ns":T,
 *    "step_started_ns":T,"step_done_ns":0,"step_bytes":B,"peers":[1,3]},
 *   ...]}
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/fr_internal.h"
#include "common/clock.h"

typedef struct out {
    int fd;
    int err;
    size_t len;
    char buf[2048];
} out_t;

static void flush(out_t *o)
{
    size_t off = 0;
    while (off < o->len && !o->err) {
        ssize_t n = write(o->fd, o->buf + off, o->len - off);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            o->err = 1;
    }
    o->len = 0;
}

static void put(out_t *o, const char *s)
{
    for (; *s; s++) {
        if (o->len == sizeof(o->buf))
            flush(o);
        o->buf[o->len++] = *s;
    }
}

static void put_u64(out_t *o, uint64_t v)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char s[24];
    for (int i = 0; i < n; i++)
        s[i] = d[n - 1 - i];
    s[n] = '\0';
    put(o, s);
}

static void put_i64(out_t *o, int64_t v)
{
    if (v < 0) {
        put(o, "-");
        put_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(o, (uint64_t)v);
    }
}

static void put_hex32(out_t *o, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    char s[9];
    for (int i = 0; i < 8; i++)
        s[i] = hex[(v >> (28 - 4 * i)) & 0xf];
    s[8] = '\0';
    put(o, s);
}

/* "key": value, with the comma that precedes every key but the first. */
static void key(out_t *o, const char *k, int first)
{
    put(o, first ? "\"" : ",\"");
    put(o, k);
    put(o, "\":");
}

static void kstr(out_t *o, const char *k, const char *v)
{
    key(o, k, 0);
    put(o, "\"");
    put(o, v); /* static names: no character needs escaping */
    put(o, "\"");
}

static void entry(out_t *o, const gw_fr_entry_t *e)
{
    put(o, "{");
    key(o, "seq", 1);
    put_u64(o, e->seq);
    kstr(o, "kind", gw__fr_kind_name(e->kind));
    key(o, "bytes", 0);
    put_u64(o, e->bytes);
    kstr(o, "dtype", gw_dtype_name((gw_dtype_t)e->dtype));
    kstr(o, "algo", gw_algo_name((gw_algo_t)e->algo));
    kstr(o, "state", e->state == GW_FR_STARTED ? "running" : gw__fr_state_name(e->state));
    kstr(o, "status", gw_status_name((gw_status_t)e->status));
    key(o, "start_ns", 0);
    put_i64(o, e->t_start_ns);
    key(o, "end_ns", 0);
    put_i64(o, e->t_end_ns);
    key(o, "step", 0);
    put_u64(o, e->step);
    kstr(o, "step_state", gw__fr_state_name(e->step_state));
    key(o, "step_peer", 0);
    put_i64(o, e->step_peer);
    key(o, "step_posted_ns", 0);
    put_i64(o, e->step_posted_ns);
    key(o, "step_started_ns", 0);
    put_i64(o, e->step_started_ns);
    key(o, "step_done_ns", 0);
    put_i64(o, e->step_done_ns);
    key(o, "step_bytes", 0);
    put_u64(o, e->step_bytes);
    key(o, "npeers", 0);
    put_u64(o, e->npeers);
    key(o, "peers", 0);
    put(o, "[");
    uint32_t n = e->npeers < GW_FR_PEERS ? e->npeers : GW_FR_PEERS;
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            put(o, ",");
        put_i64(o, e->peers[i]);
    }
    put(o, "]}");
}

gw_status_t gw__fr_write(const gw_fr_t *fr, const char *why, int in_signal)
{
    (void)in_signal; /* the same calls either way: see the top */
    int fd = open(fr->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return GW_ERR_SYSTEM;
    /* A file left by an earlier job keeps its mode through O_TRUNC. */
    if (fchmod(fd, 0600) != 0) {
        close(fd);
        return GW_ERR_SYSTEM;
    }
    out_t o = {.fd = fd};
    put(&o, "{");
    key(&o, "gradwire_fr", 1);
    put(&o, "1");
    key(&o, "rank", 0);
    put_i64(&o, fr->rank);
    key(&o, "size", 0);
    put_i64(&o, fr->size);
    key(&o, "comm", 0);
    put(&o, "\"");
    put_hex32(&o, fr->comm_id);
    put(&o, "\"");
    kstr(&o, "why", why);
    key(&o, "now_ns", 0);
    put_i64(&o, gw__fr_now(fr));
    key(&o, "done", 0);
    put_u64(&o, fr->done);
    key(&o, "entries", 0);
    put(&o, "[\n");
    uint64_t first = fr->next > fr->cap ? fr->next - fr->cap : 0;
    for (uint64_t i = first; i < fr->next; i++) {
        if (i != first)
            put(&o, ",\n");
        entry(&o, &fr->ring[i % fr->cap]);
    }
    put(&o, "\n]}\n");
    flush(&o);
    int bad = o.err;
    if (close(fd) != 0)
        bad = 1;
    return bad ? GW_ERR_SYSTEM : GW_OK;
}
