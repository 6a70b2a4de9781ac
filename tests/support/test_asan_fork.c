/*
 * test_asan_fork: a sanitized test binary's forked children do not
 * deadlock in AddressSanitizer's allocator (support/asan_fork.c).
 *
 * Three threads allocate, each from its own size class, until the
 * allocator has mapped new memory for each many times (it maps under the
 * class's lock), while this thread forks; each child then allocates from
 * all three classes and exits. Without the fork handlers most children of
 * a build with GCC 12's ASan wait forever on a lock held, in the parent,
 * by a thread they do not have (seen: 5 of 5 forks on this machine's
 * kind). A child still alive after 10 s, for 900 allocations, is counted
 * as deadlocked and killed.
 *
 * The handlers must also be the last to run before fork(): a library's
 * own prepare handler may need the runtime's locks. OpenBLAS's joins its
 * worker threads, whose exit takes ASan's thread registry; with these
 * handlers registered after it, fork() never returned (CI's sanitized
 * trainer tests). This binary links OpenBLAS, so that mistake hangs its
 * Criterion runner at the first fork (ctest's timeout fails it; seen);
 * the case below forks beside a pool that a product has just used.
 */
#include <cblas.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)

int gw_test_asan_fork_guarded(void); /* support/asan_fork.c */

enum { CLASSES = 3, PER_THREAD = 1 << 16, PER_CHILD = 300, MAX_FORKS = 40 };
static const size_t class_size[CLASSES] = {152, 500, 2000};

struct churn {
    size_t size;
    void **blocks;
    atomic_int *finished;
};

static void *churn_fn(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < PER_THREAD; i++)
        c->blocks[i] = malloc(c->size);
    atomic_fetch_add(c->finished, 1);
    return NULL;
}

static void child_allocates(void)
{
    static void *kept[CLASSES][PER_CHILD];
    for (int c = 0; c < CLASSES; c++)
        for (int k = 0; k < PER_CHILD; k++)
            kept[c][k] = malloc(class_size[c]);
    _exit(kept[CLASSES - 1][PER_CHILD - 1] ? 0 : 1);
}

/* 1 when the child exited within 10 s, 0 when it was killed. */
static int child_finishes(pid_t pid)
{
    struct timespec tick = {0, 1000000};
    for (int ms = 0; ms < 10000; ms++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1;
        nanosleep(&tick, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 0;
}

Test(asan_fork, children_of_a_threaded_parent_can_allocate, .timeout = 600)
{
    cr_assert(gw_test_asan_fork_guarded(),
              "support/asan_fork.c found no lock functions in libasan.so's symbol table: "
              "a stripped runtime? Forks from Criterion's threaded runner may deadlock");
    atomic_int finished = 0;
    pthread_t threads[CLASSES];
    struct churn churns[CLASSES];
    for (int c = 0; c < CLASSES; c++) {
        churns[c] = (struct churn){class_size[c], calloc(PER_THREAD, sizeof(void *)), &finished};
        cr_assert_not_null(churns[c].blocks);
        cr_assert_eq(pthread_create(&threads[c], NULL, churn_fn, &churns[c]), 0);
    }
    int forks = 0, stuck = 0;
    while (atomic_load(&finished) < CLASSES && forks < MAX_FORKS) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0)
            child_allocates();
        forks++;
        stuck += !child_finishes(pid);
        if (stuck)
            break;
    }
    for (int c = 0; c < CLASSES; c++) {
        pthread_join(threads[c], NULL);
        for (int i = 0; i < PER_THREAD; i++)
            free(churns[c].blocks[i]);
        free(churns[c].blocks);
    }
    cr_assert_eq(stuck, 0,
                 "fork %d: the child was still allocating after 10 s (deadlocked on a lock of "
                 "ASan's allocator that a thread of the parent held at the fork)",
                 forks);
    cr_log_info("%d forks while 3 threads allocated: every child allocated and exited", forks);
}

/* OpenBLAS with worker threads (its prepare handler shuts them down at
 * every fork): a fork, a child that allocates, and the pool back for the
 * next product. A deadlock in the parent's prepare handlers fails by the
 * Criterion timeout. */
Test(asan_fork, a_library_that_joins_its_threads_before_fork, .timeout = 60)
{
    cr_assert(gw_test_asan_fork_guarded());
    enum { DIM = 256 };
    float *a = calloc(DIM * DIM, sizeof(float)), *c = calloc(DIM * DIM, sizeof(float));
    cr_assert(a && c);
    for (int i = 0; i < DIM * DIM; i++)
        a[i] = (float)(i % 7);
    openblas_set_num_threads(2);
    for (int round = 0; round < 3; round++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, DIM, DIM, DIM, 1.0f, a, DIM, a, DIM,
                    0.0f, c, DIM);
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0)
            child_allocates();
        cr_assert(child_finishes(pid), "fork %d: the child was still allocating after 10 s",
                  round + 1);
    }
    free(a);
    free(c);
}

#else

Test(asan_fork, children_of_a_threaded_parent_can_allocate)
{
    cr_skip_test("a build without AddressSanitizer: the deadlock this guards against is ASan's");
}

#endif
