/*
 * fuzz_hostfile.c - libFuzzer target for the hostfile of `gradwire launch
 * --hostfile` (tools/launch_hostfile.c, compiled in), a file a user writes
 * by hand or a scheduler generates.
 *
 * Beyond not crashing: a hostfile that parses names 1..GW_LAUNCH_HOSTS_MAX
 * hosts, each name non-empty, not starting with '-' (ssh would take it for
 * an option) and made of the characters a host name has only (no blank,
 * quote, '#', '$', ';' or control byte reaches ssh's argument list), with
 * 1..GW_LAUNCH_MAX_RANKS slots; parsing it again gives the same hosts. A
 * refused one says why, naming the file.
 */
#include <string.h>

#include "fuzz_util.h"
#include "launch.h"

static void free_names(struct gw_launch_remote *rm)
{
    for (int h = 0; h < rm->nhosts; h++)
        free(rm->names[h]);
    rm->nhosts = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *names[GW_LAUNCH_HOSTS_MAX], *again_names[GW_LAUNCH_HOSTS_MAX];
    int slots[GW_LAUNCH_HOSTS_MAX], again_slots[GW_LAUNCH_HOSTS_MAX];
    struct gw_launch_remote rm = {.names = names, .slots = slots};
    struct gw_launch_remote again = {.names = again_names, .slots = again_slots};
    char err[512];
    memset(err, 0x5a, sizeof(err));
    const char *text = (const char *)data;
    if (gw_launch_hostfile_parse(text, size, "fuzz", &rm, err, sizeof(err)) != 0) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
        FUZZ_CHECK(strstr(err, "fuzz") != NULL || strstr(err, "out of memory") != NULL ||
                   strstr(err, "more than") != NULL);
        free_names(&rm);
        return 0;
    }
    FUZZ_CHECK(rm.nhosts >= 1 && rm.nhosts <= GW_LAUNCH_HOSTS_MAX);
    for (int h = 0; h < rm.nhosts; h++) {
        const char *n = rm.names[h];
        FUZZ_CHECK(n[0] != '\0' && n[0] != '-');
        for (const char *c = n; *c; c++)
            FUZZ_CHECK(strchr("._-@%:[]", *c) || (*c >= 'a' && *c <= 'z') ||
                       (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'));
        FUZZ_CHECK(rm.slots[h] >= 1 && rm.slots[h] <= GW_LAUNCH_MAX_RANKS);
    }
    FUZZ_CHECK(gw_launch_hostfile_parse(text, size, "fuzz", &again, err, sizeof(err)) == 0);
    FUZZ_CHECK(again.nhosts == rm.nhosts);
    for (int h = 0; h < rm.nhosts; h++) {
        FUZZ_CHECK(strcmp(again.names[h], rm.names[h]) == 0);
        FUZZ_CHECK(again.slots[h] == rm.slots[h]);
    }
    free_names(&again);
    free_names(&rm);
    return 0;
}
