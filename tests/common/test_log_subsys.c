/* GW_DEBUG_SUBSYS (common/log.c): INFO and TRACE lines only of the
 * subsystems listed (or, with '^', of the others), WARN and ERROR always,
 * and a list that names no subsystem refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static char path[64];

static void setup(void)
{
    snprintf(path, sizeof(path), "/tmp/gw-logsub-%d.log", (int)getpid());
    unlink(path);
    setenv("GW_DEBUG", "INFO", 1);
    setenv("GW_DEBUG_FILE", path, 1);
}

static void teardown(void)
{
    unlink(path);
    unsetenv("GW_DEBUG");
    unsetenv("GW_DEBUG_FILE");
    unsetenv("GW_DEBUG_SUBSYS");
}

/* Log one INFO line per subsystem and a WARN of init under the filter,
 * return what was written (to free). */
static char *logged(const char *filter)
{
    if (filter)
        setenv("GW_DEBUG_SUBSYS", filter, 1);
    else
        unsetenv("GW_DEBUG_SUBSYS");
    gw_logger_t lg;
    cr_assert_eq(gw__logger_init(&lg, 0), GW_OK, "GW_DEBUG_SUBSYS=%s refused", filter);
    const char *subs[] = {"init", "tcp", "ib", "coll"};
    for (int i = 0; i < 4; i++)
        GW_INFO(&lg, subs[i], "info-of-%s", subs[i]);
    GW_WARN(&lg, "init", "warn-of-init");
    gw__logger_fini(&lg);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    return buf;
}

#define HAS(text, what) strstr((text), "info-of-" what)

Test(log_subsys, a_list_keeps_its_subsystems, .init = setup, .fini = teardown)
{
    char *t = logged(NULL);
    cr_expect(HAS(t, "init") && HAS(t, "tcp") && HAS(t, "ib") && HAS(t, "coll"), "%s", t);
    t = logged("tcp,IB");
    cr_expect(HAS(t, "tcp") && HAS(t, "ib"), "%s", t);
    cr_expect(!HAS(t, "init") && !HAS(t, "coll"), "%s", t);
    cr_expect(strstr(t, "warn-of-init"), "a WARN is written whatever the filter:\n%s", t);
    t = logged("^tcp");
    cr_expect(HAS(t, "init") && HAS(t, "ib") && HAS(t, "coll") && !HAS(t, "tcp"), "%s", t);
    t = logged("ALL");
    cr_expect(HAS(t, "init") && HAS(t, "tcp"), "%s", t);
    t = logged("^ALL");
    cr_expect(!HAS(t, "init") && !HAS(t, "tcp") && strstr(t, "warn-of-init"), "%s", t);
}

Test(log_subsys, names_that_are_no_subsystem_are_refused, .init = setup, .fini = teardown)
{
    const char *bad[] = {"bogus", "tcp,,ib", "tcp,", "^", "", " tcp", "tcp ib"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GW_DEBUG_SUBSYS", bad[i], 1);
        gw_logger_t lg;
        cr_expect_eq(gw__logger_init(&lg, 0), GW_ERR_CONFIG, "GW_DEBUG_SUBSYS=\"%s\" accepted",
                     bad[i]);
        gw__logger_fini(&lg);
    }
}
