/*
 * fuzz_fr_dump.c - libFuzzer target for the flight recorder's dump reader
 * (collectives/comm/fr_read.c), which `gradwire fr DIR` runs on files from
 * a directory anyone with access may have written, or that a crash cut.
 *
 * Beyond not crashing: an accepted dump has 0 <= rank < size, at most the
 * reader's cap of entries, each with known kind, dtype, algorithm and
 * states and at most GW_FR_PEERS peers listed; a refused one says what is
 * wrong and where (a NUL-terminated message naming a byte). Reading the
 * same bytes twice gives the same dump.
 */
#include <string.h>

#include "collectives/comm/flight_recorder.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char err[256];
    memset(err, 0x5a, sizeof(err));
    gw_fr_dump_t d, again;
    if (gw__fr_parse((const char *)data, size, &d, err, sizeof(err)) != GW_OK) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(strstr(err, " at byte ") != NULL);
        return 0;
    }
    FUZZ_CHECK(d.rank >= 0 && d.size >= 1 && d.rank < d.size);
    FUZZ_CHECK(d.nentries >= 0 && d.nentries <= (1 << 20));
    FUZZ_CHECK(memchr(d.why, '\0', sizeof(d.why)) != NULL);
    for (int i = 0; i < d.nentries; i++) {
        const gw_fr_entry_t *e = &d.entries[i];
        FUZZ_CHECK(strcmp(gw__fr_kind_name(e->kind), "?") != 0 || e->kind == 0);
        FUZZ_CHECK(e->dtype >= 0 && e->dtype < GW_DTYPE_COUNT);
        FUZZ_CHECK(e->algo >= 0 && e->algo < GW_ALGO_COUNT);
        FUZZ_CHECK(e->state <= GW_FR_FAILED && e->step_state <= GW_FR_FAILED);
    }
    FUZZ_CHECK(gw__fr_parse((const char *)data, size, &again, err, sizeof(err)) == GW_OK);
    FUZZ_CHECK(again.rank == d.rank && again.size == d.size && again.nentries == d.nentries &&
               again.done == d.done && again.comm_id == d.comm_id);
    if (d.nentries)
        FUZZ_CHECK(memcmp(again.entries, d.entries, (size_t)d.nentries * sizeof(*d.entries)) == 0);
    gw__fr_dump_free(&again);
    gw__fr_dump_free(&d);
    return 0;
}
