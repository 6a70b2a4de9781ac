/*
 * gw_comm_join's job token, on the wire (comm_grow.c, bootstrap_joiner.c):
 * a process joins a running job only by proving the job's token, exactly
 * as gw_comm_init requires one to form a job. Against a root played by
 * the test (a listening socket that answers JOIN with a CHALLENGE made
 * with the token and checks the joiner's RESPONSE):
 *
 *   - without GW_JOB_TOKEN or GW_JOB_TOKEN_FILE (nor one in the config)
 *     the joiner is refused with GW_ERR_CONFIG before it connects: nothing
 *     reaches the root;
 *   - with GW_INSECURE=1 and no token it connects and asks to join;
 *   - GW_JOB_TOKEN_FILE's token is the one it proves (the root checks the
 *     RESPONSE's proof), as GW_JOB_TOKEN's is;
 *   - a token shorter than 16 characters in the config is refused, for a
 *     joiner and for gw_comm_init alike.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "bootstrap_test_util.h"
#include "gradwire.h"

#define TOKEN "join-test-token-0123456789"

typedef struct fake_root {
    int lfd;
    char addr[64];
    const char *token; /* what the CHALLENGE is made with */
    int connected;     /* a joiner connected */
    int asked;         /* ... and sent JOIN */
    int proven;        /* ... and its RESPONSE proved token */
    pthread_t th;
} fake_root_t;

/* Play rank 0 for one joiner, for up to 3 s: JOIN, CHALLENGE, RESPONSE,
 * then close (the joiner is told nothing more). */
static void *root_main(void *arg)
{
    fake_root_t *fr = arg;
    struct pollfd pfd = {.fd = fr->lfd, .events = POLLIN};
    if (poll(&pfd, 1, 3000) != 1)
        return NULL;
    int fd = accept(fr->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    fr->connected = 1;
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t m[GW_BS_SMALL_MSG_MAX], nonce[GW_BS_NONCE_LEN];
    if (read_full(fd, m, GW_BS_JOIN_LEN) != 0 ||
        gw__bs_decode_join(m, GW_BS_JOIN_LEN, nonce, NULL) != GW_OK)
        goto out;
    fr->asked = 1;
    gw_bs_challenge_t ch;
    if (getrandom(ch.server_nonce, sizeof(ch.server_nonce), 0) != (ssize_t)sizeof(ch.server_nonce))
        goto out;
    gw__bs_root_proof(fr->token, strlen(fr->token), nonce, ch.server_nonce, ch.root_proof);
    gw__bs_encode_challenge(&ch, m);
    if (write(fd, m, GW_BS_CHALLENGE_LEN) != (ssize_t)GW_BS_CHALLENGE_LEN ||
        read_full(fd, m, GW_BS_RESPONSE_LEN) != 0)
        goto out;
    uint8_t proof[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    if (gw__bs_decode_response(m, GW_BS_RESPONSE_LEN, proof, NULL) != GW_OK)
        goto out;
    gw__bs_rank_proof(fr->token, strlen(fr->token), ch.server_nonce, nonce, GW_BS_JOINER_RANK,
                      want);
    fr->proven = memcmp(proof, want, sizeof(want)) == 0;
out:
    close(fd);
    return NULL;
}

static void root_start(fake_root_t *fr, const char *token)
{
    memset(fr, 0, sizeof(*fr));
    fr->token = token;
    fr->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert(fr->lfd >= 0 && bind(fr->lfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                  listen(fr->lfd, 4) == 0 && getsockname(fr->lfd, (struct sockaddr *)&a, &len) == 0,
              "listening: %s", strerror(errno));
    snprintf(fr->addr, sizeof(fr->addr), "127.0.0.1:%d", ntohs(a.sin_port));
    cr_assert_eq(pthread_create(&fr->th, NULL, root_main, fr), 0);
}

static void root_end(fake_root_t *fr)
{
    pthread_join(fr->th, NULL);
    close(fr->lfd);
}

/* gw_comm_join at fr with the environment as the test set it. */
static gw_status_t join(fake_root_t *fr, const char *cfg_token)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.root = fr->addr;
    cfg.job_token = cfg_token;
    gw_comm_t *c = NULL;
    gw_status_t st = gw_comm_join(&cfg, 2000, &c);
    cr_assert_null(c, "a join that nobody admitted made a communicator");
    return st;
}

static void clean_env(void)
{
    unsetenv("GW_JOB_TOKEN");
    unsetenv("GW_JOB_TOKEN_FILE");
    unsetenv("GW_INSECURE");
    setenv("GW_DEBUG", "ERROR", 1);
}

Test(bootstrap_join, without_a_token_nothing_reaches_the_root, .timeout = 30)
{
    clean_env();
    fake_root_t fr;
    root_start(&fr, "");
    cr_expect_eq(join(&fr, NULL), GW_ERR_CONFIG, "a joiner without a token was not refused");
    root_end(&fr);
    cr_expect(!fr.connected, "the joiner without a token connected to the root");
}

Test(bootstrap_join, gw_insecure_joins_without_a_token, .timeout = 30)
{
    clean_env();
    setenv("GW_INSECURE", "1", 1);
    fake_root_t fr;
    root_start(&fr, "");
    gw_status_t st = join(&fr, NULL);
    root_end(&fr);
    cr_expect_neq(st, GW_ERR_CONFIG, "GW_INSECURE=1 did not let it ask");
    cr_expect(fr.asked && fr.proven, "the insecure joiner did not ask to join (%d, %d)", fr.asked,
              fr.proven);
}

Test(bootstrap_join, the_token_of_gw_job_token_file_is_proven, .timeout = 30)
{
    clean_env();
    char path[] = "/tmp/gw-join-token-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, TOKEN "\n", sizeof(TOKEN)) > 0,
              "token file: %s", strerror(errno));
    close(fd);
    setenv("GW_JOB_TOKEN_FILE", path, 1);
    fake_root_t fr;
    root_start(&fr, TOKEN);
    gw_status_t st = join(&fr, NULL);
    root_end(&fr);
    unlink(path);
    cr_expect_neq(st, GW_ERR_CONFIG);
    cr_expect(fr.asked, "the joiner with GW_JOB_TOKEN_FILE did not ask to join");
    cr_expect(fr.proven, "the joiner did not prove the token of GW_JOB_TOKEN_FILE");
}

Test(bootstrap_join, the_token_of_gw_job_token_is_proven, .timeout = 30)
{
    clean_env();
    setenv("GW_JOB_TOKEN", TOKEN, 1);
    fake_root_t fr;
    root_start(&fr, TOKEN);
    gw_status_t st = join(&fr, NULL);
    root_end(&fr);
    cr_expect_neq(st, GW_ERR_CONFIG);
    cr_expect(fr.asked && fr.proven, "the joiner did not prove GW_JOB_TOKEN (%d, %d)", fr.asked,
              fr.proven);
}

Test(bootstrap_join, a_short_token_in_the_config_is_refused, .timeout = 30)
{
    clean_env();
    fake_root_t fr;
    root_start(&fr, "short");
    cr_expect_eq(join(&fr, "short"), GW_ERR_CONFIG, "a joiner's 5-character token was taken");
    root_end(&fr);
    cr_expect(!fr.connected, "the joiner with a short token connected to the root");
    /* gw_comm_init holds a token in its config to the same minimum. */
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 1;
    cfg.size = 2;
    cfg.root = fr.addr;
    cfg.job_token = "short";
    cfg.timeout_ms = 1000;
    gw_comm_t *c = NULL;
    cr_expect_eq(gw_comm_init(&cfg, &c), GW_ERR_CONFIG, "gw_comm_init took a 5-character token");
    cr_expect_null(c);
}
