/*
 * make_seeds.c - writes the seed corpora of the fuzz targets
 * (tests/fuzz/corpus/<target>/) with the project's own encoders and writers,
 * so that every target starts from inputs its parser accepts, plus a few
 * edge cases. Run by hand after a wire or file format changes:
 *   build-fuzz/tests/fuzz/make_seeds tests/fuzz/corpus
 * (tests/fuzz/run_fuzz.sh --seeds does it). IDX and libsvm have no writer
 * in the project: their seeds are laid out here as the formats define them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "collectives/tuning.h"
#include "gradwire.h"
#include "trainer.h"
#include "transport/bootstrap/bootstrap_msg.h"
#include "transport/ib/ib_internal.h"
#include "transport/shm/shm_internal.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_internal.h"

static const char *root;

static void put(const char *target, const char *name, uint8_t sel, int with_sel, const void *p,
                size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (with_sel && fwrite(&sel, 1, 1, f) != 1) || (n && fwrite(p, 1, n, f) != n) ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void tcp_seeds(void)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                      .type = 1,
                      .flags = GW_TCP_FLAG_RECEIPT,
                      .seq = 7,
                      .sig = 0x1234,
                      .total = 100,
                      .offset = 0,
                      .part_len = 100};
    uint8_t hdr[GW_TCP_HDR_SIZE];
    gw__tcp_hdr_encode(&h, hdr);
    put("fuzz_tcp_wire", "hdr-data", 0, 1, hdr, sizeof(hdr));
    h.type = 3;
    h.status = (int32_t)GW_ERR_TIMEOUT;
    h.part_len = 0;
    h.total = 2;  /* the rank that first reported the failure */
    h.offset = 1; /* the rank it blames */
    gw__tcp_hdr_encode(&h, hdr);
    put("fuzz_tcp_wire", "hdr-abort", 0, 1, hdr, sizeof(hdr));
    gw_tcp_hdr_t rc = {.magic = GW_TCP_FRAME_MAGIC, .type = GW_TCP_RECEIPT, .seq = 3};
    gw__tcp_hdr_encode(&rc, hdr);
    put("fuzz_tcp_wire", "hdr-receipt", 0, 1, hdr, sizeof(hdr));

    gw_tcp_hello_t hl = {.id = {.magic = GW_TCP_HELLO_MAGIC, .from = 1, .to = 0},
                         .version = GW_TCP_PROTOCOL_VERSION,
                         .sock_idx = 1,
                         .nsocks = 2};
    memset(hl.id.job_id, 0x5a, sizeof(hl.id.job_id));
    uint8_t hello[GW_TCP_HELLO_SIZE];
    gw__tcp_hello_encode(&hl, hello);
    put("fuzz_tcp_wire", "hello", 1, 1, hello, sizeof(hello));

    struct sockaddr_in v4 = {
        .sin_family = AF_INET, .sin_port = htons(29500), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6,
                              .sin6_port = htons(29501),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT,
                              .sin6_scope_id = 2};
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__tcp_addr_encode((struct sockaddr *)&v4, blob);
    put("fuzz_tcp_wire", "addr-v4", 2, 1, blob, sizeof(blob));
    gw__tcp_addr_encode((struct sockaddr *)&v6, blob);
    put("fuzz_tcp_wire", "addr-v6", 2, 1, blob, sizeof(blob));
    uint8_t sa[GW_SOCK_ADDR_WIRE];
    gw__sock_addr_put(sa, (struct sockaddr *)&v6);
    put("fuzz_tcp_wire", "sockaddr-v6", 3, 1, sa, sizeof(sa));
    memset(sa, 0, sizeof(sa));
    put("fuzz_tcp_wire", "sockaddr-none", 3, 1, sa, sizeof(sa));
}

/* fuzz_sock_auth: the first byte picks the mode (0 a stranger to our
 * acceptor, 1 a stranger answering our dialler, 2 a man in the middle), the
 * second (modes 0 and 1) the size of the reads. */
static void sock_auth_seeds(void)
{
    gw_tcp_hello_t hl = {.id = {.magic = GW_TCP_HELLO_MAGIC, .from = 1, .to = 0},
                         .version = GW_TCP_PROTOCOL_VERSION,
                         .sock_idx = 0,
                         .nsocks = 1};
    memset(hl.id.job_id, 0x5a, sizeof(hl.id.job_id));
    uint8_t in[1 + GW_TCP_HELLO_SIZE + 4 * 8];
    /* A hello and a proof (wrong: no stranger knows the MAC), whole and
     * byte by byte. */
    uint8_t m[1 + GW_TCP_HELLO_SIZE + GW_SOCK_MAC_LEN + 1];
    m[0] = 63;
    gw__tcp_hello_encode(&hl, m + 1);
    memset(m + 1 + GW_TCP_HELLO_SIZE, 0x33, GW_SOCK_MAC_LEN);
    m[sizeof(m) - 1] = 'K';
    put("fuzz_sock_auth", "acceptor-hello-proof", 0, 1, m, sizeof(m) - 1);
    m[0] = 0;
    put("fuzz_sock_auth", "acceptor-bytewise", 0, 1, m, sizeof(m) - 1);
    static const char http[] = "?GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    put("fuzz_sock_auth", "acceptor-garbage", 0, 1, http, sizeof(http) - 1);
    /* The acceptor's answer: its hello, a MAC and the admission byte. */
    m[0] = 63;
    put("fuzz_sock_auth", "dialler-reply", 1, 1, m, sizeof(m));
    /* A man in the middle: nothing changed, then one byte of each message
     * (dialler -> acceptor: hello, proof; acceptor -> dialler: hello, MAC,
     * admission). */
    gw__tcp_hello_encode(&hl, in);
    put("fuzz_sock_auth", "middle-clean", 2, 1, in, GW_TCP_HELLO_SIZE);
    static const struct {
        const char *name;
        uint8_t dir;
        uint16_t at;
    } at[] = {{"middle-hello", 0, 40},
              {"middle-proof", 0, 70},
              {"middle-reply", 1, 20},
              {"middle-mac", 1, 60},
              {"middle-admit", 1, 88}};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        uint8_t *c = in + GW_TCP_HELLO_SIZE;
        c[0] = at[i].dir;
        c[1] = (uint8_t)(at[i].at >> 8);
        c[2] = (uint8_t)at[i].at;
        c[3] = 0x01;
        put("fuzz_sock_auth", at[i].name, 2, 1, in, GW_TCP_HELLO_SIZE + 4);
    }
}

static void bootstrap_seeds(void)
{
    uint8_t buf[GW_BS_SMALL_MSG_MAX + 64];
    gw_bs_hello_t h = {.rank = 3, .size = 4};
    memset(h.client_nonce, 0x11, sizeof(h.client_nonce));
    gw__bs_encode_hello(&h, buf);
    put("fuzz_bootstrap_msg", "hello", 0, 0, buf, GW_BS_HELLO_LEN);
    gw_bs_challenge_t c;
    memset(c.server_nonce, 0x22, sizeof(c.server_nonce));
    gw__bs_root_proof("token", 5, h.client_nonce, c.server_nonce, c.root_proof);
    gw__bs_encode_challenge(&c, buf);
    put("fuzz_bootstrap_msg", "challenge", 0, 0, buf, GW_BS_CHALLENGE_LEN);
    uint8_t proof[GW_BS_PROOF_LEN];
    gw__bs_rank_proof("token", 5, c.server_nonce, h.client_nonce, 3, proof);
    gw__bs_encode_response(proof, buf);
    put("fuzz_bootstrap_msg", "response", 0, 0, buf, GW_BS_RESPONSE_LEN);
    uint8_t job[GW_BS_JOB_ID_LEN];
    memset(job, 0x33, sizeof(job));
    gw__bs_encode_welcome(job, buf);
    put("fuzz_bootstrap_msg", "welcome", 0, 0, buf, GW_BS_WELCOME_LEN);
    size_t n = gw__bs_encode_reject(GW_ERR_AUTH, "wrong job token", buf);
    put("fuzz_bootstrap_msg", "reject", 0, 0, buf, n);
    n = gw__bs_encode_reject(GW_ERR_TIMEOUT, NULL, buf);
    put("fuzz_bootstrap_msg", "reject-empty", 0, 0, buf, n);
    gw__bs_encode_data_prefix(8, buf);
    memcpy(buf + GW_BS_DATA_PREFIX_LEN, "addrblob", 8);
    put("fuzz_bootstrap_msg", "data", 0, 0, buf, GW_BS_DATA_PREFIX_LEN + 8);
    gw_bs_report_t rep = {.kind = GW_BS_REPORT_STALLED,
                          .status = GW_ERR_TIMEOUT,
                          .culprit = 3,
                          .origin = 0,
                          .blame = 5,
                          .waiting_on = 3,
                          .seq = 7,
                          .stalled_ms = 2000};
    n = gw__bs_encode_report(&rep, buf);
    put("fuzz_bootstrap_msg", "report", 0, 0, buf, n);
    rep = (gw_bs_report_t){.kind = GW_BS_REPORT_STATE,
                           .culprit = -1,
                           .origin = -1,
                           .waiting_on = 2,
                           .seq = 7,
                           .stalled_ms = 1500};
    n = gw__bs_encode_report(&rep, buf);
    put("fuzz_bootstrap_msg", "report-state", 0, 0, buf, n);
    gw_bs_inquire_t inq = {.reporter = 0, .seq = 7};
    n = gw__bs_encode_inquire(&inq, buf);
    put("fuzz_bootstrap_msg", "inquire", 0, 0, buf, n);
    gw_bs_verdict_t v = {.status = GW_ERR_TIMEOUT, .culprit = 2, .origin = 0, .seq = 7};
    snprintf(v.reason, sizeof(v.reason), "rank 2 did not answer within 500 ms");
    n = gw__bs_encode_verdict(&v, buf);
    put("fuzz_bootstrap_msg", "verdict", 0, 0, buf, n);
    gw__bs_encode_gather_start(5000, buf);
    put("fuzz_bootstrap_msg", "gather_start", 0, 0, buf, GW_BS_GATHER_START_LEN);
    gw_bs_shrink_req_t shr = {.port = 40123, .window_ms = 2000};
    gw__bs_encode_shrink(&shr, buf);
    put("fuzz_bootstrap_msg", "shrink", 0, 0, buf, GW_BS_SHRINK_LEN);
    gw_bs_members_t mem = {.status = GW_OK, .new_rank = 1, .new_size = 3, .port = 40123};
    gw__bs_encode_members(&mem, buf);
    put("fuzz_bootstrap_msg", "members", 0, 0, buf, GW_BS_MEMBERS_LEN);
    uint8_t nonce[GW_BS_NONCE_LEN];
    memset(nonce, 0x5a, sizeof(nonce));
    gw__bs_encode_join(nonce, buf);
    put("fuzz_bootstrap_msg", "join", 0, 0, buf, GW_BS_JOIN_LEN);
    gw__bs_encode_grow(&shr, buf);
    put("fuzz_bootstrap_msg", "grow", 0, 0, buf, GW_BS_GROW_LEN);
    gw_bs_members_t grown = {.status = GW_OK, .new_rank = 3, .new_size = 4, .port = 40123};
    gw__bs_encode_grown(&grown, buf);
    put("fuzz_bootstrap_msg", "grown", 0, 0, buf, GW_BS_GROWN_LEN);
    grown = (gw_bs_members_t){.status = GW_OK, .new_rank = 1, .new_size = 3, .port = 0};
    gw__bs_encode_grown(&grown, buf);
    put("fuzz_bootstrap_msg", "grown-nobody", 0, 0, buf, GW_BS_GROWN_LEN);
    gw__bs_encode_ring_open(buf);
    put("fuzz_bootstrap_msg", "ring_open", 0, 0, buf, GW_BS_RING_OPEN_LEN);
    struct sockaddr_in ring4 = {.sin_family = AF_INET, .sin_port = htons(40124)};
    ring4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint8_t addr[GW_BS_RING_ADDR_LEN];
    gw__sock_addr_put(addr, (const struct sockaddr *)&ring4);
    gw__bs_encode_ring_peer(addr, buf);
    put("fuzz_bootstrap_msg", "ring_peer", 0, 0, buf, GW_BS_RING_PEER_LEN);
    struct sockaddr_in6 ring6 = {.sin6_family = AF_INET6, .sin6_port = htons(40125)};
    ring6.sin6_addr = in6addr_loopback;
    gw__sock_addr_put(addr, (const struct sockaddr *)&ring6);
    gw__bs_encode_ring_peer(addr, buf);
    put("fuzz_bootstrap_msg", "ring_peer6", 0, 0, buf, GW_BS_RING_PEER_LEN);
}

static void ib_seeds(void)
{
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw_ib_addr_t a;
    memset(&a, 0, sizeof(a));
    a.cm_mode = GW_IB_CM_OOB;
    a.link_layer = 2;
    a.port_num = 1;
    a.mtu = IBV_MTU_1024;
    a.nqps = 2;
    a.gid_index = 1;
    a.eager_max = 1024;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&a.sa;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(40000);
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    snprintf(a.device, sizeof(a.device), "rxe0");
    gw__ib_addr_encode(&a, blob);
    put("fuzz_ib_wire", "addr-oob", 0, 1, blob, sizeof(blob));
    a.cm_mode = GW_IB_CM_RDMACM;
    gw__ib_addr_encode(&a, blob);
    put("fuzz_ib_wire", "addr-rdmacm", 0, 1, blob, sizeof(blob));

    gw_ib_cts_t c = {
        .idx = 5, .addr = 0x1000, .len = 4096, .seq = 9, .rkey = 7, .sig = 3, .comm_id = 0x11};
    uint8_t cts[GW_IB_CTS_SIZE];
    gw__ib_cts_encode(&c, cts);
    put("fuzz_ib_wire", "cts", 1, 1, cts, sizeof(cts));
    gw_ib_eager_hdr_t e = {
        .idx = 5, .seq = 9, .sig = 3, .len = 100, .flags = GW_IB_EAGER_RECEIPT, .comm_id = 0x11};
    uint8_t eh[GW_IB_EAGER_HDR];
    gw__ib_eager_hdr_encode(&e, eh);
    put("fuzz_ib_wire", "eager", 2, 1, eh, sizeof(eh));
    uint32_t imm = gw__ib_imm_encode(GW_IB_IMM_DATA, 5);
    uint8_t ib[4] = {(uint8_t)(imm >> 24), (uint8_t)(imm >> 16), (uint8_t)(imm >> 8), (uint8_t)imm};
    put("fuzz_ib_wire", "imm", 3, 1, ib, sizeof(ib));
    imm = gw__ib_imm_encode(GW_IB_IMM_ABORT_FROM, gw__ib_abort_from_encode(2, 1));
    uint8_t ab[4] = {(uint8_t)(imm >> 24), (uint8_t)(imm >> 16), (uint8_t)(imm >> 8), (uint8_t)imm};
    put("fuzz_ib_wire", "imm-abort-from", 3, 1, ab, sizeof(ab));
    imm = gw__ib_imm_encode(GW_IB_IMM_RECEIPT, 5);
    uint8_t rc[4] = {(uint8_t)(imm >> 24), (uint8_t)(imm >> 16), (uint8_t)(imm >> 8), (uint8_t)imm};
    put("fuzz_ib_wire", "imm-receipt", 3, 1, rc, sizeof(rc));
    gw_ib_hello_t hl;
    memset(&hl, 0, sizeof(hl));
    hl.id.magic = GW_IB_HELLO_MAGIC;
    hl.id.from = 1;
    hl.version = GW_IB_PROTOCOL_VERSION;
    hl.nqps = 2;
    hl.psn = 0x123;
    hl.qpn[0] = 0x11;
    hl.qpn[1] = 0x12;
    uint8_t hello[GW_IB_HELLO_SIZE];
    gw__ib_hello_encode(&hl, hello);
    put("fuzz_ib_wire", "hello", 4, 1, hello, sizeof(hello));
    gw_ib_cm_pdata_t pd = {.from = 1, .to = 0, .qp_idx = 1, .nqps = 2};
    memset(pd.nonce, 0xa5, sizeof(pd.nonce));
    uint8_t pdata[GW_IB_CM_REQ_SIZE], prep[GW_IB_CM_REP_SIZE];
    gw__ib_cm_req_encode(&pd, pdata);
    put("fuzz_ib_wire", "cm-pdata", 5, 1, pdata, sizeof(pdata));
    memset(pd.mac, 0x3c, sizeof(pd.mac));
    gw__ib_cm_rep_encode(&pd, prep);
    put("fuzz_ib_wire", "cm-accept", 5, 1, prep, sizeof(prep));
    gw__shm_addr_encode(1234, 0xabcdefull, 1 << 20, blob);
    put("fuzz_ib_wire", "shm-addr", 6, 1, blob, sizeof(blob));
    uint8_t knock[GW_SHM_KNOCK_LEN];
    gw__shm_knock_encode(3, knock);
    put("fuzz_ib_wire", "shm-knock", 7, 1, knock, sizeof(knock));
}

static void env_seeds(void)
{
    static const struct {
        uint8_t sel;
        const char *name, *value;
    } s[] = {
        {0, "long", "4"},
        {8, "long-range", "1000000"},
        {24, "long-min", "-9223372036854775808"},
        {1, "env-int", "2"},
        {2, "hostport", "127.0.0.1:29500"},
        {10, "hostport-small", "[::1]:29500"},
        {3, "debug-file", "gw-%h-%p.log"},
        {11, "debug-level", "TRACE"},
        {4, "codec", "powersgd"},
        {4, "codec-alias", "1bit"},
        {5, "ifname-list", "eth,=ib0,en"},
        {5, "ifname-exclude", "^docker,lo"},
        {6, "debug-subsys", "init,tcp,coll"},
        {6, "debug-subsys-exclude", "^ib,shm"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        put("fuzz_env", s[i].name, s[i].sel, 1, s[i].value, strlen(s[i].value));
}

static void hostlist_seeds(void)
{
    static const struct {
        const char *name, *value;
    } s[] = {
        {"plain", "n1,n2 n3"},
        {"range", "n[01-04,07]"},
        {"groups", "rack[1-2]-n[01-02],gpu[1-2]-ib[0-1]"},
        {"widths", "n[098-101],m[1-003]"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        put("fuzz_hostlist", s[i].name, 0, 0, s[i].value, strlen(s[i].value));
}

static void hostfile_seeds(void)
{
    static const struct {
        const char *name, *value;
    } s[] = {
        {"spellings", "n0 slots=2\n# a comment\nn1\n\n  n2:4\t# trailing\r\nuser@n3 slots=3\n"},
        {"addresses", "198.18.0.1:2\n198.18.0.2 slots=2\n[::1]\n"},
        {"bad", "n0 slots=two\n-oProxyCommand=x\n"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        put("fuzz_hostfile", s[i].name, 0, 0, s[i].value, strlen(s[i].value));
}

static void check_baseline_seeds(void)
{
    static const struct {
        const char *name, *value;
    } s[] = {
        {"v2", "gradwire-check-baseline 2\n# saved by gradwire-check\nranks 4\nallreduce 0.5 80\n"
               "link 0 1 h0 h1 20.5 41 1.1\nlink 0 2 h0 h2 21 40 1.05\nlink 1 2 h1 h2 19 38 1.2\n"
               "node h0 17.9 38.9 nan nan nan\nnode h1 18.2 40.1 210 24 25\n"},
        {"v1", "gradwire-check-baseline 1\nranks 2\nallreduce nan nan\nlink 0 1 a b 20 40 0.9\n"},
        {"one-host", "gradwire-check-baseline 2\nranks 1\nallreduce nan nan\n"
                     "node vm 17.9365 38.9752 nan nan nan\n"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        put("fuzz_check_baseline", s[i].name, 0, 0, s[i].value, strlen(s[i].value));
}

static void tuning_seeds(void)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, "tcp");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f || gw__tuning_write(&t, f) != GW_OK || fclose(f) != 0)
        exit(1);
    put("fuzz_tuning", "written", 0, 0, text, len);
    free(text);
    static const char commented[] = "# measured by gradwire-bench tune\n"
                                    "gradwire-tuning 1\n"
                                    "  alpha = 2.5e-05   # seconds\n"
                                    "beta=1e-10\n\n"
                                    "chunk_bytes = 4096\n";
    put("fuzz_tuning", "commented", 0, 0, commented, sizeof(commented) - 1);
}

/* An IDX file: magic 0 0 8 ndims, big-endian dimensions, bytes. */
static size_t idx(uint8_t *out, int ndims, const uint32_t *dims, const uint8_t *v, size_t n)
{
    size_t k = 0;
    out[k++] = 0;
    out[k++] = 0;
    out[k++] = 8;
    out[k++] = (uint8_t)ndims;
    for (int d = 0; d < ndims; d++)
        for (int b = 3; b >= 0; b--)
            out[k++] = (uint8_t)(dims[d] >> (8 * b));
    memcpy(out + k, v, n);
    return k + n;
}

static void idx_seeds(void)
{
    uint8_t labels[64], images[256], in[512], pix[3 * 2 * 3];
    uint8_t lab[3] = {0, 2, 1};
    for (size_t i = 0; i < sizeof(pix); i++)
        pix[i] = (uint8_t)(i * 14);
    size_t ll = idx(labels, 1, (uint32_t[]){3}, lab, 3);
    size_t il = idx(images, 3, (uint32_t[]){3, 2, 3}, pix, sizeof(pix));
    for (uint8_t shard = 0; shard < 4; shard += 3) {
        in[0] = shard;
        in[1] = (uint8_t)ll;
        in[2] = 0;
        memcpy(in + 3, labels, ll);
        memcpy(in + 3 + ll, images, il);
        put("fuzz_idx", shard ? "plain-shard" : "plain", 0, 0, in, 3 + ll + il);
    }
    /* The images gzipped, as Fashion-MNIST comes. */
    char tmp[] = "/tmp/gw-seed-XXXXXX";
    int fd = mkstemp(tmp);
    gzFile gz = fd >= 0 ? gzdopen(fd, "wb") : NULL;
    if (!gz || gzwrite(gz, images, (unsigned)il) != (int)il || gzclose(gz) != Z_OK)
        exit(1);
    FILE *f = fopen(tmp, "rb");
    size_t gl = f ? fread(in + 3 + ll, 1, sizeof(in) - 3 - ll, f) : 0;
    if (f)
        fclose(f);
    unlink(tmp);
    put("fuzz_idx", "gzipped", 0, 0, in, 3 + ll + gl);
}

static void libsvm_seeds(void)
{
    static const char multi[] = "# three classes\n0 1:0.5 3:-1.25\n2 2:1e-3\n\n1 1:1 2:2 3:3\n";
    static const char binary[] = "+1 1:0.1 4:0.4\n-1 2:0.2\n+1 3:3.5e2 # comment\n";
    put("fuzz_libsvm", "multi", 0, 1, multi, sizeof(multi) - 1);
    put("fuzz_libsvm", "binary-dim3", 8 | 2, 1, binary, sizeof(binary) - 1);
}

static void checkpoint_seeds(const char *tmpdir)
{
    float params[4] = {0.5f, -1, 2, 0}, vel[4] = {0, 0.25f, 0, -0.5f};
    unsigned char codec[6] = "codec";
    gw_train_ckpt_t c;
    memset(&c, 0, sizeof(c));
    c.rank = 1;
    c.world = 2;
    c.epoch = 3;
    c.global_step = 40;
    gw_train_rng_seed(&c.rng, 7);
    c.elapsed_s = 1.5;
    snprintf(c.config, sizeof(c.config), "batch=32 lr=0.1 seed=7");
    c.nparams = 4;
    c.params = params;
    c.velocity = vel;
    c.codec_len = sizeof(codec);
    c.codec_state = codec;
    if (gw_train_ckpt_write(tmpdir, &c) != GW_OK)
        exit(1);
    char path[4096];
    gw_train_ckpt_path(tmpdir, c.global_step, c.rank, path, sizeof(path));
    FILE *f = fopen(path, "rb");
    uint8_t img[1024];
    size_t n = f ? fread(img, 1, sizeof(img), f) : 0;
    if (f)
        fclose(f);
    unlink(path);
    if (n == 0)
        exit(1);
    put("fuzz_checkpoint", "written", 0, 1, img, n);
    put("fuzz_checkpoint", "written-crc-kept", 1, 1, img, n);

    /* Format version 2: a --zero rank's shard of the momentum (2 of the 4
     * floats), which adds the shard's length to the header. */
    c.velocity_len = 2;
    if (gw_train_ckpt_write(tmpdir, &c) != GW_OK)
        exit(1);
    f = fopen(path, "rb");
    n = f ? fread(img, 1, sizeof(img), f) : 0;
    if (f)
        fclose(f);
    unlink(path);
    if (n == 0 || img[8] != 2)
        exit(1);
    put("fuzz_checkpoint", "written-v2-shard", 0, 1, img, n);
    put("fuzz_checkpoint", "written-v2-shard-crc-kept", 1, 1, img, n);
}

static void compress_seeds(void)
{
    for (int codec = 0; codec < GW_CODEC_COUNT; codec++) {
        for (int mom = 0; mom < 2; mom++) {
            if (mom && codec != GW_CODEC_TOPK)
                continue;
            gw_compress_config_t cfg;
            gw_compress_config_init(&cfg);
            cfg.codec = (gw_codec_t)codec;
            cfg.min_elements = 0;
            cfg.powersgd_rank = 2;
            cfg.seed = 42;
            if (mom)
                cfg.momentum = 0.9;
            gw_compress_state_t *s;
            if (gw_compress_state_create(&cfg, 4, 8, &s) != GW_OK)
                exit(1);
            uint8_t img[4096];
            size_t len;
            if (gw_compress_state_save(s, img, sizeof(img), &len) != GW_OK)
                exit(1);
            gw_compress_state_destroy(s);
            char name[64];
            snprintf(name, sizeof(name), "%s%s", gw_codec_name(cfg.codec), mom ? "-momentum" : "");
            put("fuzz_compress_state", name, (uint8_t)(codec | (mom ? 8 : 0)), 1, img, len);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        perror(root);
        return 1;
    }
    char tmpdir[] = "/tmp/gw-seeds-XXXXXX";
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    tcp_seeds();
    sock_auth_seeds();
    bootstrap_seeds();
    ib_seeds();
    env_seeds();
    hostlist_seeds();
    hostfile_seeds();
    tuning_seeds();
    check_baseline_seeds();
    idx_seeds();
    libsvm_seeds();
    checkpoint_seeds(tmpdir);
    compress_seeds();
    rmdir(tmpdir);
    return 0;
}
