/* test_bootstrap.c - the bootstrap between real processes on 127.0.0.1:
 * joins of 1 to 8 ranks over IPv4 and IPv6, all-gathers, bad parameters,
 * tokens, and all-gathers that disagree. Ranks are forked children that
 * report through shared memory and log to files that the tests read (the
 * harness: bootstrap_test_util.h); what goes wrong when ranks misbehave is
 * in test_bootstrap_faults.c. Every case must end in an error or a completed
 * job, never a hang. */
#include "bootstrap_test_util.h"

/* ---- tests --------------------------------------------------------------- */

Test(bootstrap, one_rank_needs_no_network, .timeout = 10)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    gw_bootstrap_params_t p = {.rank = 0, .size = 1, .root = NULL, .timeout_ms = 100, .log = &lg};
    gw_bootstrap_t *bs = NULL;
    cr_assert_eq(gw__bootstrap_open(&p, &bs), GW_OK);
    uint8_t mine[5] = {1, 2, 3, 4, 5}, all[5] = {0};
    cr_assert_eq(gw__bootstrap_allgather(bs, mine, sizeof(mine), all), GW_OK);
    cr_assert_arr_eq(all, mine, sizeof(mine));
    cr_assert_eq(gw__bootstrap_allgather(bs, all, sizeof(all), all), GW_OK); /* in place */
    cr_assert_arr_eq(all, mine, sizeof(mine));
    struct sockaddr_storage ss;
    socklen_t sl;
    cr_assert_eq(gw__bootstrap_local_addr(bs, &ss, &sl), GW_ERR_NOT_FOUND);
    uint8_t id[16], zero[16] = {0};
    gw__bootstrap_job_id(bs, id);
    cr_assert(memcmp(id, zero, sizeof(id)) != 0);
    gw__bootstrap_close(bs);
    gw__bootstrap_close(NULL);
}

Test(bootstrap, bad_parameters, .timeout = 10)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    gw_bootstrap_t *bs = NULL;
    gw_bootstrap_params_t p = {
        .rank = 0, .size = 2, .root = "127.0.0.1:1", .timeout_ms = 100, .log = &lg};
    cr_assert_eq(gw__bootstrap_open(NULL, &bs), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__bootstrap_open(&p, NULL), GW_ERR_INVALID_ARG);
    gw_bootstrap_params_t q = p;
    q.rank = 2;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.rank = -1;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.size = 0;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.timeout_ms = 0;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    static const char *const bad_roots[] = {"nonsense",   "host:",   ":80", "host:0",
                                            "host:65536", "[::1]80", NULL};
    for (int i = 0; bad_roots[i]; i++) {
        q = p;
        q.root = bad_roots[i];
        cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG, "root \"%s\" accepted",
                     bad_roots[i]);
    }
    q = p;
    q.root = NULL;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    cr_assert_null(bs, "output written on failure");
    cr_assert_eq(gw__bootstrap_allgather(NULL, NULL, 0, NULL), GW_ERR_INVALID_ARG);
}

static void join_n(int n, const char *host)
{
    job_t j;
    job_init(&j);
    job_root_at(&j, host);
    int slots[MAX_SLOTS];
    /* Start the root last, so the others go through connect retries. */
    for (int r = n - 1; r >= 0; r--) {
        spec_t s = rank_spec(r, n, "job-token", 10000);
        s.root = j.root;
        /* Transport-address sized, empty, and large enough to take several
         * partial reads and writes. */
        s.ngathers = 3;
        s.lens[0] = 128;
        s.lens[1] = 0;
        s.lens[2] = 200000;
        slots[r] = spawn(&j, &s);
        if (r == n - 1 && n > 1)
            usleep(30000);
    }
    wait_all(&j, 20000);
    for (int r = 0; r < n; r++) {
        assert_completed(&j, slots[r], 3);
        if (n > 1) {
            cr_assert_eq(j.res[slots[r]].local_st, GW_OK);
            cr_assert_str_eq(j.res[slots[r]].local_text, host, "rank %d local address %s", r,
                             j.res[slots[r]].local_text);
        }
    }
    assert_same_job_id(&j, slots, n);
    job_fini(&j);
}

Test(bootstrap, join_and_allgather_1, .timeout = 30) { join_n(1, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_2, .timeout = 30) { join_n(2, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_4, .timeout = 30) { join_n(4, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_8, .timeout = 40) { join_n(8, "127.0.0.1"); }

Test(bootstrap, join_over_ipv6, .timeout = 30)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        cr_skip_test("no IPv6 loopback on this host");
    join_n(3, "::1");
}

/* No token (NULL or empty alike), no job: each rank refuses at once,
 * saying how to give one, before any connection. */
Test(bootstrap, a_job_without_a_token_is_refused, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, NULL, 10000), s1 = rank_spec(1, 2, "", 10000);
    int root = spawn(&j, &s0), a = spawn(&j, &s1);
    wait_all(&j, 15000);
    int slots[2] = {root, a};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(j.res[slots[k]].open_st, GW_ERR_CONFIG, "rank %d: %s", k,
                     gw_status_name((gw_status_t)j.res[slots[k]].open_st));
        cr_assert_lt(j.res[slots[k]].elapsed_ms, 1000, "rank %d waited %lld ms", k,
                     j.res[slots[k]].elapsed_ms);
        assert_log(&j, slots[k], "no job token");
        assert_log(&j, slots[k], "GW_JOB_TOKEN_FILE");
        assert_log(&j, slots[k], "GW_INSECURE=1");
    }
    job_fini(&j);
}

/* GW_INSECURE=1 lets it run (NULL and empty tokens agree), and every rank
 * says, once, that anyone who reaches a port gets in. */
Test(bootstrap, insecure_runs_without_a_token_and_every_rank_warns, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, NULL, 10000), s1 = rank_spec(1, 2, "", 10000);
    s0.insecure = s1.insecure = 1;
    int root = spawn(&j, &s0), a = spawn(&j, &s1);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    int slots[2] = {root, a};
    for (int k = 0; k < 2; k++) {
        char path[128], log[1 << 14];
        log_path(&j, slots[k], path, sizeof(path));
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "%s: %m", path);
        size_t len = fread(log, 1, sizeof(log) - 1, f);
        fclose(f);
        log[len] = '\0';
        int n = 0;
        for (const char *p = log; (p = strstr(p, "anyone who can reach")); p++)
            n++;
        cr_assert_eq(n, 1, "rank %d warned %d times that it is unauthenticated:\n%s", k, n, log);
        cr_assert(strstr(log, "GW_INSECURE=1") != NULL, "rank %d: %s", k, log);
    }
    job_fini(&j);
}

Test(bootstrap, allgather_length_mismatch, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[3];
    for (int r = 0; r < 3; r++) {
        spec_t s = rank_spec(r, 3, "tok", 8000);
        s.lens[0] = r == 2 ? 64 : 128;
        s.ngathers = 2; /* the second call must fail the same way */
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].open_st, GW_OK);
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_MISMATCH, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        cr_assert_eq(j.res[slots[r]].gather_st[1], GW_ERR_MISMATCH, "rank %d: not sticky", r);
        assert_log(&j, slots[r], "length mismatch");
    }
    job_fini(&j);
}

Test(bootstrap, allgather_too_large_fails_everywhere, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 8000), s1 = rank_spec(1, 2, "tok", 8000);
    s1.lens[0] = GW_BS_DATA_RANK_MAX + 1;
    int root = spawn(&j, &s0), a = spawn(&j, &s1);
    wait_all(&j, 15000);
    cr_assert_eq(j.res[a].gather_st[0], GW_ERR_INVALID_ARG);
    /* Rank 0 is told instead of waiting for its timeout. */
    cr_assert_eq(j.res[root].gather_st[0], GW_ERR_REMOTE, "rank 0 got %s",
                 gw_status_name((gw_status_t)j.res[root].gather_st[0]));
    assert_log(&j, root, "rank 1 failed");
    job_fini(&j);
}
