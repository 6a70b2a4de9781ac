/*
 * fuzz_check_baseline.c - libFuzzer target for gradwire check's baseline
 * reader (tools/check/check_baseline.c, gwc_baseline_load), which reads
 * the file --baseline names: a file a user keeps, copies between clusters
 * and edits by hand. The bytes are given as a file (/proc/self/fd/N).
 *
 * Beyond not crashing: a refused file leaves an error message and nothing
 * allocated; an accepted one holds at least one link or node record, each
 * node record names a host and holds figures that are finite and not
 * negative, or nan, no host twice, and the node reference of every figure
 * is one of the records' figures (or nan when none has it).
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "fuzz_util.h"

/* The saving and matching half of check_baseline.c names hosts through the
 * report's gwc_host_name (check_report.c); the reader never calls it. */
const char *gwc_host_name(const gwc_run_t *r, int rank) { return r->hosts[r->host_of[rank]].name; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[300] = "";
    int fd = fuzz_memfile(data, size, path, sizeof(path));
    gwc_baseline_t b;
    int rc = gwc_baseline_load(path, &b, err, sizeof(err));
    close(fd);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && err[0] != '\0');
        FUZZ_CHECK(b.links == NULL && b.nlinks == 0 && b.nodes == NULL && b.nnodes == 0);
        return 0;
    }
    FUZZ_CHECK(b.nlinks > 0 || b.nnodes > 0);
    for (size_t i = 0; i < b.nnodes; i++) {
        const gwc_base_node_t *n = &b.nodes[i];
        FUZZ_CHECK(n->host[0] != '\0' && memchr(n->host, '\0', sizeof(n->host)) != NULL);
        for (int k = 0; k < GWC_NODE_FIGURES; k++)
            FUZZ_CHECK(isnan(n->v[k]) || (isfinite(n->v[k]) && n->v[k] >= 0));
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(b.nodes[j].host, n->host) != 0);
    }
    for (int k = 0; k < GWC_NODE_FIGURES; k++) {
        double ref = gwc_baseline_node_ref(&b, k);
        int found = 0, any = 0;
        for (size_t i = 0; i < b.nnodes; i++) {
            any |= !isnan(b.nodes[i].v[k]);
            found |= b.nodes[i].v[k] == ref;
        }
        FUZZ_CHECK(any ? found : isnan(ref));
    }
    gwc_baseline_free(&b);
    return 0;
}
