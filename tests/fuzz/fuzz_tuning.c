/*
 * fuzz_tuning.c - libFuzzer target for the tuning-file parser
 * (collectives/tuning.c, gw__tuning_parse), which reads the file that
 * GW_TUNING_FILE names; the file path (gw__tuning_load) opens the file and
 * calls the same function, here given the bytes through fmemopen.
 *
 * Beyond not crashing: a refused file leaves the tuning untouched; an
 * accepted one has values in their documented ranges, and what
 * gw__tuning_write makes of it parses again to the same values (to the nine
 * digits it writes).
 */
#include <math.h>
#include <string.h>

#include "collectives/tuning.h"
#include "fuzz_util.h"

static int close_enough(double a, double b) { return fabs(a - b) <= 1e-8 * fmax(fabs(a), fabs(b)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0; /* fmemopen refuses an empty buffer; an empty file is tested below */
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        abort();
    gw_tuning_t t, before;
    gw__tuning_defaults(&t, "tcp");
    before = t;
    gw_status_t st = gw__tuning_parse(&t, f, "fuzz.tuning", fuzz_logger());
    fclose(f);
    if (st != GW_OK) {
        FUZZ_CHECK(st == GW_ERR_CONFIG);
        FUZZ_CHECK(memcmp(&t, &before, sizeof(t)) == 0);
        return 0;
    }
    FUZZ_CHECK(isfinite(t.alpha) && t.alpha >= 0 && t.alpha <= 60.0);
    FUZZ_CHECK(isfinite(t.beta) && t.beta >= 0 && t.beta <= 1.0);
    FUZZ_CHECK(isfinite(t.gamma) && t.gamma >= 0 && t.gamma <= 1.0);
    FUZZ_CHECK(isfinite(t.beta_local) && t.beta_local >= 0 && t.beta_local <= 1.0);
    FUZZ_CHECK(t.chunk_bytes >= 4096 && t.chunk_bytes <= (1u << 30));

    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    if (!w)
        abort();
    FUZZ_CHECK(gw__tuning_write(&t, w) == GW_OK);
    fclose(w);
    FILE *r = fmemopen(text, len, "r");
    if (!r)
        abort();
    gw_tuning_t u;
    gw__tuning_defaults(&u, "self");
    FUZZ_CHECK(gw__tuning_parse(&u, r, "fuzz.tuning (rewritten)", fuzz_logger()) == GW_OK);
    fclose(r);
    free(text);
    FUZZ_CHECK(close_enough(u.alpha, t.alpha) && close_enough(u.beta, t.beta));
    FUZZ_CHECK(close_enough(u.gamma, t.gamma) && u.chunk_bytes == t.chunk_bytes);
    FUZZ_CHECK(close_enough(u.beta_local, t.beta_local));
    /* The model gives every algorithm a finite time from what was accepted. */
    for (int n = 2; n <= 64; n *= 4)
        FUZZ_CHECK(gw__tuning_pick(&t, n, (size_t)1 << 20) > GW_ALGO_AUTO &&
                   gw__tuning_pick(&t, n, (size_t)1 << 20) < GW_ALGO_COUNT);
    return 0;
}
