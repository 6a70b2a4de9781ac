/*
 * test_info.c - `gradwire info`: what a rank would use here and why, run
 * as a user runs it, with the environment a user or a launcher sets.
 *   - a plain run: exit 0, shared memory and TCP usable, every part shown;
 *   - --json parses and carries the same findings;
 *   - malformed settings (GW_NSOCKS with a space, GW_DEBUG=LOUD, a rank
 *     variable that is no number, GW_SOCKET_IFNAME naming no interface):
 *     exit 1, the variable named;
 *   - the job token is never printed;
 *   - RDMA ports from a made-up sysfs (GW_IB_SYSFS): state, link layer,
 *     the non-zero GIDs with type and Ethernet device;
 *   - --env / -c lists the registry of variables with the values here
 *     (malformed ones marked, exit 1; the token never shown);
 *   - the generated pages docs/reference/environment.md and errors.md are
 *     exactly what --env-markdown and --errors-markdown print now.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gradwire.h"
#include "support/run.h"

#define GRADWIRE GW_BUILD_DIR "/gradwire"

static run_result_t info(const char *mode, char *const env[])
{
    char *argv[] = {GRADWIRE, "info", (char *)mode, NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(!r.timed_out && r.exited, "gradwire info did not finish:\n%s", r.output);
    return r;
}

Test(info, plain_run_says_what_it_would_use)
{
    run_result_t r = info(NULL, NULL);
    cr_expect_eq(r.status, 0, "exit %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "ok   shm"), "shared memory usable:\n%s", r.output);
    cr_expect(strstr(r.output, "ok   tcp"), "tcp usable:\n%s", r.output);
    cr_expect(strstr(r.output, "listening on"), "tcp says where it listens:\n%s", r.output);
    cr_expect(strstr(r.output, "  no   ib") || strstr(r.output, "  ok   ib"),
              "ib judged either way:\n%s", r.output);
    cr_expect(strstr(r.output, "\ninterfaces:\n") && strstr(r.output, "  lo "), "%s", r.output);
    cr_expect(strstr(r.output, "\nrdma ports (sysfs):\n"), "%s", r.output);
    cr_expect(strstr(r.output, "build type"), "%s", r.output);
    free(r.output);
}

Test(info, json_parses_and_carries_the_findings)
{
    char *env[] = {"GW_RANK=1", "GW_SIZE=4", "GW_ROOT=127.0.0.1:5000", "GW_SOCKET_IFNAME=lo", NULL};
    run_result_t r = info("--json", env);
    cr_assert_eq(r.status, 0, "exit %d:\n%s", r.status, r.output);
    char path[] = "/tmp/gw-info-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(r.output, f);
    fclose(f);
    char *py[] = {
        "/usr/bin/python3", "-c",
        "import json, sys\n"
        "d = json.load(open(sys.argv[1]))\n"
        "assert d['malformed_settings'] is False, d\n"
        "t = {f['name']: f['verdict'] for f in d['findings'] if f['section'] == 'transport' "
        "and f['verdict'] != 'info'}\n"
        "assert t['tcp'] == 'ok' and t['shm'] == 'ok', t\n"
        "l = [f for f in d['findings'] if f['section'] == 'launcher']\n"
        "assert l[0]['verdict'] == 'ok' and 'rank 1 of 4' in l[0]['text'], l\n"
        "assert 'root 127.0.0.1:5000' in l[0]['text'], l\n"
        "assert any(f['text'].find('interface lo') >= 0 for f in d['findings']), d\n"
        "assert d['environment']['GW_SOCKET_IFNAME'] == 'lo', d['environment']\n"
        "assert any(i['name'] == 'lo' and i['loopback'] for i in d['interfaces'])\n",
        path, NULL};
    run_result_t p = run_cmd(py, NULL, 30);
    unlink(path);
    cr_expect(p.exited && p.status == 0, "%s\n--- the JSON:\n%s", p.output, r.output);
    free(p.output);
    free(r.output);
}

static void malformed(char *setting, const char *named)
{
    char *env[] = {setting, NULL};
    run_result_t r = info(NULL, env);
    cr_expect_eq(r.status, 1, "%s: exit %d:\n%s", setting, r.status, r.output);
    cr_expect(strstr(r.output, named) && strstr(r.output, "ERR "), "%s not named as an error:\n%s",
              named, r.output);
    cr_expect(strstr(r.output, "a rank would refuse to start"), "%s", r.output);
    free(r.output);
}

Test(info, malformed_settings_fail_naming_the_variable)
{
    malformed("GW_NSOCKS= 2", "GW_NSOCKS");
    malformed("GW_DEBUG=LOUD", "GW_DEBUG");
    malformed("GW_RANK=first", "GW_RANK");
    malformed("GW_TIMEOUT_MS=0", "GW_TIMEOUT_MS");
    malformed("GW_SOCKET_IFNAME=gwnosuch0", "gwnosuch0");
}

Test(info, the_job_token_is_never_printed)
{
    char *env[] = {"GW_JOB_TOKEN=do-not-print-me-3141", NULL};
    for (int json = 0; json < 2; json++) {
        run_result_t r = info(json ? "--json" : NULL, env);
        cr_expect_eq(r.status, 0, "%s", r.output);
        cr_expect_null(strstr(r.output, "do-not-print-me"), "the token was printed:\n%s", r.output);
        cr_expect(strstr(r.output, "GW_JOB_TOKEN"), "its presence is shown:\n%s", r.output);
        free(r.output);
    }
}

static void put_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

Test(info, rdma_ports_from_sysfs)
{
    char root[] = "/tmp/gw-sysfs-XXXXXX";
    cr_assert(mkdtemp(root));
    char port[400], cmd[1400];
    snprintf(port, sizeof(port), "%s/class/infiniband/fake0/ports/1", root);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/gids %s/gid_attrs/types %s/gid_attrs/ndevs", port, port,
             port);
    cr_assert_eq(system(cmd), 0);
    put_file(port, "state", "4: ACTIVE\n");
    put_file(port, "link_layer", "Ethernet\n");
    put_file(port, "gids/0", "fe80:0000:0000:0000:00fc:00ff:fe00:0001\n");
    put_file(port, "gids/1", "0000:0000:0000:0000:0000:0000:0000:0000\n");
    put_file(port, "gids/2", "0000:0000:0000:0000:0000:ffff:c612:0001\n");
    put_file(port, "gid_attrs/types/0", "IB/RoCE v1\n");
    put_file(port, "gid_attrs/types/2", "RoCE v2\n");
    put_file(port, "gid_attrs/ndevs/2", "eth9\n");
    char var[300];
    snprintf(var, sizeof(var), "GW_IB_SYSFS=%s", root);
    char *env[] = {var, NULL};
    run_result_t r = info(NULL, env);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    cr_expect_eq(system(cmd), 0);
    cr_expect(strstr(r.output, "fake0:1 ACTIVE Ethernet"), "%s", r.output);
    cr_expect(strstr(r.output, "gid 0 fe80:0000:0000:0000:00fc:00ff:fe00:0001 IB/RoCE v1"), "%s",
              r.output);
    cr_expect(strstr(r.output, "gid 2 0000:0000:0000:0000:0000:ffff:c612:0001 RoCE v2 on eth9"),
              "%s", r.output);
    cr_expect_null(strstr(r.output, "gid 1 "), "the zero GID is left out:\n%s", r.output);
    free(r.output);
}

/* --env (-c) lists every variable of the registry with its value here. */
Test(info, env_lists_the_registry_with_values)
{
    char *env[] = {"GW_NSOCKS=4", "GW_JOB_TOKEN=do-not-print-me-3141", NULL};
    for (int alias = 0; alias < 2; alias++) {
        run_result_t r = info(alias ? "-c" : "--env", env);
        cr_expect_eq(r.status, 0, "exit %d:\n%s", r.status, r.output);
        cr_expect(strstr(r.output, "# System configuration\n"), "%s", r.output);
        cr_expect(strstr(r.output, "# GW_NSOCKS\n#   TCP data sockets per peer"), "%s", r.output);
        cr_expect(strstr(r.output, "#   default: 1\n#   accepted: an integer in [1, 16]\n"
                                   "GW_NSOCKS=4\n"),
                  "%s", r.output);
        cr_expect(strstr(r.output, "GW_IB_QPS unset\n"), "%s", r.output);
        cr_expect(strstr(r.output, "(int, tuning)"), "%s", r.output);
        cr_expect(strstr(r.output, "# SLURM_PROCID\n"), "launcher variables listed:\n%s", r.output);
        cr_expect(strstr(r.output, "GW_JOB_TOKEN (set, not shown)"), "%s", r.output);
        cr_expect_null(strstr(r.output, "do-not-print-me"), "the token was printed:\n%s", r.output);
        free(r.output);
    }
}

Test(info, env_marks_a_malformed_value_and_exits_1)
{
    char *env[] = {"GW_ROOT_PORT=abc", "GW_JOB_TOKEN=short-secret", NULL};
    run_result_t r = info("--env", env);
    cr_expect_eq(r.status, 1, "exit %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "MALFORMED: GW_ROOT_PORT=abc is not an integer in [1, 65535]"), "%s",
              r.output);
    cr_expect(strstr(r.output, "MALFORMED: GW_JOB_TOKEN=(not shown) is 12 characters long"), "%s",
              r.output);
    cr_expect_null(strstr(r.output, "short-secret"), "the token was printed:\n%s", r.output);
    free(r.output);
}

/* docs/reference/environment.md and errors.md are what `gradwire info`
 * prints now: a variable or a status added, changed or removed without
 * regenerating the pages (scripts/gen-reference.sh) fails here. */
static void page_is_current(const char *mode, const char *page)
{
    run_result_t r = info(mode, NULL);
    cr_assert_eq(r.status, 0, "%s: exit %d:\n%s", mode, r.status, r.output);
    char path[512];
    snprintf(path, sizeof(path), "%s/docs/reference/%s", GW_SOURCE_DIR, page);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s is missing: run scripts/gen-reference.sh", path);
    char *text = calloc(1, 1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[n] = '\0';
    cr_expect(strncmp(text, "# ", 2) == 0, "%s does not open with a level-1 title", page);
    cr_expect_null(strchr(text, '<'), "%s holds raw HTML", page);
    cr_expect_str_eq(text, r.output,
                     "docs/reference/%s differs from `gradwire info %s`: run "
                     "scripts/gen-reference.sh and commit the page",
                     page, mode);
    free(text);
    free(r.output);
}

Test(info, generated_reference_pages_are_current)
{
    page_is_current("--env-markdown", "environment.md");
    page_is_current("--errors-markdown", "errors.md");
}

Test(info, the_environment_page_names_every_variable_and_the_errors_page_every_status)
{
    run_result_t r = info("--env-markdown", NULL);
    for (const char *const *v =
             (const char *const[]){"`GW_ROOT`", "`GW_SHM_SPIN_US`", "`GW_IB_CM`", "`GW_DEBUG`",
                                   "`RANK`", "`GW_TRAIN_TEST_SLOW`", NULL};
         *v; v++)
        cr_expect(strstr(r.output, *v), "%s missing:\n%s", *v, r.output);
    free(r.output);
    r = info("--errors-markdown", NULL);
    for (int s = GW_OK; s <= GW_ERR_CONFIG; s++) {
        char row[160];
        snprintf(row, sizeof(row), "| `%s` | %d | %s | ", gw_status_name((gw_status_t)s), s,
                 gw_status_str((gw_status_t)s));
        cr_expect(strstr(r.output, row), "no row %s:\n%s", row, r.output);
    }
    free(r.output);
}

/* The environment part prints from the registry: a GW_* name it lacks is
 * shown as ignored, with the variable a typo most likely meant. */
Test(info, unknown_gw_names_are_shown_as_ignored)
{
    char *env[] = {"GW_NSOCK=3", "GW_RXE_X=1", "OMPI_MCA_btl=tcp", NULL};
    run_result_t r = info(NULL, env);
    cr_expect_eq(r.status, 0, "exit %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output,
                     "  GW_NSOCK=3 (not a gradwire variable: ignored; did you mean GW_NSOCKS?)\n"),
              "%s", r.output);
    cr_expect(strstr(r.output, "  GW_RXE_X=1 (not a gradwire variable: ignored)\n"), "%s",
              r.output);
    cr_expect_null(strstr(r.output, "OMPI_MCA_btl"), "not gradwire's:\n%s", r.output);
    free(r.output);
}
