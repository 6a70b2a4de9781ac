/*
 * fuzz_tcp_wire.c - libFuzzer target for what the TCP transport decodes from
 * its peers: frame headers and hellos (transport/tcp/tcp_wire.c), the address
 * blob of the bootstrap all-gather with the socket address inside it
 * (transport/sock_addr.c).
 *
 * The first input byte picks the decoder, the rest is the wire bytes. The
 * decoders cannot refuse a frame header or a hello (their callers check the
 * fields), so what is checked is that decoding loses nothing: a header (its
 * flags too) re-encodes to the very bytes received, and so does a hello, save
 * its reserved field and the nonce, which the authentication writes in place
 * (both are written as 0), and an accepted address decodes again, after re-encoding,
 * to the same socket address.
 */
#include <string.h>

#include "fuzz_util.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_internal.h"

static void fuzz_hdr(const uint8_t *in, size_t n)
{
    if (n < GW_TCP_HDR_SIZE)
        return;
    gw_tcp_hdr_t h;
    memset(&h, 0, sizeof(h));
    gw__tcp_hdr_decode(in, &h);
    uint8_t out[GW_TCP_HDR_SIZE];
    gw__tcp_hdr_encode(&h, out);
    FUZZ_CHECK(memcmp(out, in, GW_TCP_HDR_SIZE) == 0); /* flags included */
}

static void fuzz_hello(const uint8_t *in, size_t n)
{
    if (n < GW_TCP_HELLO_SIZE)
        return;
    gw_tcp_hello_t h;
    memset(&h, 0, sizeof(h));
    gw__tcp_hello_decode(in, &h);
    uint8_t out[GW_TCP_HELLO_SIZE];
    memset(out, 0xa5, sizeof(out)); /* a byte the encoder leaves alone shows */
    gw__tcp_hello_encode(&h, out);
    FUZZ_CHECK(memcmp(out, in, 6) == 0 && out[6] == 0 && out[7] == 0);
    /* The nonce is not the decoder's: the authentication (sock_auth.c) reads
     * and writes it in place, and the encoder leaves it zero. */
    FUZZ_CHECK(memcmp(out + 8, in + 8, GW_SOCK_NONCE_AT - 8) == 0);
    for (size_t i = GW_SOCK_NONCE_AT; i < GW_SOCK_NONCE_AT + GW_SOCK_NONCE_LEN; i++)
        FUZZ_CHECK(out[i] == 0);
    FUZZ_CHECK(memcmp(out + GW_SOCK_NONCE_AT + GW_SOCK_NONCE_LEN,
                      in + GW_SOCK_NONCE_AT + GW_SOCK_NONCE_LEN,
                      GW_TCP_HELLO_SIZE - GW_SOCK_NONCE_AT - GW_SOCK_NONCE_LEN) == 0);
}

static void fuzz_addr(const uint8_t *in, size_t n)
{
    if (n < GW_TRANSPORT_ADDR_MAX)
        return;
    struct sockaddr_storage ss, again;
    socklen_t len = 0, len2 = 0;
    memset(&ss, 0, sizeof(ss));
    if (gw__tcp_addr_decode(in, &ss, &len) != GW_OK)
        return;
    FUZZ_CHECK(len > 0 && len <= sizeof(ss));
    FUZZ_CHECK(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
    char text[128];
    gw__sock_addr_str((const struct sockaddr *)&ss, text, sizeof(text));
    FUZZ_CHECK(memchr(text, '\0', sizeof(text)) != NULL);
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__tcp_addr_encode((const struct sockaddr *)&ss, blob);
    memset(&again, 0, sizeof(again));
    FUZZ_CHECK(gw__tcp_addr_decode(blob, &again, &len2) == GW_OK);
    FUZZ_CHECK(len2 == len && memcmp(&again, &ss, len) == 0);
}

/* The socket address alone, as the bootstrap and the verbs blob carry it. */
static void fuzz_sockaddr(const uint8_t *in, size_t n)
{
    if (n < GW_SOCK_ADDR_WIRE)
        return;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    memset(&ss, 0, sizeof(ss));
    gw_status_t st = gw__sock_addr_get(in, &ss, &len);
    if (st != GW_OK) {
        FUZZ_CHECK(st == GW_ERR_NOT_FOUND || st == GW_ERR_PROTOCOL);
        return;
    }
    uint8_t out[GW_SOCK_ADDR_WIRE];
    gw__sock_addr_put(out, (const struct sockaddr *)&ss);
    struct sockaddr_storage again;
    socklen_t len2 = 0;
    memset(&again, 0, sizeof(again));
    FUZZ_CHECK(gw__sock_addr_get(out, &again, &len2) == GW_OK);
    FUZZ_CHECK(len2 == len && memcmp(&again, &ss, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    switch (data[0] & 3) {
    case 0:
        fuzz_hdr(in, n);
        break;
    case 1:
        fuzz_hello(in, n);
        break;
    case 2:
        fuzz_addr(in, n);
        break;
    default:
        fuzz_sockaddr(in, n);
        break;
    }
    return 0;
}
