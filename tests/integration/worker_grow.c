/*
 * worker_grow.c - one rank of the grow tests (test_grow.c), run by
 * `gradwire launch --elastic`, and the joiners it starts.
 *
 * Usage: worker_grow MODE          a member (grow, badtoken: 3 ranks;
 *                                  shrink, shrink0: 4 ranks)
 *        worker_grow join EXPECT   a joiner: EXPECT is ok or the status
 *                                  name its gw_comm_join must return
 *        worker_grow forge         a joiner that skips rank 0's proof and
 *                                  answers with a made-up one, by hand (the
 *                                  wire format of bootstrap_msg.h): rank 0
 *                                  must refuse it with REJECT(GW_ERR_AUTH)
 *
 * The members first make one allreduce and one gw_comm_grow with nobody
 * waiting, which must leave the communicator as it is ("rank R: grow with
 * nobody: unchanged, sum ok"). In shrink mode rank 2 then SIGKILLs itself
 * and the others shrink to 3 first; in shrink0 mode rank 0 does, and rank
 * 1, its heir, is rank 0 of the shrunk communicator, listening at the
 * job's root port in rank 0's place. Rank 0 starts the joiners as children
 * (they inherit GW_ROOT and GW_JOB_TOKEN from the launcher): in badtoken
 * mode first one with another token, which must get GW_ERR_AUTH, and a
 * forger (above), then a right one. Rank 0 counts the joiners with
 * gw_comm_joiners: none before they come, none after the refused ones
 * ("rank 0: joiners 0 after the refused ones"), then the right one once it
 * proved the token ("rank 0: joiners 1 once it proved the token"); every
 * other rank counts none ("rank R: joiners 0 (not rank 0)"), and a
 * sub-communicator cannot count. The members call gw_comm_grow every 200 ms (their "epoch
 * boundaries") until it gives them a new communicator, at most MAX_GROWS
 * times. On the grown communicator every rank, joiner included, checks an
 * allgather of who it was (a member: its old rank; a joiner: 100), an
 * allreduce and a broadcast, all exact (integers), and prints
 *   "rank R: now rank X of N, members A,B,C,100, sum ok, bcast ok"
 * (a joiner's R is "joiner"). Exit 0 when everything was as expected.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradwire.h"
#include "transport/bootstrap/bootstrap_msg.h"

#define MAX_GROWS 100
#define JOINER_ID 100

/* Who is in the new communicator, and do an allreduce and a broadcast on
 * it come out exact. */
static int check_grown(gw_comm_t *nc, const char *who, int id)
{
    int n = gw_comm_size(nc), me = gw_comm_rank(nc);
    int32_t *ids = calloc((size_t)n, sizeof(*ids)), mine = id;
    int64_t want = 0, got = id + 1;
    int32_t b[64];
    for (int i = 0; i < 64; i++)
        b[i] = me == 0 ? 7 * i + 3 : -1;
    gw_status_t st = gw_allgather(nc, &mine, ids, 1, GW_INT32);
    if (st == GW_OK)
        st = gw_allreduce(nc, &got, &got, 1, GW_INT64, GW_SUM);
    if (st == GW_OK)
        st = gw_broadcast(nc, b, b, 64, GW_INT32, 0);
    if (st != GW_OK) {
        printf("rank %s: collectives on the grown communicator: %s\n", who, gw_status_name(st));
        free(ids);
        return 1;
    }
    char members[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        want += ids[i] + 1;
        len += (size_t)snprintf(members + len, sizeof(members) - len, "%s%d", i ? "," : "", ids[i]);
    }
    int bok = 1;
    for (int i = 0; i < 64; i++)
        bok &= b[i] == 7 * i + 3;
    int ok = got == want && ids[me] == id && bok;
    printf("rank %s: now rank %d of %d, members %s, sum %s, bcast %s\n", who, me, n, members,
           got == want ? "ok" : "WRONG", bok ? "ok" : "WRONG");
    free(ids);
    return ok ? 0 : 1;
}

static int joiner_main(const char *expect)
{
    gw_comm_t *c = NULL;
    gw_status_t st = gw_comm_join(NULL, 20000, &c);
    if (st != GW_OK) {
        printf("joiner: join %s\n", gw_status_name(st));
        return strcmp(expect, gw_status_name(st)) == 0 ? 0 : 1;
    }
    int rc = check_grown(c, "joiner", JOINER_ID);
    gw_comm_destroy(c);
    return strcmp(expect, "ok") == 0 ? rc : 1;
}

static int io_all(int fd, void *buf, size_t len, int writing)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = writing ? write(fd, (char *)buf + done, len - done)
                            : read(fd, (char *)buf + done, len - done);
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static void put_hdr(uint8_t *m, uint16_t type, uint32_t len)
{
    uint32_t magic = htonl(0x47574253u), plen = htonl(len);
    uint16_t version = htons(GW_BS_VERSION), t = htons(type);
    memcpy(m, &magic, 4);
    memcpy(m + 4, &version, 2);
    memcpy(m + 6, &t, 2);
    memcpy(m + 8, &plen, 4);
}

/* JOIN, then a RESPONSE with a made-up proof: rank 0's answer must be
 * REJECT (type 4) with GW_ERR_AUTH. */
static int forger_main(void)
{
    const char *root = getenv("GW_ROOT");
    const char *colon = root ? strrchr(root, ':') : NULL;
    if (!colon)
        return 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    uint8_t join[12 + 32], ch[12 + 64], resp[12 + 32], rej[12 + 4];
    put_hdr(join, 13, 32);
    memset(join + 12, 0x33, 32);
    put_hdr(resp, 3, 32);
    memset(resp + 12, 0x44, 32);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        io_all(fd, join, sizeof(join), 1) || io_all(fd, ch, sizeof(ch), 0) ||
        io_all(fd, resp, sizeof(resp), 1) || io_all(fd, rej, sizeof(rej), 0)) {
        printf("forger: no answer from rank 0\n");
        return 1;
    }
    uint32_t status;
    memcpy(&status, rej + 12, 4);
    status = ntohl(status);
    printf("forger: rank 0 answered a %s with status %u\n", rej[7] == 4 ? "REJECT" : "NOT A REJECT",
           status);
    close(fd);
    return rej[7] == 4 && status == (uint32_t)GW_ERR_AUTH ? 0 : 1;
}

static pid_t start_joiner(const char *token, const char *expect)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (token)
            setenv("GW_JOB_TOKEN", token, 1);
        if (strcmp(expect, "forge") == 0)
            execl("/proc/self/exe", "worker_grow", "forge", (char *)NULL);
        else
            execl("/proc/self/exe", "worker_grow", "join", expect, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int joiner_status(pid_t pid)
{
    int ws = 0;
    if (pid <= 0 || waitpid(pid, &ws, 0) != pid)
        return 1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* An allreduce of 1s: the communicator works, with all its ranks. */
static int sum_ok(gw_comm_t *c)
{
    int32_t one = 1, sum = 0;
    return gw_allreduce(c, &one, &sum, 1, GW_INT32, GW_SUM) == GW_OK && sum == gw_comm_size(c);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "join") == 0)
        return joiner_main(argv[2]);
    if (argc == 2 && strcmp(argv[1], "forge") == 0)
        return forger_main();
    if (argc != 2) {
        fprintf(stderr,
                "usage: worker_grow grow|badtoken|shrink|shrink0  |  worker_grow join EXPECT\n");
        return 2;
    }
    const char *mode = argv[1];
    gw_comm_t *comm = NULL, *shrunk = NULL, *grown = NULL;
    if (gw_comm_init_env(&comm) != GW_OK)
        return 1;
    int rank = gw_comm_rank(comm);
    if (!sum_ok(comm)) {
        printf("rank %d: first allreduce failed\n", rank);
        return 1;
    }
    gw_status_t st = gw_comm_grow(comm, &grown);
    if (st != GW_OK || grown) {
        printf("rank %d: grow with nobody: %s, %s\n", rank, gw_status_name(st),
               grown ? "a new communicator" : "none");
        return 1;
    }
    printf("rank %d: grow with nobody: unchanged, sum %s\n", rank, sum_ok(comm) ? "ok" : "WRONG");
    gw_comm_t *cur = comm;
    if (strcmp(mode, "shrink") == 0 || strcmp(mode, "shrink0") == 0) {
        int victim = strcmp(mode, "shrink0") == 0 ? 0 : 2;
        if (rank == victim) {
            /* Long enough for the others to have finished the allreduce
             * above, even on a loaded machine. */
            usleep(500 * 1000);
            raise(SIGKILL);
        }
        int32_t one = 1, sum = 0;
        if (gw_allreduce(comm, &one, &sum, 1, GW_INT32, GW_SUM) == GW_OK) {
            printf("rank %d: the allreduce succeeded without rank %d\n", rank, victim);
            return 1;
        }
        if ((st = gw_comm_shrink(comm, &shrunk)) != GW_OK) {
            printf("rank %d: shrink %s\n", rank, gw_status_name(st));
            return 1;
        }
        printf("rank %d: shrank to %d ranks\n", rank, gw_comm_size(shrunk));
        cur = shrunk;
    }
    pid_t bad = -1, forger = -1, good = -1;
    int rc = 0, grows = 0, waiting = -1, bad_rc = 0, forger_rc = 0;
    if ((st = gw_comm_joiners(cur, &waiting)) != GW_OK || waiting != 0) {
        printf("rank %d: joiners before anyone came: %s, %d\n", rank, gw_status_name(st), waiting);
        return 1;
    }
    gw_comm_t *sub = NULL;
    if ((st = gw_comm_split(cur, 0, 0, &sub)) != GW_OK ||
        gw_comm_joiners(sub, &waiting) != GW_ERR_UNSUPPORTED ||
        gw_comm_joiners(NULL, &waiting) != GW_ERR_INVALID_ARG ||
        gw_comm_joiners(cur, NULL) != GW_ERR_INVALID_ARG) {
        printf("rank %d: gw_comm_joiners on a sub-communicator or NULL was not refused\n", rank);
        return 1;
    }
    gw_comm_destroy(sub);
    if (gw_comm_rank(cur) == 0) {
        if (strcmp(mode, "badtoken") == 0) {
            /* Refused, so never counted: both are done before the count. */
            bad = start_joiner("not-the-job-token", "GW_ERR_AUTH");
            forger = start_joiner(NULL, "forge");
            bad_rc = joiner_status(bad);
            forger_rc = joiner_status(forger);
            gw_comm_joiners(cur, &waiting);
            printf("rank 0: joiners %d after the refused ones\n", waiting);
            rc |= waiting != 0;
        }
        good = start_joiner(NULL, "ok");
        /* The referee counts it once it proved the token: well within the
         * members' grow window (GW_TIMEOUT_MS), which they wait in. */
        for (int i = 0; i < 500 && gw_comm_joiners(cur, &waiting) == GW_OK && waiting == 0; i++)
            usleep(10 * 1000);
        printf("rank 0: joiners %d once it proved the token\n", waiting);
        rc |= waiting != 1;
    } else {
        gw_comm_joiners(cur, &waiting);
        printf("rank %d: joiners %d (not rank 0)\n", rank, waiting);
        rc |= waiting != 0;
    }
    while (!grown && grows < MAX_GROWS) {
        usleep(200 * 1000);
        grows++;
        if ((st = gw_comm_grow(cur, &grown)) != GW_OK) {
            printf("rank %d: grow %s\n", rank, gw_status_name(st));
            return 1;
        }
    }
    if (!grown) {
        printf("rank %d: nobody joined in %d grows\n", rank, grows);
        rc = 1;
    } else {
        char who[16];
        snprintf(who, sizeof(who), "%d", rank);
        rc = check_grown(grown, who, rank);
    }
    if (bad > 0 && bad_rc != 0) {
        printf("rank 0: the joiner with another token did not get GW_ERR_AUTH\n");
        rc = 1;
    }
    if (forger > 0 && forger_rc != 0) {
        printf("rank 0: the forger was not refused with GW_ERR_AUTH\n");
        rc = 1;
    }
    if (good > 0 && joiner_status(good) != 0) {
        printf("rank 0: the joiner failed\n");
        rc = 1;
    }
    gw_comm_destroy(grown);
    gw_comm_destroy(shrunk);
    gw_comm_destroy(comm);
    return rc;
}
