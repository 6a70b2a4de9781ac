/*
 * bootstrap_pulse.c - the messages of `gradwire status` and of the
 * timeline's clock alignment: a rank's PULSE to
 * the referee (what it is doing), the STATUS_ASK of a process that asks
 * rank 0 how the job is doing (it then proves the job token, as a joiner
 * does: bootstrap_late.c), and rank 0's STATUS answer.
 *
 * Layouts, big-endian (after the header of bootstrap_msg.h):
 *   PULSE   seq u64, done u64, bytes_sent u64, bytes_recv u64, op_kind
 *           u32, step u32, running u32, waiting_on i32, since_ms u32,
 *           npeers u32, then npeers x (peer u32, sent u64, recv u64)
 *   STATUS_ASK  the asker's nonce (32 bytes)
 *   STATUS  size u32, n u32, then n x (rank u32, age_ms u32, a PULSE's
 *           payload)
 *   CLOCK   asked_ns u64, root_ns u64: a rank's clock when it asked, and
 *           the referee's when it answered (the timeline's alignment)
 * The decoders are strict (tests/fuzz/fuzz_bootstrap_msg.c feeds them):
 * every length must add up, every field be in its range.
 */
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"
#include "transport/bootstrap/bootstrap_msg.h"

static void put_hdr(uint8_t *out, gw_bs_type_t type, uint32_t payload_len)
{
    gw__put_be32(out, GW_BS_MAGIC);
    gw__put_be16(out + 4, GW_BS_VERSION);
    gw__put_be16(out + 6, (uint16_t)type);
    gw__put_be32(out + 8, payload_len);
}

static gw_status_t bad(const char **why, const char *text)
{
    if (why)
        *why = text;
    return GW_ERR_PROTOCOL;
}

/* The header of a whole message of `type` in buf[0 .. len). */
static gw_status_t whole(const uint8_t *buf, size_t len, gw_bs_type_t type, gw_bs_hdr_t *h,
                         const char **why)
{
    gw_status_t st = gw__bs_decode_hdr(buf, len, h, why);
    if (st != GW_OK)
        return st;
    if (h->type != type)
        return bad(why, "unexpected message type");
    if (len != GW_BS_HDR_LEN + (size_t)h->payload_len)
        return bad(why, len < GW_BS_HDR_LEN + (size_t)h->payload_len
                            ? "truncated message"
                            : "trailing bytes after the message");
    return GW_OK;
}

static size_t pulse_len(const gw_bs_pulse_t *m) { return GW_BS_PULSE_FIXED + 20u * m->npeers; }

static void put_pulse(uint8_t *p, const gw_bs_pulse_t *m)
{
    gw__put_be64(p, m->seq);
    gw__put_be64(p + 8, m->done);
    gw__put_be64(p + 16, m->bytes_sent);
    gw__put_be64(p + 24, m->bytes_recv);
    gw__put_be32(p + 32, m->op_kind);
    gw__put_be32(p + 36, m->step);
    gw__put_be32(p + 40, m->running);
    gw__put_be32(p + 44, (uint32_t)m->waiting_on);
    gw__put_be32(p + 48, m->since_ms);
    gw__put_be32(p + 52, m->npeers);
    for (uint32_t i = 0; i < m->npeers; i++) {
        uint8_t *q = p + GW_BS_PULSE_FIXED + 20u * i;
        gw__put_be32(q, m->peers[i].peer);
        gw__put_be64(q + 4, m->peers[i].sent);
        gw__put_be64(q + 12, m->peers[i].recv);
    }
}

/* A pulse's payload from p[0 .. avail): its length in *used. */
static gw_status_t get_pulse(const uint8_t *p, size_t avail, gw_bs_pulse_t *m, size_t *used,
                             const char **why)
{
    if (avail < GW_BS_PULSE_FIXED)
        return bad(why, "truncated pulse");
    memset(m, 0, sizeof(*m));
    m->seq = gw__get_be64(p);
    m->done = gw__get_be64(p + 8);
    m->bytes_sent = gw__get_be64(p + 16);
    m->bytes_recv = gw__get_be64(p + 24);
    m->op_kind = gw__get_be32(p + 32);
    m->step = gw__get_be32(p + 36);
    m->running = gw__get_be32(p + 40);
    m->waiting_on = (int32_t)gw__get_be32(p + 44);
    m->since_ms = gw__get_be32(p + 48);
    m->npeers = gw__get_be32(p + 52);
    if (m->op_kind > 255)
        return bad(why, "pulse names an unknown kind of collective");
    if (m->running > 1)
        return bad(why, "pulse says neither running nor not");
    if (m->waiting_on < -1)
        return bad(why, "pulse names a negative rank other than -1");
    if (m->npeers > GW_BS_PULSE_PEERS)
        return bad(why, "pulse lists too many peers");
    if (avail < pulse_len(m))
        return bad(why, "truncated pulse");
    for (uint32_t i = 0; i < m->npeers; i++) {
        const uint8_t *q = p + GW_BS_PULSE_FIXED + 20u * i;
        m->peers[i].peer = gw__get_be32(q);
        m->peers[i].sent = gw__get_be64(q + 4);
        m->peers[i].recv = gw__get_be64(q + 12);
        if (m->peers[i].peer > INT32_MAX)
            return bad(why, "pulse names a peer beyond any rank");
    }
    *used = pulse_len(m);
    return GW_OK;
}

size_t gw__bs_encode_pulse(const gw_bs_pulse_t *m, uint8_t out[GW_BS_PULSE_MAX_LEN])
{
    gw_bs_pulse_t c = *m;
    if (c.npeers > GW_BS_PULSE_PEERS)
        c.npeers = GW_BS_PULSE_PEERS;
    put_hdr(out, GW_BS_PULSE, (uint32_t)pulse_len(&c));
    put_pulse(out + GW_BS_HDR_LEN, &c);
    return GW_BS_HDR_LEN + pulse_len(&c);
}

gw_status_t gw__bs_decode_pulse(const uint8_t *buf, size_t len, gw_bs_pulse_t *out,
                                const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_PULSE, &h, why);
    if (st != GW_OK)
        return st;
    gw_bs_pulse_t m;
    size_t used;
    if ((st = get_pulse(buf + GW_BS_HDR_LEN, h.payload_len, &m, &used, why)) != GW_OK)
        return st;
    if (used != h.payload_len)
        return bad(why, "trailing bytes after the pulse");
    *out = m;
    return GW_OK;
}

void gw__bs_encode_clock(uint64_t asked_ns, uint64_t root_ns, uint8_t out[GW_BS_CLOCK_LEN])
{
    put_hdr(out, GW_BS_CLOCK, 16);
    gw__put_be64(out + GW_BS_HDR_LEN, asked_ns);
    gw__put_be64(out + GW_BS_HDR_LEN + 8, root_ns);
}

gw_status_t gw__bs_decode_clock(const uint8_t *buf, size_t len, uint64_t *asked_ns,
                                uint64_t *root_ns, const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_CLOCK, &h, why);
    if (st == GW_OK) {
        *asked_ns = gw__get_be64(buf + GW_BS_HDR_LEN);
        *root_ns = gw__get_be64(buf + GW_BS_HDR_LEN + 8);
    }
    return st;
}

void gw__bs_encode_status_ask(const uint8_t nonce[GW_BS_NONCE_LEN],
                              uint8_t out[GW_BS_STATUS_ASK_LEN])
{
    put_hdr(out, GW_BS_STATUS_ASK, GW_BS_NONCE_LEN);
    memcpy(out + GW_BS_HDR_LEN, nonce, GW_BS_NONCE_LEN);
}

gw_status_t gw__bs_decode_status_ask(const uint8_t *buf, size_t len, uint8_t nonce[GW_BS_NONCE_LEN],
                                     const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_STATUS_ASK, &h, why);
    if (st == GW_OK)
        memcpy(nonce, buf + GW_BS_HDR_LEN, GW_BS_NONCE_LEN);
    return st;
}

uint8_t *gw__bs_encode_status(uint32_t size, const gw_bs_rank_status_t *r, uint32_t n, size_t *len)
{
    size_t total = GW_BS_HDR_LEN + 8;
    for (uint32_t i = 0; i < n; i++) {
        gw_bs_pulse_t c = r[i].pulse;
        c.npeers = c.npeers > GW_BS_PULSE_PEERS ? GW_BS_PULSE_PEERS : c.npeers;
        total += 8 + pulse_len(&c);
    }
    uint8_t *out = malloc(total);
    if (!out)
        return NULL;
    put_hdr(out, GW_BS_STATUS, (uint32_t)(total - GW_BS_HDR_LEN));
    gw__put_be32(out + GW_BS_HDR_LEN, size);
    gw__put_be32(out + GW_BS_HDR_LEN + 4, n);
    uint8_t *p = out + GW_BS_HDR_LEN + 8;
    for (uint32_t i = 0; i < n; i++) {
        gw_bs_pulse_t c = r[i].pulse;
        c.npeers = c.npeers > GW_BS_PULSE_PEERS ? GW_BS_PULSE_PEERS : c.npeers;
        gw__put_be32(p, r[i].rank);
        gw__put_be32(p + 4, r[i].age_ms);
        put_pulse(p + 8, &c);
        p += 8 + pulse_len(&c);
    }
    *len = total;
    return out;
}

gw_status_t gw__bs_decode_status(const uint8_t *buf, size_t len, uint32_t *size,
                                 gw_bs_rank_status_t **out, uint32_t *n, const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_STATUS, &h, why);
    if (st != GW_OK)
        return st;
    const uint8_t *p = buf + GW_BS_HDR_LEN, *end = p + h.payload_len;
    uint32_t sz = gw__get_be32(p), cnt = gw__get_be32(p + 4);
    if (sz == 0 || sz > GW_BS_STATUS_RANKS || cnt > sz)
        return bad(why, "status of an impossible number of ranks");
    /* Each record takes at least 8 + GW_BS_PULSE_FIXED bytes: a count the
     * bytes cannot hold is refused before anything is allocated. */
    if ((size_t)cnt * (8 + GW_BS_PULSE_FIXED) > (size_t)(end - p - 8))
        return bad(why, "status shorter than its count of ranks");
    gw_bs_rank_status_t *r = calloc(cnt ? cnt : 1, sizeof(*r));
    unsigned char *seen = calloc(sz, 1);
    if (!r || !seen) {
        free(r);
        free(seen);
        return GW_ERR_NO_MEMORY;
    }
    p += 8;
    for (uint32_t i = 0; i < cnt && st == GW_OK; i++) {
        size_t used = 0;
        if (end - p < 8) {
            st = bad(why, "truncated status");
            break;
        }
        r[i].rank = gw__get_be32(p);
        r[i].age_ms = gw__get_be32(p + 4);
        if (r[i].rank >= sz || seen[r[i].rank]) {
            st = bad(why, "status names a rank twice or beyond the job");
            break;
        }
        seen[r[i].rank] = 1;
        st = get_pulse(p + 8, (size_t)(end - p - 8), &r[i].pulse, &used, why);
        p += 8 + used;
    }
    if (st == GW_OK && p != end)
        st = bad(why, "trailing bytes after the status");
    free(seen);
    if (st != GW_OK) {
        free(r);
        return st;
    }
    *size = sz;
    *n = cnt;
    *out = r;
    return GW_OK;
}
