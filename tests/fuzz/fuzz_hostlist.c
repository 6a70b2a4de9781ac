/*
 * fuzz_hostlist.c - libFuzzer target for Slurm host list expressions
 * (common/hostlist.c), which come from SLURM_JOB_NODELIST and
 * SLURM_STEP_NODELIST or a user's `gradwire hostlist` argument.
 *
 * Beyond not crashing: an expression that expands gives at most
 * GW_HOSTLIST_HOSTS_MAX names, each non-empty, at most
 * GW_HOSTLIST_NAME_MAX long, free of separators and brackets; expanding it
 * again gives the same names; one without brackets gives exactly its
 * comma- or space-separated elements. A refused one says why.
 */
#include <string.h>

#include "common/hostlist.h"
#include "fuzz_util.h"

/* The elements of a bracket-free expression, compared with the names. */
static void check_plain(const char *s, const gw_hostlist_t *l)
{
    size_t k = 0;
    const char *p = s;
    while (*p) {
        size_t skip = strspn(p, ", \t\n\r\v\f");
        p += skip;
        if (!*p)
            break;
        size_t n = strcspn(p, ", \t\n\r\v\f");
        FUZZ_CHECK(k < l->count);
        FUZZ_CHECK(strlen(l->names[k]) == n && memcmp(l->names[k], p, n) == 0);
        k++;
        p += n;
    }
    FUZZ_CHECK(k == l->count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256) /* node lists are short; long ones only repeat these paths */
        return 0;
    char *s = fuzz_strdup(data, size);
    gw_hostlist_t l, again;
    char err[256];
    memset(err, 0x5a, sizeof(err));
    gw_status_t st = gw__hostlist_expand(s, &l, err, sizeof(err));
    if (st != GW_OK) {
        FUZZ_CHECK(st == GW_ERR_INVALID_ARG || st == GW_ERR_NO_MEMORY);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
        free(s);
        return 0;
    }
    FUZZ_CHECK(l.count <= GW_HOSTLIST_HOSTS_MAX);
    for (size_t i = 0; i < l.count; i++) {
        size_t n = strlen(l.names[i]);
        FUZZ_CHECK(n > 0 && n <= GW_HOSTLIST_NAME_MAX);
        FUZZ_CHECK(strpbrk(l.names[i], ", \t\n[]") == NULL);
    }
    if (!strpbrk(s, "[]") && !strpbrk(s, "\r\v\f"))
        check_plain(s, &l);
    if (l.count <= 4096) {
        FUZZ_CHECK(gw__hostlist_expand(s, &again, err, sizeof(err)) == GW_OK);
        FUZZ_CHECK(again.count == l.count);
        for (size_t i = 0; i < l.count; i++)
            FUZZ_CHECK(strcmp(again.names[i], l.names[i]) == 0);
        gw__hostlist_free(&again);
    }
    gw__hostlist_free(&l);
    free(s);
    return 0;
}
