/*
 * tcp_wire.c - byte layouts of what the TCP transport puts on the wire, and
 * the socket options of its connections.
 *
 * Every integer travels big-endian, written byte by byte, so the layout does
 * not depend on struct padding or on the hosts' byte order.
 *
 * Frame header (GW_TCP_HDR_SIZE = 48 bytes), before every part of a message
 * and as the whole of a GOODBYE or ABORT frame:
 *    0 u32 magic GW_TCP_FRAME_MAGIC     4 u16 type (1 DATA, 2 GOODBYE, 3 ABORT,
 *                                                   4 RECEIPT)
 *    6 u16 flags (DATA: 1 = receipt wanted; else 0)
 *                                       8 u64 tag.seq (RECEIPT, GOODBYE, ABORT: receipt)
 *   16 u32 tag.sig                     20 i32 status (ABORT: the reason;
 *                                              DATA: u32 tag.comm_id, the
 *                                              communicator, since version 5)
 *   24 u64 total message length        32 u64 offset of this part
 *   40 u64 payload bytes of this part (they follow the header)
 * An ABORT frame puts in the length and offset fields the rank that first
 * reported the failure and the rank it blames (all ones: none), so that
 * the one decoder serves every frame. A RECEIPT frame (and a GOODBYE or
 * ABORT, which may be the last word before the receipt was due) says in the
 * seq field the highest index, in the pair's message order from 1, of the
 * messages it matched and accepted; 0 is no receipt.
 *
 * Hello (GW_TCP_HELLO_SIZE = 56 bytes), first on every connection, sent by
 * the connecting rank and answered in kind by the accepting one, each with
 * its sender's nonce, the answer followed by the acceptor's proof of the
 * data-plane key, then the dialler's proof and the acceptor's admission
 * (transport/sock_auth.c):
 *    0 u32 magic GW_TCP_HELLO_MAGIC     4 u16 protocol version   6 u16 0
 *    8 job id (16 bytes)               24 u32 from rank         28 u32 to rank
 *   32 nonce (16 bytes)                48 u32 socket index      52 u32 sockets per peer
 * (magic, job id, ranks and nonce stand where every hello has them: sock.h)
 *
 * Address blob (GW_TRANSPORT_ADDR_MAX bytes, GW_TCP_ADDR_SIZE = 28 used):
 *    0 u32 magic GW_TCP_ADDR_MAGIC      4 u8 protocol version
 *    5 the listening address as sock.h lays out a socket address: u8 family
 *      (4 or 6), u16 port, 16 bytes address, u32 IPv6 scope id
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/byteorder.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_internal.h"

void gw__tcp_hdr_encode(const gw_tcp_hdr_t *h, uint8_t out[GW_TCP_HDR_SIZE])
{
    gw__put_be32(out + 0, h->magic);
    gw__put_be16(out + 4, h->type);
    gw__put_be16(out + 6, (uint16_t)h->flags);
    gw__put_be64(out + 8, h->seq);
    gw__put_be32(out + 16, h->sig);
    gw__put_be32(out + 20, (uint32_t)h->status); /* DATA: comm_id, the same word */
    gw__put_be64(out + 24, h->total);
    gw__put_be64(out + 32, h->offset);
    gw__put_be64(out + 40, h->part_len);
}

void gw__tcp_hdr_decode(const uint8_t in[GW_TCP_HDR_SIZE], gw_tcp_hdr_t *h)
{
    h->magic = gw__get_be32(in + 0);
    h->type = gw__get_be16(in + 4);
    h->flags = gw__get_be16(in + 6);
    h->seq = gw__get_be64(in + 8);
    h->sig = gw__get_be32(in + 16);
    h->status = (int32_t)gw__get_be32(in + 20);
    h->total = gw__get_be64(in + 24);
    h->offset = gw__get_be64(in + 32);
    h->part_len = gw__get_be64(in + 40);
}

void gw__tcp_hello_encode(const gw_tcp_hello_t *h, uint8_t out[GW_TCP_HELLO_SIZE])
{
    gw__sock_hello_id_put(out, &h->id);
    gw__put_be16(out + 4, h->version);
    gw__put_be16(out + 6, 0);
    gw__put_be32(out + 48, h->sock_idx);
    gw__put_be32(out + 52, h->nsocks);
}

void gw__tcp_hello_decode(const uint8_t in[GW_TCP_HELLO_SIZE], gw_tcp_hello_t *h)
{
    gw__sock_hello_id_get(in, &h->id);
    h->version = gw__get_be16(in + 4);
    h->sock_idx = gw__get_be32(in + 48);
    h->nsocks = gw__get_be32(in + 52);
}

void gw__tcp_addr_encode(const struct sockaddr *sa, uint8_t blob[GW_TRANSPORT_ADDR_MAX])
{
    memset(blob, 0, GW_TRANSPORT_ADDR_MAX);
    gw__put_be32(blob, GW_TCP_ADDR_MAGIC);
    blob[4] = GW_TCP_PROTOCOL_VERSION;
    gw__sock_addr_put(blob + 5, sa);
}

gw_status_t gw__tcp_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX],
                                struct sockaddr_storage *out, socklen_t *out_len)
{
    if (gw__get_be32(blob) != GW_TCP_ADDR_MAGIC || blob[4] != GW_TCP_PROTOCOL_VERSION)
        return GW_ERR_PROTOCOL;
    if (gw__get_be16(blob + 6) == 0) /* nobody listens on port 0 */
        return GW_ERR_PROTOCOL;
    struct sockaddr_storage ss;
    socklen_t len;
    if (gw__sock_addr_get(blob + 5, &ss, &len) != GW_OK)
        return GW_ERR_PROTOCOL;
    memcpy(out, &ss, sizeof(ss));
    *out_len = len;
    return GW_OK;
}

/* Reads /proc/sys/net/core/<name>; -1 when unknown. */
static long sysctl_long(const char *name)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/sys/net/core/%s", name);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Setting a socket buffer turns off the kernel's autotuning of it, and the
 * kernel silently caps the request at net.core.[rw]mem_max. Where that cap
 * is below what we want, autotuning (which may grow past the cap) is the
 * better deal, so we ask only where the request can be granted. */
void gw__tcp_pick_bufs(const gw_logger_t *lg, gw_tcp_bufs_t *bufs)
{
    long wmax = sysctl_long("wmem_max"), rmax = sysctl_long("rmem_max");
    bufs->set_snd = wmax < 0 || wmax >= GW_TCP_SOCKBUF;
    bufs->set_rcv = rmax < 0 || rmax >= GW_TCP_SOCKBUF;
    if (!bufs->set_snd || !bufs->set_rcv)
        GW_TRACE(lg, GW_TCP_SUBSYS,
                 "net.core.wmem_max %ld, rmem_max %ld: below the %d bytes we want, so %s%s%s "
                 "left to the kernel's autotuning",
                 wmax, rmax, GW_TCP_SOCKBUF, bufs->set_snd ? "" : "SO_SNDBUF",
                 !bufs->set_snd && !bufs->set_rcv ? " and " : "", bufs->set_rcv ? "" : "SO_RCVBUF");
}

/* Buffers are set before connect()/listen() so that the TCP window scale
 * negotiated in the handshake can use them; accepted sockets inherit the
 * listener's. */
void gw__tcp_set_bufs(const gw_logger_t *lg, const gw_tcp_bufs_t *bufs, int fd)
{
    int sz = GW_TCP_SOCKBUF;
    if (bufs->set_snd && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)) != 0)
        GW_WARN(lg, GW_TCP_SUBSYS, "setsockopt(SO_SNDBUF, %d): %m; keeping the default", sz);
    if (bufs->set_rcv && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)) != 0)
        GW_WARN(lg, GW_TCP_SUBSYS, "setsockopt(SO_RCVBUF, %d): %m; keeping the default", sz);
}

/* Small messages (headers, zero-length messages of a barrier) must leave at
 * once: Nagle's algorithm would hold them for an ACK that the peer delays. */
void gw__tcp_tune_established(const gw_logger_t *lg, int fd, int peer, int idx)
{
    if (gw__sock_nodelay(fd) != 0)
        GW_WARN(lg, GW_TCP_SUBSYS, "setsockopt(TCP_NODELAY) on socket %d to rank %d: %m", idx,
                peer);
    if (lg && lg->level >= GW_LOG_TRACE) {
        int snd = 0, rcv = 0;
        socklen_t l1 = sizeof(snd), l2 = sizeof(rcv);
        getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l1);
        getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l2);
        GW_TRACE(lg, GW_TCP_SUBSYS,
                 "socket %d to rank %d: asked for %d-byte buffers, kernel granted SO_SNDBUF %d, "
                 "SO_RCVBUF %d (Linux reports twice the usable size)",
                 idx, peer, GW_TCP_SOCKBUF, snd, rcv);
    }
}
