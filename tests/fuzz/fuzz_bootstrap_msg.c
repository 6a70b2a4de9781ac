/*
 * fuzz_bootstrap_msg.c - libFuzzer target for the bootstrap's message
 * decoders (transport/bootstrap/bootstrap_msg.c), which read what any
 * process that reaches the root's port sends.
 *
 * The whole input is one received message and goes to every decoder, as a
 * root or a rank that expects one type may get any other. Beyond not
 * crashing, what a decoder accepts must be what the encoders write: an
 * accepted message re-encodes to the very bytes received, so nothing a peer
 * sends is silently changed or dropped (a REJECT's and a VERDICT's reason
 * included, whose bytes must be printable ASCII). The status messages
 * (transport/bootstrap/bootstrap_pulse.c: a rank's PULSE, `gradwire
 * status`'s STATUS_ASK, rank 0's STATUS) are held to the same.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "transport/bootstrap/bootstrap_msg.h"
#include "transport/sock.h"

static void check_why(gw_status_t st, const char *why)
{
    if (st == GW_OK)
        return;
    FUZZ_CHECK(st == GW_ERR_PROTOCOL);
    FUZZ_CHECK(why != NULL && why[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    gw_bs_hdr_t hdr;
    gw_status_t st = gw__bs_decode_hdr(data, size, &hdr, &why);
    check_why(st, why);
    if (st == GW_OK) {
        FUZZ_CHECK(hdr.type >= GW_BS_HELLO && hdr.type <= GW_BS_TYPE_LAST);
        FUZZ_CHECK(strcmp(gw__bs_type_name(hdr.type), "unknown") != 0);
    }

    gw_bs_hello_t hello;
    why = NULL;
    st = gw__bs_decode_hello(data, size, &hello, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_HELLO_LEN];
        FUZZ_CHECK(hello.rank >= 0 && hello.size >= 0);
        gw__bs_encode_hello(&hello, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }

    gw_bs_challenge_t ch;
    why = NULL;
    st = gw__bs_decode_challenge(data, size, &ch, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_CHALLENGE_LEN];
        gw__bs_encode_challenge(&ch, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }

    uint8_t proof[GW_BS_PROOF_LEN];
    why = NULL;
    st = gw__bs_decode_response(data, size, proof, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_RESPONSE_LEN];
        gw__bs_encode_response(proof, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }

    uint8_t job_id[GW_BS_JOB_ID_LEN];
    why = NULL;
    st = gw__bs_decode_welcome(data, size, job_id, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_WELCOME_LEN];
        gw__bs_encode_welcome(job_id, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }

    gw_bs_reject_t rej;
    why = NULL;
    st = gw__bs_decode_reject(data, size, &rej, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_REJECT_MAX_LEN];
        FUZZ_CHECK(rej.status != GW_OK);
        FUZZ_CHECK(memchr(rej.reason, '\0', sizeof(rej.reason)) != NULL);
        size_t n = gw__bs_encode_reject(rej.status, rej.reason, out);
        FUZZ_CHECK(n == size && memcmp(out, data, size) == 0);
    }

    gw_bs_report_t rep;
    why = NULL;
    st = gw__bs_decode_report(data, size, &rep, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_REPORT_LEN];
        FUZZ_CHECK(rep.culprit >= -1 && rep.origin >= -1 && rep.waiting_on >= -1);
        FUZZ_CHECK((rep.kind == GW_BS_REPORT_STATE) == (rep.status == GW_OK));
        size_t n = gw__bs_encode_report(&rep, out);
        FUZZ_CHECK(n == size && memcmp(out, data, size) == 0);
    }

    gw_bs_inquire_t inq;
    why = NULL;
    st = gw__bs_decode_inquire(data, size, &inq, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_INQUIRE_LEN];
        FUZZ_CHECK(inq.reporter >= -1);
        size_t n = gw__bs_encode_inquire(&inq, out);
        FUZZ_CHECK(n == size && memcmp(out, data, size) == 0);
    }

    gw_bs_verdict_t ver;
    why = NULL;
    st = gw__bs_decode_verdict(data, size, &ver, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_VERDICT_MAX_LEN];
        FUZZ_CHECK(ver.status != GW_OK && ver.culprit >= -1 && ver.origin >= -1);
        FUZZ_CHECK(memchr(ver.reason, '\0', sizeof(ver.reason)) != NULL);
        size_t n = gw__bs_encode_verdict(&ver, out);
        FUZZ_CHECK(n == size && memcmp(out, data, size) == 0);
    }

    uint32_t wait_ms = 0;
    why = NULL;
    st = gw__bs_decode_gather_start(data, size, &wait_ms, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_GATHER_START_LEN];
        FUZZ_CHECK(size == sizeof(out) && wait_ms <= (uint32_t)INT32_MAX);
        gw__bs_encode_gather_start(wait_ms, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    gw_bs_shrink_req_t shr;
    why = NULL;
    st = gw__bs_decode_shrink(data, size, &shr, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_SHRINK_LEN];
        FUZZ_CHECK(size == sizeof(out) && shr.port <= 65535);
        gw__bs_encode_shrink(&shr, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    gw_bs_members_t mem;
    why = NULL;
    st = gw__bs_decode_members(data, size, &mem, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_MEMBERS_LEN];
        FUZZ_CHECK(size == sizeof(out));
        FUZZ_CHECK(mem.status == GW_OK ? mem.new_rank >= 0 && (uint32_t)mem.new_rank < mem.new_size
                                       : mem.new_rank == -1);
        gw__bs_encode_members(&mem, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    uint8_t nonce[GW_BS_NONCE_LEN];
    why = NULL;
    st = gw__bs_decode_join(data, size, nonce, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_JOIN_LEN];
        FUZZ_CHECK(size == sizeof(out));
        gw__bs_encode_join(nonce, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    gw_bs_shrink_req_t grow;
    why = NULL;
    st = gw__bs_decode_grow(data, size, &grow, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_GROW_LEN];
        FUZZ_CHECK(size == sizeof(out) && grow.port <= 65535 &&
                   grow.window_ms <= (uint32_t)INT32_MAX);
        gw__bs_encode_grow(&grow, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    gw_bs_members_t grown;
    why = NULL;
    st = gw__bs_decode_grown(data, size, &grown, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_GROWN_LEN];
        FUZZ_CHECK(size == sizeof(out) && grown.port <= 65535);
        FUZZ_CHECK(grown.status == GW_OK
                       ? grown.new_rank >= 0 && (uint32_t)grown.new_rank < grown.new_size
                       : grown.new_rank == -1);
        gw__bs_encode_grown(&grown, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }

    /* RING_PEER: the neighbour's address, which the ring then reads as a
     * socket address (family 4 or 6; anything else refused). */
    uint8_t peer[GW_BS_RING_ADDR_LEN];
    why = NULL;
    st = gw__bs_decode_ring_peer(data, size, peer, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_RING_PEER_LEN];
        FUZZ_CHECK(size == sizeof(out));
        gw__bs_encode_ring_peer(peer, out);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
        struct sockaddr_storage ss;
        socklen_t sl = 0;
        gw_status_t ast = gw__sock_addr_get(peer, &ss, &sl);
        FUZZ_CHECK(ast == GW_OK || ast == GW_ERR_NOT_FOUND || ast == GW_ERR_PROTOCOL);
        FUZZ_CHECK(ast != GW_OK || sl <= sizeof(ss));
    }

    uint32_t dlen = 0;
    why = NULL;
    st = gw__bs_decode_data_prefix(data, size, &dlen, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_DATA_PREFIX_LEN];
        FUZZ_CHECK(size >= sizeof(out) && dlen <= GW_BS_DATA_MAX);
        gw__bs_encode_data_prefix(dlen, out);
        FUZZ_CHECK(memcmp(out, data, sizeof(out)) == 0);
    }
    /* PULSE, STATUS_ASK and STATUS (bootstrap_pulse.c). */
    gw_bs_pulse_t pulse;
    why = NULL;
    st = gw__bs_decode_pulse(data, size, &pulse, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_PULSE_MAX_LEN];
        FUZZ_CHECK(pulse.npeers <= GW_BS_PULSE_PEERS && pulse.op_kind < 256 && pulse.running <= 1 &&
                   pulse.waiting_on >= -1);
        FUZZ_CHECK(gw__bs_encode_pulse(&pulse, out) == size && memcmp(out, data, size) == 0);
    }
    uint64_t asked = 0, root_ns = 0;
    why = NULL;
    st = gw__bs_decode_clock(data, size, &asked, &root_ns, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_CLOCK_LEN];
        gw__bs_encode_clock(asked, root_ns, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }
    why = NULL;
    st = gw__bs_decode_status_ask(data, size, nonce, &why);
    check_why(st, why);
    if (st == GW_OK) {
        uint8_t out[GW_BS_STATUS_ASK_LEN];
        gw__bs_encode_status_ask(nonce, out);
        FUZZ_CHECK(size == sizeof(out) && memcmp(out, data, size) == 0);
    }
    uint32_t jsize = 0, nranks = 0;
    gw_bs_rank_status_t *ranks = NULL;
    why = NULL;
    st = gw__bs_decode_status(data, size, &jsize, &ranks, &nranks, &why);
    FUZZ_CHECK(st == GW_OK || st == GW_ERR_NO_MEMORY || (why && why[0]));
    if (st == GW_OK) {
        FUZZ_CHECK(jsize >= 1 && jsize <= GW_BS_STATUS_RANKS && nranks <= jsize);
        for (uint32_t i = 0; i < nranks; i++)
            FUZZ_CHECK(ranks[i].rank < jsize && ranks[i].pulse.npeers <= GW_BS_PULSE_PEERS);
        size_t len = 0;
        uint8_t *out = gw__bs_encode_status(jsize, ranks, nranks, &len);
        FUZZ_CHECK(!out || (len == size && memcmp(out, data, size) == 0));
        free(out);
        free(ranks);
    }
    return 0;
}
