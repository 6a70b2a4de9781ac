/*
 * fuzz_ib_wire.c - libFuzzer target for what the verbs transport decodes
 * from its peers (transport/ib/ib_wire.c): the address blob of the
 * bootstrap all-gather, the CTS entries and eager headers that peers write
 * into our memory, immediates, the out-of-band hello and the rdma_cm
 * private data; and the shared-memory transport's address blob
 * (transport/shm/shm.c), the other blob a peer publishes, and the knock a
 * door receives (transport/shm/shm_door.c).
 *
 * The first input byte picks the decoder. Decoding must lose nothing that
 * it keeps: what it accepts re-encodes to bytes that decode to the same
 * fields again, and an accepted address blob has its bounds checked (queue
 * pairs, MTU, eager size) and a NUL-terminated device name.
 */
#include <string.h>

#include "fuzz_util.h"
#include "transport/ib/ib_internal.h"
#include "transport/shm/shm_internal.h"

static void fuzz_addr(const uint8_t *in, size_t n)
{
    if (n < GW_TRANSPORT_ADDR_MAX)
        return;
    gw_ib_addr_t a, b;
    memset(&a, 0, sizeof(a));
    if (gw__ib_addr_decode(in, &a) != GW_OK)
        return;
    FUZZ_CHECK(a.nqps >= 1 && a.nqps <= GW_IB_MAX_QPS);
    FUZZ_CHECK(a.eager_max <= GW_IB_EAGER_MAX);
    FUZZ_CHECK(memchr(a.device, '\0', sizeof(a.device)) != NULL);
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__ib_addr_encode(&a, blob);
    memset(&b, 0, sizeof(b));
    FUZZ_CHECK(gw__ib_addr_decode(blob, &b) == GW_OK);
    /* What follows the device name's NUL is not part of it. */
    size_t l = strlen(a.device);
    memset(a.device + l, 0, sizeof(a.device) - l);
    FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
}

static void fuzz_cts(const uint8_t *in, size_t n)
{
    if (n < GW_IB_CTS_SIZE)
        return;
    gw_ib_cts_t c, d;
    memset(&c, 0, sizeof(c));
    if (gw__ib_cts_decode(in, &c) != 0)
        return; /* torn or empty: the caller waits for the rest */
    FUZZ_CHECK(c.idx != 0);
    uint8_t out[GW_IB_CTS_SIZE];
    gw__ib_cts_encode(&c, out);
    memset(&d, 0, sizeof(d));
    FUZZ_CHECK(gw__ib_cts_decode(out, &d) == 0 && memcmp(&c, &d, sizeof(c)) == 0);
}

static void fuzz_eager(const uint8_t *in, size_t n)
{
    if (n < GW_IB_EAGER_HDR)
        return;
    gw_ib_eager_hdr_t h, g;
    memset(&h, 0, sizeof(h));
    gw__ib_eager_hdr_decode(in, &h);
    uint8_t out[GW_IB_EAGER_HDR];
    gw__ib_eager_hdr_encode(&h, out);
    memset(&g, 0, sizeof(g));
    gw__ib_eager_hdr_decode(out, &g);
    FUZZ_CHECK(memcmp(&h, &g, sizeof(h)) == 0);
}

static void fuzz_imm(const uint8_t *in, size_t n)
{
    if (n < 4)
        return;
    uint32_t imm = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
    gw_ib_imm_kind_t kind;
    uint32_t value;
    gw__ib_imm_decode(imm, &kind, &value);
    FUZZ_CHECK(value <= GW_IB_IMM_VALUE_MASK);
    FUZZ_CHECK(gw__ib_imm_encode(kind, value) == imm);
    /* An ABORT_FROM's two ranks come back as they were sent. */
    int origin, culprit;
    gw__ib_abort_from_decode(value, &origin, &culprit);
    FUZZ_CHECK(origin >= -1 && origin < (int)GW_IB_IMM_NO_RANK);
    FUZZ_CHECK(culprit >= -1 && culprit < (int)GW_IB_IMM_NO_RANK);
    FUZZ_CHECK(gw__ib_abort_from_encode(origin, culprit) == value);
}

static void fuzz_hello(const uint8_t *in, size_t n)
{
    if (n < GW_IB_HELLO_SIZE)
        return;
    gw_ib_hello_t h, g;
    memset(&h, 0, sizeof(h));
    gw__ib_hello_decode(in, &h);
    uint8_t out[GW_IB_HELLO_SIZE];
    gw__ib_hello_encode(&h, out);
    memset(&g, 0, sizeof(g));
    gw__ib_hello_decode(out, &g);
    FUZZ_CHECK(memcmp(&h, &g, sizeof(h)) == 0);
    /* The fields every hello has stand where sock.h puts them. */
    FUZZ_CHECK(memcmp(out, in, 4) == 0 && memcmp(out + 8, in + 8, 24) == 0);
}

/* rdmacm private data: what decodes encodes back to the same bytes (but
 * for the zero bytes of the layout), and a request is never an accept. */
static void fuzz_pdata(const uint8_t *in, size_t n)
{
    gw_ib_cm_pdata_t p, q;
    memset(&p, 0, sizeof(p));
    if (gw__ib_cm_req_decode(in, n, &p) == GW_OK) {
        uint8_t out[GW_IB_CM_REQ_SIZE];
        gw__ib_cm_req_encode(&p, out);
        FUZZ_CHECK(memcmp(out, in, 5) == 0 && memcmp(out + 6, in + 6, 12) == 0 &&
                   memcmp(out + 20, in + 20, 32) == 0);
        memset(&q, 0, sizeof(q));
        FUZZ_CHECK(gw__ib_cm_req_decode(out, sizeof(out), &q) == GW_OK);
        FUZZ_CHECK(memcmp(&p, &q, sizeof(p)) == 0);
        FUZZ_CHECK(gw__ib_cm_rep_decode(in, n, &q) == GW_ERR_PROTOCOL);
    }
    memset(&p, 0, sizeof(p));
    if (gw__ib_cm_rep_decode(in, n, &p) == GW_OK) {
        uint8_t out[GW_IB_CM_REP_SIZE];
        gw__ib_cm_rep_encode(&p, out);
        FUZZ_CHECK(memcmp(out, in, 5) == 0 && memcmp(out + 6, in + 6, 58) == 0);
        memset(&q, 0, sizeof(q));
        FUZZ_CHECK(gw__ib_cm_rep_decode(out, sizeof(out), &q) == GW_OK);
        FUZZ_CHECK(memcmp(&p, &q, sizeof(p)) == 0);
    }
}

static void fuzz_shm_addr(const uint8_t *in, size_t n)
{
    if (n < GW_TRANSPORT_ADDR_MAX)
        return;
    uint32_t pid = 0, pid2 = 0;
    uint64_t host = 0, ring = 0, host2 = 0, ring2 = 0;
    if (gw__shm_addr_decode(in, &pid, &host, &ring) != GW_OK)
        return;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__shm_addr_encode(pid, host, ring, blob);
    FUZZ_CHECK(gw__shm_addr_decode(blob, &pid2, &host2, &ring2) == GW_OK);
    FUZZ_CHECK(pid == pid2 && host == host2 && ring == ring2);
}

static void fuzz_shm_knock(const uint8_t *in, size_t n)
{
    int rank = -1;
    if (gw__shm_knock_decode(in, n, &rank) != GW_OK)
        return;
    FUZZ_CHECK(n == GW_SHM_KNOCK_LEN && rank >= 0);
    uint8_t msg[GW_SHM_KNOCK_LEN];
    gw__shm_knock_encode(rank, msg);
    FUZZ_CHECK(memcmp(msg, in, sizeof(msg)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    switch (data[0] % 8) {
    case 0:
        fuzz_addr(in, n);
        break;
    case 1:
        fuzz_cts(in, n);
        break;
    case 2:
        fuzz_eager(in, n);
        break;
    case 3:
        fuzz_imm(in, n);
        break;
    case 4:
        fuzz_hello(in, n);
        break;
    case 5:
        fuzz_pdata(in, n);
        break;
    case 6:
        fuzz_shm_addr(in, n);
        break;
    default:
        fuzz_shm_knock(in, n);
        break;
    }
    return 0;
}
