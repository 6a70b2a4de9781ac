/*
 * test_bootstrap_faults.c - the bootstrap when ranks misbehave: wrong tokens
 * and forged proofs, strangers, silent connections, no root, duplicate ranks
 * and sizes, missing ranks, ranks that leave and rejoin, a busy root
 * address, ranks and roots that die before the all-gather. The harness is
 * bootstrap_test_util.h.
 */
#include "bootstrap_test_util.h"

/* ---- tests --------------------------------------------------------------- */

Test(bootstrap, wrong_token_is_rejected_and_the_job_goes_on, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "right", 10000);
    int root = spawn(&j, &s0);
    spec_t bad = rank_spec(1, 2, "wrong", 5000);
    int b = spawn(&j, &bad);
    wait_slot(&j, b, 10000);
    cr_assert_eq(j.res[b].open_st, GW_ERR_AUTH, "wrong token gave %s",
                 gw_status_name((gw_status_t)j.res[b].open_st));
    assert_log(&j, b, "does not match this rank's job token");
    spec_t good = rank_spec(1, 2, "right", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    assert_log(&j, root, "wrong job token");
    assert_log(&j, root, "dropped connection from 127.0.0.1:");
    job_fini(&j);
}

Test(bootstrap, forged_proof_gets_reject_auth, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 10000);
    int root = spawn(&j, &s0);
    /* A peer that verifies the root but then sends a wrong proof. */
    int fd = connect_retry(j.port, 5000);
    gw_bs_reject_t rej;
    cr_assert_eq(fake_rank(fd, "tok", 1, 2, 1, &rej), GW_ERR_AUTH, "reason: %s", rej.reason);
    wait_closed(fd, 5000);
    close(fd);
    /* An authenticated peer claiming a rank outside the job. */
    fd = connect_retry(j.port, 5000);
    cr_assert_eq(fake_rank(fd, "tok", 5, 2, 0, &rej), GW_ERR_CONFIG);
    cr_assert(strstr(rej.reason, "rank 5") != NULL, "reason: %s", rej.reason);
    close(fd);
    spec_t good = rank_spec(1, 2, "tok", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    assert_log(&j, root, "wrong job token");
    job_fini(&j);
}

Test(bootstrap, strangers_do_not_stop_the_job, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 10000);
    int root = spawn(&j, &s0);

    int garbage = connect_retry(j.port, 5000);
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    cr_assert_eq(write(garbage, http, strlen(http)), (ssize_t)strlen(http));
    wait_closed(garbage, 5000); /* dropped for its bad magic */
    close(garbage);

    int silent = connect_retry(j.port, 5000); /* sends nothing; stays open */

    int half = connect_retry(j.port, 5000);
    gw_bs_hello_t hello = {.rank = 1, .size = 3};
    memset(hello.client_nonce, 0, sizeof(hello.client_nonce));
    uint8_t m[GW_BS_HELLO_LEN];
    gw__bs_encode_hello(&hello, m);
    cr_assert_eq(write(half, m, 20), 20);
    shutdown(half, SHUT_WR); /* closes half way through the hello */
    wait_closed(half, 5000);
    close(half);

    int empty = connect_retry(j.port, 5000); /* connects and leaves at once */
    close(empty);

    spec_t s1 = rank_spec(1, 3, "tok", 10000), s2 = rank_spec(2, 3, "tok", 10000);
    int a = spawn(&j, &s1), b = spawn(&j, &s2);
    wait_all(&j, 15000);
    close(silent);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_completed(&j, b, 1);
    int slots[] = {root, a, b};
    assert_same_job_id(&j, slots, 3);
    assert_log(&j, root, "bad magic");
    assert_log(&j, root, "closed during the handshake");
    job_fini(&j);
}

Test(bootstrap, silent_connection_dropped_after_handshake_timeout, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 6000); /* handshake limit: 3000 ms */
    int root = spawn(&j, &s0);
    int silent = connect_retry(j.port, 5000);
    long long waited = wait_closed(silent, 5500);
    close(silent);
    cr_assert_geq(waited, 2000, "dropped after %lld ms, before its handshake deadline", waited);
    spec_t s1 = rank_spec(1, 2, "tok", 5000);
    int a = spawn(&j, &s1);
    wait_all(&j, 10000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_log(&j, root, "no complete handshake within 3000 ms");
    job_fini(&j);
}

Test(bootstrap, no_root_times_out, .timeout = 15)
{
    job_t j;
    job_init(&j);
    spec_t s = rank_spec(1, 2, "tok", 500);
    int a = spawn(&j, &s);
    wait_all(&j, 5000);
    cr_assert_eq(j.res[a].open_st, GW_ERR_TIMEOUT, "got %s",
                 gw_status_name((gw_status_t)j.res[a].open_st));
    cr_assert_geq(j.res[a].elapsed_ms, 450, "gave up after %lld ms", j.res[a].elapsed_ms);
    cr_assert_lt(j.res[a].elapsed_ms, 3000, "took %lld ms", j.res[a].elapsed_ms);
    assert_log(&j, a, j.root);
    assert_log(&j, a, "could not connect to the root");
    job_fini(&j);
}

Test(bootstrap, duplicate_rank_is_rejected, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, NULL, 10000);
    s0.insecure = 1;
    int root = spawn(&j, &s0);
    spec_t s1 = rank_spec(1, 3, NULL, 10000);
    s1.insecure = 1;
    int a = spawn(&j, &s1), b = spawn(&j, &s1);
    /* Whichever rank 1 comes second is refused at once; the first waits. */
    int first = -1;
    int64_t deadline = gw__now_ms() + 10000;
    while (first < 0 && gw__now_ms() < deadline) {
        if (waitpid(j.pids[a], NULL, WNOHANG) == j.pids[a])
            first = a;
        else if (waitpid(j.pids[b], NULL, WNOHANG) == j.pids[b])
            first = b;
        else
            usleep(2000);
    }
    cr_assert_geq(first, 0, "neither rank 1 finished");
    j.pids[first] = 0;
    cr_assert_eq(j.res[first].open_st, GW_ERR_CONFIG, "duplicate got %s",
                 gw_status_name((gw_status_t)j.res[first].open_st));
    assert_log(&j, first, "duplicate rank");
    spec_t s2 = rank_spec(2, 3, NULL, 10000);
    s2.insecure = 1;
    int c = spawn(&j, &s2);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, first == a ? b : a, 1);
    assert_completed(&j, c, 1);
    assert_log(&j, root, "unauthenticated"); /* no token: warned about */
    job_fini(&j);
}

Test(bootstrap, size_mismatch_is_rejected, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 10000);
    int root = spawn(&j, &s0);
    spec_t bad = rank_spec(1, 3, "tok", 5000);
    int b = spawn(&j, &bad);
    wait_slot(&j, b, 10000);
    cr_assert_eq(j.res[b].open_st, GW_ERR_CONFIG);
    assert_log(&j, b, "size mismatch");
    spec_t good = rank_spec(1, 2, "tok", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    job_fini(&j);
}

Test(bootstrap, root_timeout_names_missing_ranks, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 1500);
    int root = spawn(&j, &s0);
    wait_listening(j.port);
    spec_t s1 = rank_spec(1, 3, "tok", 10000);
    int a = spawn(&j, &s1);
    wait_all(&j, 12000);
    cr_assert_eq(j.res[root].open_st, GW_ERR_TIMEOUT);
    assert_log(&j, root, "2 of 3 ranks joined");
    assert_log(&j, root, "missing rank 2");
    /* Rank 1 learns at once that the root gave up, without its own
     * timeout, and from the root which rank is missing. */
    cr_assert_eq(j.res[a].open_st, GW_ERR_TIMEOUT, "rank 1 got %s",
                 gw_status_name((gw_status_t)j.res[a].open_st));
    cr_assert_lt(j.res[a].elapsed_ms, 9000);
    assert_log(&j, a, "missing rank 2");
    job_fini(&j);
}

Test(bootstrap, rank_that_leaves_before_the_start_can_rejoin, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 10000);
    int root = spawn(&j, &s0);
    wait_listening(j.port);
    spec_t early = rank_spec(1, 3, "tok", 500); /* joins, then gives up waiting */
    int e = spawn(&j, &early);
    wait_slot(&j, e, 5000);
    cr_assert_eq(j.res[e].open_st, GW_ERR_TIMEOUT);
    spec_t s1 = rank_spec(1, 3, "tok", 10000), s2 = rank_spec(2, 3, "tok", 10000);
    int a = spawn(&j, &s1), b = spawn(&j, &s2);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_completed(&j, b, 1);
    assert_log(&j, root, "rank 1 disconnected before every rank joined");
    job_fini(&j);
}

Test(bootstrap, root_address_in_use, .timeout = 10)
{
    job_t j;
    job_init(&j);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)j.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    spec_t s0 = rank_spec(0, 2, "tok", 2000);
    int root = spawn(&j, &s0);
    wait_all(&j, 5000);
    close(fd);
    cr_assert_eq(j.res[root].open_st, GW_ERR_SYSTEM);
    assert_log(&j, root, "cannot bind the root address");
    assert_log(&j, root, "Address already in use");
    job_fini(&j);
}

Test(bootstrap, rank_dies_before_allgather, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[4];
    for (int r = 0; r < 4; r++) {
        spec_t s = rank_spec(r, 4, "tok", 8000);
        s.die_after_open = r == 3;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].open_st, GW_OK);
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_REMOTE, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        assert_log(&j, slots[r], "rank 3");
    }
    job_fini(&j);
}

Test(bootstrap, root_dies_before_allgather, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[3];
    for (int r = 0; r < 3; r++) {
        spec_t s = rank_spec(r, 3, "tok", 8000);
        s.die_after_open = r == 0;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 1; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_REMOTE, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        cr_assert_lt(j.res[slots[r]].elapsed_ms, 8000);
        assert_log(&j, slots[r], "rank 0");
    }
    job_fini(&j);
}

/* Rank 0 starts its all-gather 2.5 s after the others (busy opening a
 * transport, as in a slow VM), and rank 2 never sends its block. Rank 0
 * gives up on rank 2 at its own deadline, 2.5 s after the others' own
 * deadlines: ranks 1 and 3 must still be waiting then (rank 0's
 * GATHER_START told them how long it waits) and blame rank 2 as rank 0
 * does, not rank 0. With a fixed margin of 1 s after their own deadline,
 * they gave up first and blamed rank 0. */
Test(bootstrap, a_late_root_still_gives_the_verdict, .timeout = 40)
{
    job_t j;
    job_init(&j);
    int slots[4];
    for (int r = 0; r < 4; r++) {
        spec_t s = rank_spec(r, 4, "tok", 3000);
        s.gather_delay_ms = r == 0 ? 2500 : r == 2 ? 12000 : 0;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 30000);
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        const result_t *res = &j.res[slots[r]];
        cr_assert_eq(res->open_st, GW_OK);
        cr_expect_neq(res->gather_st[0], GW_OK, "rank %d's all-gather succeeded", r);
        cr_expect_eq(res->gather_culprit[0], 2, "rank %d blames rank %d after %lld ms", r,
                     res->gather_culprit[0], res->gather_ms[0]);
    }
    assert_log(&j, slots[0], "waiting for the data of rank 2");
    job_fini(&j);
}
