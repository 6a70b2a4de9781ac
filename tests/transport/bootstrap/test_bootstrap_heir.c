/*
 * The succession on the wire (bootstrap_heir.c, bootstrap_heir_lead.c):
 * three rank processes form a job and open their heir listeners; rank 0
 * exits without a word; ranks 1 and 2 find it gone (gw__bootstrap_shrink:
 * GW_ERR_REMOTE) and agree through rank 1, the lowest survivor. Meanwhile
 * the test process, which knows where rank 1's heir listener is but not
 * the job token, knocks on it: a connection that says nothing, one that
 * sends garbage, and one that claims rank 2 and answers the heir's
 * challenge with a proof made from another token. What must hold:
 *
 *   - ranks 1 and 2 become ranks 0 and 1 of 2, at the same new root (rank
 *     1's host and a port it reserved), whatever the strangers do;
 *   - the impostor (while rank 1 waits for rank 2, which asks only after
 *     it) gets REJECT(AUTH), no MEMBERS, and rank 1 logs that it could
 *     not prove the token;
 *   - after the decision, a request that does prove the token (the test,
 *     given the heir key's ingredients) gets MEMBERS with GW_ERR_ABORTED:
 *     left out, from the thread that answers late ranks;
 *   - the heir's own proof, checked by the asker, is made with the heir
 *     key, not the job token (a proof from the token alone is refused).
 */
#include <poll.h>

#include "bootstrap_test_util.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

#define TOKEN "heir-test-token-0123456789abcdef"
#define WINDOW_MS 3000

typedef struct heir_shared {
    /* The test's word: 1 rank 0 leaves, 2 rank 1 finds it gone and leads,
     * 3 rank 2 does (after the impostor tried), 4 they close. */
    volatile int go;
    struct {
        volatile int ready, done;
        int open_st, heirs_st, shrink_st, succeed_st, status, new_rank, new_size;
        char root[96];
        int heir_port; /* rank 1's heir listener */
        uint8_t job_id[GW_BS_JOB_ID_LEN];
    } r[3];
} heir_shared_t;

/* Wait for the test's word `want`; a rank whose test failed (and never
 * says it) leaves after a while instead of staying behind. */
static void await(heir_shared_t *sh, int want)
{
    int64_t give_up = gw__now_ms() + 40000;
    while (sh->go < want && gw__now_ms() < give_up)
        usleep(1000);
}

static void rank_main(const job_t *j, heir_shared_t *sh, int rank)
{
    gw_logger_t lg;
    slot_logger(j, rank, rank, &lg);
    gw_bootstrap_params_t p = {
        .rank = rank, .size = 3, .root = j->root, .token = TOKEN, .timeout_ms = 10000, .log = &lg};
    gw_bootstrap_t *bs = NULL;
    sh->r[rank].open_st = gw__bootstrap_open(&p, &bs);
    if (sh->r[rank].open_st != GW_OK)
        goto out;
    gw__bootstrap_job_id(bs, sh->r[rank].job_id);
    sh->r[rank].heirs_st = gw__bootstrap_heirs_open(bs);
    if (sh->r[rank].heirs_st != GW_OK || gw__bootstrap_watch_start(bs, 200) != GW_OK)
        goto out;
    struct sockaddr_storage sa;
    socklen_t sl;
    if (rank == 1 && gw__bs_heir_addr(bs, 1, &sa, &sl, NULL, 0) == 0)
        sh->r[1].heir_port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    sh->r[rank].ready = 1;
    await(sh, rank + 1);
    if (rank == 0)
        _exit(0); /* without a word: its connections close with the process */
    gw_bs_members_t m;
    char root[256] = "";
    sh->r[rank].shrink_st = gw__bootstrap_shrink(bs, WINDOW_MS, root, sizeof(root), &m);
    sh->r[rank].succeed_st = gw__bootstrap_succeed(bs, WINDOW_MS, root, sizeof(root), &m);
    sh->r[rank].status = m.status;
    sh->r[rank].new_rank = m.new_rank;
    sh->r[rank].new_size = (int)m.new_size;
    snprintf(sh->r[rank].root, sizeof(sh->r[rank].root), "%s", root);
    sh->r[rank].done = 1;
    await(sh, 4); /* the old bootstrap answers late ranks meanwhile */
    gw__bootstrap_close(bs);
out:
    sh->r[rank].done = 1;
    gw__logger_fini(&lg);
    _exit(0);
}

static void heir_key(const heir_shared_t *sh, uint8_t key[32])
{
    static const char label[] = "gradwire heir";
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, TOKEN, strlen(TOKEN));
    gw__hmac_sha256_update(&h, label, sizeof(label) - 1);
    gw__hmac_sha256_update(&h, sh->r[1].job_id, GW_BS_JOB_ID_LEN);
    gw__hmac_sha256_final(&h, key);
}

/* HELLO as rank 2, the heir's CHALLENGE (its proof checked against `key`
 * when check is set), a RESPONSE proven with `key`; returns the type of
 * the heir's answer, or -1 when the connection closed first. */
static int ask(int fd, const uint8_t *key, size_t key_len, int check, gw_bs_members_t *m)
{
    gw_bs_hello_t hello = {.rank = 2, .size = 3};
    memset(hello.client_nonce, 0x5a, sizeof(hello.client_nonce));
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
    gw__bs_encode_hello(&hello, buf);
    cr_assert_eq(write(fd, buf, GW_BS_HELLO_LEN), (ssize_t)GW_BS_HELLO_LEN);
    cr_assert_eq(read_full(fd, buf, GW_BS_CHALLENGE_LEN), 0, "no challenge from the heir");
    gw_bs_challenge_t ch;
    cr_assert_eq(gw__bs_decode_challenge(buf, GW_BS_CHALLENGE_LEN, &ch, NULL), GW_OK);
    uint8_t proof[GW_BS_PROOF_LEN];
    if (check) {
        gw__bs_root_proof(key, key_len, hello.client_nonce, ch.server_nonce, proof);
        cr_assert_arr_eq(proof, ch.root_proof, sizeof(proof),
                         "the heir's proof is not the heir key's");
        gw__bs_root_proof(TOKEN, strlen(TOKEN), hello.client_nonce, ch.server_nonce, proof);
        cr_assert(memcmp(proof, ch.root_proof, sizeof(proof)) != 0,
                  "the heir proves with the bare token");
    }
    gw__bs_rank_proof(key, key_len, ch.server_nonce, hello.client_nonce, 2, proof);
    gw__bs_encode_response(proof, buf);
    cr_assert_eq(write(fd, buf, GW_BS_RESPONSE_LEN), (ssize_t)GW_BS_RESPONSE_LEN);
    if (read_full(fd, buf, GW_BS_HDR_LEN) != 0)
        return -1;
    gw_bs_hdr_t h;
    cr_assert_eq(gw__bs_decode_hdr(buf, GW_BS_HDR_LEN, &h, NULL), GW_OK);
    cr_assert_eq(read_full(fd, buf + GW_BS_HDR_LEN, h.payload_len), 0);
    if (h.type == GW_BS_MEMBERS)
        cr_assert_eq(gw__bs_decode_members(buf, GW_BS_HDR_LEN + h.payload_len, m, NULL), GW_OK);
    return (int)h.type;
}

Test(bootstrap_heir, survivors_agree_through_rank_1_strangers_get_nothing, .timeout = 60)
{
    job_t j;
    job_init(&j);
    heir_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    for (int r = 0; r < 3; r++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            rank_main(&j, sh, r);
        j.pids[r] = pid;
        j.res[r].done = 1; /* wait_slot's check: the rank's own result is in sh */
    }
    j.nslots = 3;
    int64_t deadline = gw__now_ms() + 20000;
    while (!(sh->r[0].ready && sh->r[1].ready && sh->r[2].ready)) {
        for (int r = 0; r < 3; r++)
            cr_assert(!sh->r[r].done, "rank %d failed to form the job: open %s, heirs %s", r,
                      gw_status_name(sh->r[r].open_st), gw_status_name(sh->r[r].heirs_st));
        cr_assert(gw__now_ms() < deadline, "the job did not form");
        usleep(2000);
    }
    cr_assert_gt(sh->r[1].heir_port, 0);
    /* The strangers knock before the succession: the kernel queues them. */
    int silent = connect_retry(sh->r[1].heir_port, 2000);
    int garbage = connect_retry(sh->r[1].heir_port, 2000);
    cr_assert_eq(write(garbage, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    int impostor = connect_retry(sh->r[1].heir_port, 2000);
    sh->go = 1;
    wait_slot(&j, 0, 10000);
    sh->go = 2; /* rank 1 leads, and waits up to WINDOW_MS for rank 2 */
    static const char other[] = "another-token-0123456789abcdefgh";
    gw_bs_members_t m;
    int answer = ask(impostor, (const uint8_t *)other, strlen(other), 0, &m);
    cr_assert_eq(answer, GW_BS_REJECT, "the impostor got %s, not a reject",
                 gw__bs_type_name((uint32_t)answer));
    sh->go = 3;
    while (!(sh->r[1].done && sh->r[2].done)) {
        cr_assert(gw__now_ms() < deadline + 20000, "the survivors did not agree");
        usleep(2000);
    }
    for (int r = 1; r < 3; r++) {
        cr_assert_eq(sh->r[r].shrink_st, GW_ERR_REMOTE, "rank %d: shrink through rank 0 gave %s", r,
                     gw_status_name(sh->r[r].shrink_st));
        cr_assert_eq(sh->r[r].succeed_st, GW_OK, "rank %d: the succession gave %s", r,
                     gw_status_name(sh->r[r].succeed_st));
        cr_assert_eq(sh->r[r].status, GW_OK, "rank %d: left out (%s)", r,
                     gw_status_name(sh->r[r].status));
        cr_assert_eq(sh->r[r].new_rank, r - 1);
        cr_assert_eq(sh->r[r].new_size, 2);
    }
    cr_assert_str_eq(sh->r[1].root, sh->r[2].root, "the survivors were told different roots");
    cr_assert(strncmp(sh->r[1].root, "127.0.0.1:", 10) == 0, "new root %s", sh->r[1].root);
    assert_log(&j, 1, "cannot prove the job token");
    /* A late request that proves the token is told it was left out. */
    uint8_t key[32];
    heir_key(sh, key);
    int late = connect_retry(sh->r[1].heir_port, 2000);
    answer = ask(late, key, sizeof(key), 1, &m);
    cr_assert_eq(answer, GW_BS_MEMBERS, "the late request got %s",
                 gw__bs_type_name((uint32_t)answer));
    cr_assert_eq(m.status, GW_ERR_ABORTED, "the late request was not left out: %s",
                 gw_status_name(m.status));
    cr_assert_eq(m.new_rank, -1);
    close(late);
    close(silent);
    close(garbage);
    close(impostor);
    sh->go = 4;
    wait_all(&j, 10000);
    munmap(sh, sizeof(*sh));
    job_fini(&j);
}
