/*
 * test_env_registry.c - the registry of variables (common/env_registry.def)
 * is the one place a variable is declared:
 *   - a scan of the library's and the tools' sources: every getenv("...")
 *     and every "GW_..." string literal names a registered variable (or a
 *     status, or a variable of the operating system listed here), so a
 *     variable read without being registered fails this test;
 *   - the registry is well formed (unique names, help, ranges, defaults)
 *     and its defaults are the constants the code was built with;
 *   - gw__env_check_all refuses a malformed value of any GW_* variable,
 *     used or not, and names the closest known variable for a typo.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"
#include "common/env.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/ib/ib_internal.h"
#include "transport/shm/shm_internal.h"

/* Variables the sources may read that are not gradwire's settings. */
static const char *const os_vars[] = {"PATH", "HOME", "TMPDIR", "USER", NULL};

/* Folders of the library and the tools, and one left out: bench/peers
 * drives other libraries (Open MPI, Gloo) and reads their variables. */
static const char *const roots[] = {"transport", "collectives", "common",    "optimizer",
                                    "bench",     "tools",       "python/src"};

static int allowed(const char *name)
{
    if (gw__env_find(name))
        return 1;
    for (int i = 0; os_vars[i]; i++)
        if (strcmp(name, os_vars[i]) == 0)
            return 1;
    for (int s = 0; s < 64; s++) /* status names are literals too */
        if (strcmp(name, gw_status_name((gw_status_t)s)) == 0)
            return 1;
    return strcmp(name, "GW_UNKNOWN_STATUS") == 0;
}

typedef struct scan {
    regex_t getenv_re, gw_re;
    int files;
    char bad[4096];
} scan_t;

static void scan_text(scan_t *sc, const char *path, const char *text)
{
    regex_t *res[2] = {&sc->getenv_re, &sc->gw_re};
    for (int k = 0; k < 2; k++) {
        regmatch_t m[2];
        for (const char *p = text; regexec(res[k], p, 2, m, 0) == 0; p += m[0].rm_eo) {
            char name[128];
            int n = (int)(m[1].rm_eo - m[1].rm_so);
            snprintf(name, sizeof(name), "%.*s", n, p + m[1].rm_so);
            if (!allowed(name)) {
                size_t used = strlen(sc->bad);
                snprintf(sc->bad + used, sizeof(sc->bad) - used, "  %s in %s\n", name, path);
            }
        }
    }
}

static void scan_dir(scan_t *sc, const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        if (S_ISDIR(sb.st_mode)) {
            if (!strstr(path, "/bench/peers"))
                scan_dir(sc, path);
            continue;
        }
        size_t len = strlen(path);
        if (len < 3 || (strcmp(path + len - 2, ".c") != 0 && strcmp(path + len - 2, ".h") != 0 &&
                        strcmp(path + len - 3, ".cu") != 0 && strcmp(path + len - 4, ".cpp") != 0))
            continue;
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        char *text = calloc(1, (size_t)sb.st_size + 1);
        cr_assert_eq(fread(text, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
        fclose(f);
        scan_text(sc, path + strlen(GW_SOURCE_DIR) + 1, text);
        free(text);
        sc->files++;
    }
    closedir(d);
}

Test(env_registry, every_variable_read_is_registered)
{
    scan_t sc = {.files = 0, .bad = ""};
    cr_assert_eq(regcomp(&sc.getenv_re, "getenv\\(\\s*\"([^\"]+)\"", REG_EXTENDED), 0);
    cr_assert_eq(regcomp(&sc.gw_re, "\"(GW_[A-Z0-9_]+)\"", REG_EXTENDED), 0);
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/%s", GW_SOURCE_DIR, roots[i]);
        scan_dir(&sc, dir);
    }
    regfree(&sc.getenv_re);
    regfree(&sc.gw_re);
    cr_expect_gt(sc.files, 100, "the scan found only %d files", sc.files);
    cr_expect_str_eq(sc.bad, "",
                     "read but not in common/env_registry.def (declare them there):\n%s", sc.bad);
}

Test(env_registry, the_scan_catches_an_unregistered_variable)
{
    scan_t sc = {.files = 0, .bad = ""};
    cr_assert_eq(regcomp(&sc.getenv_re, "getenv\\(\\s*\"([^\"]+)\"", REG_EXTENDED), 0);
    cr_assert_eq(regcomp(&sc.gw_re, "\"(GW_[A-Z0-9_]+)\"", REG_EXTENDED), 0);
    scan_text(&sc, "a.c", "x = getenv(\"GW_NOT_DECLARED\"); y = getenv(\"NCCL_FOO\");");
    scan_text(&sc, "b.c", "static const char *v[] = {\"GW_ALSO_NOT\", \"GW_NSOCKS\"};");
    regfree(&sc.getenv_re);
    regfree(&sc.gw_re);
    cr_expect(strstr(sc.bad, "GW_NOT_DECLARED in a.c") && strstr(sc.bad, "NCCL_FOO in a.c") &&
                  strstr(sc.bad, "GW_ALSO_NOT in b.c") && !strstr(sc.bad, "GW_NSOCKS"),
              "%s", sc.bad);
}

Test(env_registry, entries_are_well_formed)
{
    for (int i = 0; i < GW_ENV_COUNT; i++) {
        const gw_env_var_t *v = gw__env_var((gw_env_id_t)i);
        cr_assert_not_null(v);
        cr_expect(v->help && *v->help, "%s has no help", v->name);
        cr_expect_eq(gw__env_find(v->name), v, "%s is declared twice", v->name);
        char why[320];
        if (v->type == GW_ENV_T_INT || v->type == GW_ENV_T_BOOL) {
            cr_expect_leq(v->min, v->max, "%s", v->name);
            cr_expect((v->dflt >= v->min && v->dflt <= v->max) || v->dflt_text,
                      "%s: a default outside its range must say what it means", v->name);
        }
        if (v->type == GW_ENV_T_CHOICE) {
            cr_expect(v->choices && *v->choices, "%s has no choices", v->name);
            cr_expect(v->dflt >= 0 || v->dflt_text, "%s: no default and no word on it", v->name);
        }
        if (v->category != GW_ENV_C_LAUNCHER)
            cr_expect_eq(strncmp(v->name, "GW_", 3), 0, "%s is gradwire's: GW_ name", v->name);
        if (v != gw__env_var(GW_ENV_TRAIN_TEST_SLOW)) /* the one blank-means-unset knob */
            cr_expect_eq(gw__env_check(v, "", NULL, NULL, why, sizeof(why)), GW_ERR_CONFIG,
                         "%s accepts empty", v->name);
    }
    cr_expect_null(gw__env_find("GW_NO_SUCH"));
    cr_expect_eq(gw__env_closest("GW_NSOCK"), gw__env_var(GW_ENV_NSOCKS));
    cr_expect_eq(gw__env_closest("GW_TIMEOUT_MSS"), gw__env_var(GW_ENV_TIMEOUT_MS));
    cr_expect_null(gw__env_closest("GW_RXE_CLUSTER"));
    cr_expect_null(gw__env_closest("GW_RXE_GID_INDEX"), "3 edits is no typo");
    cr_expect_null(gw__env_closest("GW_CI"), "2 edits of a 2-letter name is no typo");
}

/* The registry's defaults are the ones the code was built around. */
Test(env_registry, defaults_match_the_code)
{
    cr_expect_eq(gw__env_var(GW_ENV_TIMEOUT_MS)->dflt, GW_DEFAULT_TIMEOUT_MS);
    cr_expect_eq(gw__env_var(GW_ENV_SHM_SPIN_US)->dflt, GW_SHM_SPIN_NS / 1000);
    cr_expect_eq(gw__env_var(GW_ENV_SHM_YIELD_US)->dflt, GW_SHM_YIELD_NS / 1000);
    cr_expect_eq(gw__env_var(GW_ENV_SHM_DIRECT_MIN)->dflt, (long)GW_SHM_DIRECT_DEFAULT);
    cr_expect_eq(gw__env_var(GW_ENV_IB_QPS)->max, GW_IB_MAX_QPS);
    cr_expect_eq(gw__env_var(GW_ENV_IB_EAGER)->max, GW_IB_EAGER_MAX);
    cr_expect_eq(gw__env_var(GW_ENV_IB_EAGER)->dflt, GW_IB_EAGER_MAX);
    cr_expect_eq(gw__env_var(GW_ENV_IB_CTS_DEFER_US)->dflt, GW_IB_CTS_DEFER_US);
    cr_expect_eq(gw__env_var(GW_ENV_CUDA_CHUNK)->min, GW_CUDA_CHUNK_MIN);
    cr_expect_eq(gw__env_var(GW_ENV_CUDA_CHUNK)->max, GW_CUDA_CHUNK_MAX);
    cr_expect_eq(gw__env_var(GW_ENV_CUDA_CHUNK)->dflt, (long)GW_CUDA_CHUNK_DEFAULT);
    cr_expect_eq(gw__env_var(GW_ENV_BOOTSTRAP_RING_MIN)->dflt, GW_BOOTSTRAP_RING_MIN_DEFAULT);
    cr_expect_eq(gw__env_var(GW_ENV_DEBUG)->dflt, GW_LOG_WARN);
}
