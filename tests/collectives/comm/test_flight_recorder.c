/*
 * The flight recorder on its own (collectives/comm/flight_recorder.c,
 * fr_write.c, fr_read.c): a ring that keeps the last N calls with their
 * steps, a dump that the reader gives back field for field, mode 0600,
 * nothing at all when the recorder is off, and a reader that refuses what
 * the writer would never write.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/fr_internal.h"

static gw_logger_t lg;
static char dir[64];

static void setup(void)
{
    gw__logger_init(&lg, 0);
    snprintf(dir, sizeof(dir), "/tmp/gw_fr_test.XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/rank-1.json", dir);
    unlink(path);
    rmdir(dir);
    gw__logger_fini(&lg);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "no dump at %s", path);
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

Test(flight_recorder, off_is_null) { cr_assert_null(gw__fr_create(NULL, 0, 0, 2, 0, NULL)); }

Test(flight_recorder, keeps_the_last_n_with_their_steps, .init = setup, .fini = teardown)
{
    gw_fr_t *fr = gw__fr_create(&lg, 4, 1, 3, 0, dir);
    cr_assert_not_null(fr);
    for (uint64_t seq = 1; seq <= 6; seq++) {
        gw__fr_begin(fr, seq, GW_COLL_ALLREDUCE, 2, GW_FLOAT32, GW_ALGO_RING);
        gw__fr_post(fr, 2, 1, 8);
        gw__fr_post(fr, 0, 0, 8);
        gw__fr_wait(fr, 2);
        if (seq < 6) {
            gw__fr_waited(fr);
            gw__fr_end(fr, GW_OK);
        }
    }
    /* #6 is in its first step, waiting for rank 2. */
    const gw_fr_entry_t *e = gw__fr_current(fr);
    cr_assert(e->seq == 6 && e->state == GW_FR_STARTED && e->step == 1 &&
              e->step_state == GW_FR_STARTED && e->step_peer == 2 && e->step_bytes == 8);
    cr_assert(e->npeers == 2 && e->peers[0] == 2 && e->peers[1] == 0);
    cr_assert_eq(gw__fr_done_count(fr), 5);
    cr_assert_eq(gw__fr_dump(fr, "timeout"), GW_OK);

    char path[128];
    snprintf(path, sizeof(path), "%s/rank-1.json", dir);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600, "mode %o", sb.st_mode & 0777);
    size_t len;
    char *text = slurp(path, &len);
    gw_fr_dump_t d;
    char err[256];
    cr_assert_eq(gw__fr_parse(text, len, &d, err, sizeof(err)), GW_OK, "%s", err);
    /* The ring of 4 holds #3..#6, oldest first, as the recorder had them. */
    cr_assert(d.rank == 1 && d.size == 3 && d.done == 5 && !strcmp(d.why, "timeout"));
    cr_assert_eq(d.nentries, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(d.entries[i].seq, (uint64_t)(3 + i));
    cr_assert_eq(memcmp(&d.entries[3], e, sizeof(*e)), 0, "the running entry differs");
    cr_assert(d.entries[2].state == GW_FR_DONE && d.entries[2].bytes == 8 &&
              d.entries[2].kind == GW_COLL_ALLREDUCE && d.entries[2].algo == GW_ALGO_RING);
    gw__fr_dump_free(&d);

    /* What the writer never writes is refused, saying where. */
    text[len / 2] = '\0';
    cr_assert_eq(gw__fr_parse(text, len / 2, &d, err, sizeof(err)), GW_ERR_PROTOCOL);
    cr_assert(strstr(err, " at byte "), "%s", err);
    free(text);
    static const char *bad[] = {
        "{\"gradwire_fr\":1,\"rank\":4,\"size\":4,\"entries\":[]}",
        "{\"gradwire_fr\":2,\"rank\":0,\"size\":1}",
        "{\"rank\":0,\"size\":1}",
        "{\"gradwire_fr\":1,\"rank\":0,\"size\":1,\"entries\":[{\"kind\":\"nope\"}]}",
        "{\"gradwire_fr\":1,\"rank\":0,\"size\":1,\"entries\":[{\"peers\":[1,2,3,4,5,6,7,8,9]}]}",
        "{\"gradwire_fr\":1,\"rank\":0,\"size\":1,\"x\":[1]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(gw__fr_parse(bad[i], strlen(bad[i]), &d, err, sizeof(err)), GW_ERR_PROTOCOL,
                     "accepted %s", bad[i]);
    gw__fr_destroy(fr);
}
