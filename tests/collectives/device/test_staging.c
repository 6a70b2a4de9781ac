/*
 * test_staging.c - the staging pipeline's logic on one rank, against the
 * host copy engine, whose copies run only when an event behind them is
 * waited for: chunk boundaries (a count not divisible by the chunk, smaller
 * than one chunk, zero), ordering (after the caller's stream; a pinned slot
 * reused only after its host-to-device copy finished; copies completing out
 * of order), overlap (a chunk's collective runs before the last chunk's
 * device-to-host copy finished, read from the engine's log), failed copies,
 * GW_CUDA_CHUNK's parsing, and what happens without the plugin: a declared
 * device buffer is GW_ERR_UNSUPPORTED naming what is missing, host buffers
 * work as ever, and the info report says why. A real GPU's test skips here
 * with the reason.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"
#include "gradwire.h"
#include "support/fd_count.h"
#include "support/log_capture.h"

#define CHUNK 4096
#define CHUNK_ELEMS (CHUNK / 4)

typedef struct one {
    gw_comm_t *comm;
    gw_copy_engine_t eng;
    float *dev; /* declared device memory: 2 x 16384 floats */
} one_t;

static one_t one_rank(const gw_host_engine_opts_t *opts)
{
    one_t o = {0};
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    setenv("GW_CUDA_CHUNK", "4096", 1);
    unsetenv("GW_TRANSPORT");
    cr_assert_eq(gw_comm_init_env(&o.comm), GW_OK);
    gw_host_engine_opts_t none = {0};
    cr_assert_eq(gw__host_engine_create(opts ? opts : &none, &o.eng), GW_OK);
    o.dev = calloc(2 * 16384, sizeof(float));
    cr_assert_not_null(o.dev);
    cr_assert_eq(gw__host_engine_declare(&o.eng, o.dev, 2 * 16384 * sizeof(float), 0), GW_OK);
    gw__comm_set_copy_engine(o.comm, &o.eng);
    return o;
}

static void one_done(one_t *o)
{
    gw_comm_destroy(o->comm);
    free(o->dev);
}

static size_t count_ops(gw_copy_engine_t *eng, gw_host_op_t op, size_t *last_len)
{
    const gw_host_log_entry_t *l;
    size_t n, k = 0;
    gw__host_engine_log(eng, &l, &n);
    for (size_t i = 0; i < n; i++)
        if (l[i].op == op) {
            k++;
            if (last_len)
                *last_len = l[i].len;
        }
    return k;
}

Test(staging, chunk_boundaries)
{
    static const size_t counts[] = {0, 1, 1023, 1024, 1025, 3000, 3072, 16384};
    for (size_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++) {
        one_t o = one_rank(NULL);
        size_t n = counts[t];
        for (size_t i = 0; i < n; i++)
            o.dev[i] = (float)i + 0.5f;
        cr_assert_eq(gw_allreduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_SUM), GW_OK);
        cr_expect_arr_eq(o.dev, o.dev + 16384, n * sizeof(float), "count %zu", n);
        if (n < 16384)
            cr_expect_eq(o.dev[16384 + n], 0.0f, "count %zu: written past the end", n);
        size_t want = (n + CHUNK_ELEMS - 1) / CHUNK_ELEMS, last = 0;
        size_t tail = n % CHUNK_ELEMS ? n % CHUNK_ELEMS : CHUNK_ELEMS;
        cr_expect_eq(count_ops(&o.eng, GW_HOST_ISSUE_D2H, &last), want, "count %zu: D2H", n);
        if (want)
            cr_expect_eq(last, tail * 4, "count %zu: the last chunk is %zu bytes", n, last);
        cr_expect_eq(count_ops(&o.eng, GW_HOST_ISSUE_H2D, &last), want, "count %zu: H2D", n);
        if (want)
            cr_expect_eq(last, tail * 4, "count %zu: the last chunk back is %zu bytes", n, last);
        one_done(&o);
    }
}

/* Chunks differ, so a slot overwritten before its copy back finished puts
 * a later chunk's data in an earlier chunk's place. */
Test(staging, slots_are_reused_only_after_their_copy_back)
{
    one_t o = one_rank(NULL);
    size_t n = 10 * CHUNK_ELEMS + 77;
    for (size_t i = 0; i < n; i++)
        o.dev[i] = (float)(i % 4099) - 2000.0f;
    cr_assert_eq(gw_allreduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_MAX), GW_OK);
    for (size_t i = 0; i < n; i++)
        if (o.dev[16384 + i] != o.dev[i])
            cr_assert_fail("element %zu (chunk %zu) is %g, not %g", i, i / CHUNK_ELEMS,
                           o.dev[16384 + i], o.dev[i]);
    one_done(&o);
}

/* The engine completes the H2D stream only when it is waited for, so later
 * chunks' copies down finish before earlier chunks' copies up (out of
 * order), and chunk 0's collective (then its copy up is issued) comes
 * before the last chunk's copy down finished: copy and wire overlap. */
Test(staging, copies_overlap_the_collectives_and_complete_out_of_order)
{
    one_t o = one_rank(NULL);
    size_t n = 6 * CHUNK_ELEMS;
    for (size_t i = 0; i < n; i++)
        o.dev[i] = (float)i;
    cr_assert_eq(gw_allreduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_SUM), GW_OK);
    cr_expect_arr_eq(o.dev, o.dev + 16384, n * sizeof(float));
    const gw_host_log_entry_t *l;
    size_t nl;
    gw__host_engine_log(&o.eng, &l, &nl);
    long first_h2d_issue = -1, last_d2h_done = -1, first_h2d_done = -1, d2h_done_after = 0;
    for (size_t i = 0; i < nl; i++) {
        if (l[i].op == GW_HOST_ISSUE_H2D && first_h2d_issue < 0)
            first_h2d_issue = (long)i;
        if (l[i].op == GW_HOST_DONE_D2H)
            last_d2h_done = (long)i;
        if (l[i].op == GW_HOST_DONE_H2D && first_h2d_done < 0)
            first_h2d_done = (long)i;
    }
    for (size_t i = (size_t)(first_h2d_issue < 0 ? 0 : first_h2d_issue); i < nl; i++)
        if (l[i].op == GW_HOST_DONE_D2H && (first_h2d_done < 0 || (long)i < first_h2d_done))
            d2h_done_after++;
    cr_assert(first_h2d_issue >= 0 && last_d2h_done >= 0);
    cr_expect_lt(first_h2d_issue, last_d2h_done,
                 "chunk 0 went up (log %ld) only after the last chunk came down (log %ld): no "
                 "overlap",
                 first_h2d_issue, last_d2h_done);
    cr_expect_gt(d2h_done_after, 0,
                 "no later chunk's copy down finished before chunk 0's copy up did");
    one_done(&o);
}

/* The caller's stream holds a copy that writes the input: the pipeline
 * must wait for it (through an event on that stream) before copying. */
Test(staging, copies_wait_for_the_callers_stream)
{
    one_t o = one_rank(NULL);
    size_t n = 3 * CHUNK_ELEMS + 5;
    float *src = malloc(n * sizeof(float));
    cr_assert_not_null(src);
    for (size_t i = 0; i < n; i++)
        src[i] = (float)(3 * i + 1);
    void *user;
    cr_assert_eq(o.eng.ops->stream_create(o.eng.impl, &user), GW_OK);
    cr_assert_eq(gw_comm_set_cuda_stream(o.comm, user), GW_OK);
    /* "The kernel that produced the data": a copy queued on the stream. */
    cr_assert_eq(o.eng.ops->copy_h2d(o.eng.impl, o.dev, src, n * sizeof(float), user), GW_OK);
    cr_assert_eq(gw_allreduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_SUM), GW_OK);
    cr_expect_arr_eq(o.dev + 16384, src, n * sizeof(float),
                     "the staging copies ran before the caller's stream's work");
    o.eng.ops->stream_destroy(o.eng.impl, user);
    free(src);
    one_done(&o);
}

/* Every chunked kind, blocking and not, with query_delay (events report
 * "not yet" first). */
Test(staging, broadcast_reduce_and_non_blocking_forms)
{
    gw_host_engine_opts_t opts = {.query_delay = 3};
    one_t o = one_rank(&opts);
    size_t n = 2 * CHUNK_ELEMS + 9;
    for (size_t i = 0; i < n; i++)
        o.dev[i] = (float)i * 0.25f;
    gw_handle_t *h;
    cr_assert_eq(gw_broadcast(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, 0), GW_OK);
    cr_expect_arr_eq(o.dev, o.dev + 16384, n * sizeof(float));
    memset(o.dev + 16384, 0, n * sizeof(float));
    cr_assert_eq(gw_ireduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_SUM, 0, &h), GW_OK);
    cr_assert_eq(gw_wait(h), GW_OK);
    cr_expect_arr_eq(o.dev, o.dev + 16384, n * sizeof(float));
    memset(o.dev + 16384, 0, n * sizeof(float));
    cr_assert_eq(gw_iallreduce(o.comm, o.dev, o.dev + 16384, n, GW_FLOAT32, GW_AVG, &h), GW_OK);
    cr_assert_eq(gw_wait(h), GW_OK);
    cr_expect_arr_eq(o.dev, o.dev + 16384, n * sizeof(float));
    one_done(&o);
}

Test(staging, a_failed_copy_is_the_calls_error_and_names_the_engines_reason)
{
    for (int k = 1; k <= 6; k++) {
        gw_host_engine_opts_t opts = {.fail_copy = k};
        one_t o = one_rank(&opts);
        gw_logger_t lg = capture_logger(GW_LOG_WARN);
        gw_logger_t saved = o.comm->log;
        o.comm->log = lg;
        gw_status_t st =
            gw_allreduce(o.comm, o.dev, o.dev + 16384, 3 * CHUNK_ELEMS, GW_FLOAT32, GW_SUM);
        cr_expect_eq(st, GW_ERR_SYSTEM, "copy %d failed: %s", k, gw_status_str(st));
        char *text = captured(&lg);
        cr_expect(strstr(text, "copy #") && strstr(text, "failed (injected)"),
                  "copy %d: the error does not say which copy failed: %s", k, text);
        cr_expect_eq(gw_barrier(o.comm), GW_ERR_SYSTEM, "the communicator is not failed");
        free(text);
        fclose(lg.file);
        o.comm->log = saved;
        one_done(&o);
    }
}

Test(staging, chunk_size_is_parsed_strictly)
{
    static const char *const bad[] = {"4k", "4096 ", "100", "-1", "0x1000", "", "2147483648"};
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gw_comm_t *comm = NULL;
        setenv("GW_CUDA_CHUNK", bad[i], 1);
        cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "GW_CUDA_CHUNK='%s'", bad[i]);
        gw_comm_destroy(comm);
    }
    gw_comm_t *comm = NULL;
    setenv("GW_CUDA_CHUNK", "65536", 1);
    cr_assert_eq(gw_comm_init_env(&comm), GW_OK);
    cr_expect_eq(comm->device->chunk_bytes, 65536);
    gw_comm_destroy(comm);
    unsetenv("GW_CUDA_CHUNK");
}

/* No plugin: host buffers as ever; a declared device buffer fails with
 * GW_ERR_UNSUPPORTED naming the missing plugin. */
Test(staging, without_the_plugin_a_device_buffer_is_a_clear_error)
{
    setenv("GW_CUDA_PLUGIN", "/nonexistent/libgradwire-cuda.so", 1);
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    unsetenv("GW_CUDA_CHUNK");
    gw_comm_t *comm = NULL;
    cr_assert_eq(gw_comm_init_env(&comm), GW_OK);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    cr_expect_eq(gw_allreduce(comm, x, y, 8, GW_FLOAT32, GW_SUM), GW_OK);
    cr_expect_arr_eq(x, y, sizeof(x));
    gw_logger_t lg = capture_logger(GW_LOG_WARN);
    gw_logger_t saved = comm->log;
    comm->log = lg;
    cr_assert_eq(gw_comm_set_buffers(comm, GW_BUFFERS_DEVICE), GW_OK);
    cr_expect_eq(gw_allreduce(comm, x, y, 8, GW_FLOAT32, GW_SUM), GW_ERR_UNSUPPORTED);
    char *text = captured(&lg);
    cr_expect(strstr(text, "device buffers declared") && strstr(text, "missing"),
              "the error does not say what is missing: %s", text);
    free(text);
    fclose(lg.file);
    comm->log = saved;
    gw_comm_destroy(comm);
    cr_expect_eq(gw_comm_set_buffers(NULL, GW_BUFFERS_HOST), GW_ERR_INVALID_ARG);
    unsetenv("GW_CUDA_PLUGIN");
}

Test(staging, info_says_why_the_plugin_did_not_load)
{
    gw_cuda_info_t ci;
    setenv("GW_CUDA_PLUGIN", "/nonexistent/libgradwire-cuda.so", 1);
    cr_assert_eq(gw_cuda_info(&ci), GW_OK);
    cr_expect_eq(ci.loaded, 0);
    cr_expect(strstr(ci.why, "missing") && strstr(ci.why, "/nonexistent"), "why: %s", ci.why);
    char report[16384];
    cr_assert_eq(gw_node_probe(report, sizeof(report)), GW_OK);
    cr_expect(strstr(report, "cuda\tplugin\t"), "no cuda line in the report:\n%s", report);
    unsetenv("GW_CUDA_PLUGIN");
    cr_expect_eq(gw_cuda_info(NULL), GW_ERR_INVALID_ARG);
}

/* The built plugin on this machine: without a driver it names the CUDA
 * error; with a GPU it loads and sees a device (then the GPU check runs). */
Test(staging, the_built_plugin_names_the_missing_driver)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/libgradwire-cuda.so", GW_BUILD_DIR);
    if (access(path, F_OK) != 0)
        cr_skip_test("no CUDA part in this build (%s): GW_CUDA=OFF or no CUDA toolkit", path);
    setenv("GW_CUDA_PLUGIN", path, 1);
    gw_cuda_info_t ci;
    cr_assert_eq(gw_cuda_info(&ci), GW_OK);
    unsetenv("GW_CUDA_PLUGIN");
    /* A plugin left in the build directory by an earlier configuration with
     * CUDA does not make this library one built with it. */
    if (!ci.built)
        cr_skip_test("no CUDA part in this build (the library was configured with GW_CUDA=OFF; "
                     "%s is left from an earlier configuration)",
                     path);
    if (ci.loaded) {
        cr_expect_gt(ci.device_count, 0);
        cr_skip_test("a GPU is here (%s): the no-driver path cannot be seen", ci.devices[0]);
    }
    cr_expect(strstr(ci.why, "libcuda.so.1") || strstr(ci.why, "cudaErrorInsufficientDriver") ||
                  strstr(ci.why, "cudaErrorNoDevice") || strstr(ci.why, "libcudart"),
              "why: %s", ci.why);
    /* Without the driver's library, the answer says so, and neither the
     * plugin nor the CUDA libraries it links (cudart, cuBLAS: 0.4 s of CPU
     * to load) were loaded to find it out. */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver)
        dlclose(driver);
    else {
        cr_expect(strstr(ci.why, "libcuda.so.1"), "no driver, but why: %s", ci.why);
        const char *const libs[] = {"libgradwire-cuda", "libcudart", "libcublas"};
        for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
            cr_expect_eq(count_maps_of(libs[i]), 0, "%s loaded without a driver", libs[i]);
    }
}
