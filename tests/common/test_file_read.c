/* Files named by variables (GW_JOB_TOKEN_FILE, GW_TUNING_FILE,
 * GW_DEBUG_FILE) never hang gw_comm_init and are read with a bound
 * (common/file_read.c): a FIFO nobody writes, /dev/zero and a file too
 * long are refused at once with an error naming the path and what it is.
 * Before, open() of the FIFO blocked forever and /dev/zero grew a 1 GB
 * line first; the timeouts below turn a hang into a failure. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_read.h"
#include "gradwire.h"

static char dir[64], fifo[96], logpath[96];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/gw-file-read-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(logpath, sizeof(logpath), "%s/log", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    unsetenv("GW_TUNING_FILE");
    unsetenv("GW_JOB_TOKEN_FILE");
    unsetenv("GW_JOB_TOKEN");
    unsetenv("GW_DEBUG_FILE");
    unsetenv("GW_ROOT");
    unsetenv("MASTER_ADDR");
    setenv("GW_DEBUG", "WARN", 1);
}

static void teardown(void)
{
    unlink(fifo);
    unlink(logpath);
    rmdir(dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    if (f) {
        size_t n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static gw_status_t one_rank_comm(void)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init(&cfg, &comm);
    if (comm)
        gw_comm_destroy(comm);
    return st;
}

/* logpath's text holds head, path and tail, in a row. */
static void expect_logged(const char *head, const char *path, const char *tail)
{
    char want[256];
    snprintf(want, sizeof(want), "%s%s%s", head, path, tail);
    char *log = slurp(logpath);
    cr_expect(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
    free(log);
}

Test(file_read, tuning_fifo_is_refused_not_waited_on, .init = setup, .fini = teardown,
     .timeout = 30)
{
    setenv("GW_DEBUG_FILE", logpath, 1);
    setenv("GW_TUNING_FILE", fifo, 1);
    cr_expect_eq(one_rank_comm(), GW_ERR_CONFIG);
    expect_logged("GW_TUNING_FILE=", fifo, " is a FIFO, not a regular file");
}

Test(file_read, tuning_dev_zero_is_refused_unread, .init = setup, .fini = teardown, .timeout = 30)
{
    setenv("GW_DEBUG_FILE", logpath, 1);
    setenv("GW_TUNING_FILE", "/dev/zero", 1);
    cr_expect_eq(one_rank_comm(), GW_ERR_CONFIG);
    expect_logged("GW_TUNING_FILE=", "/dev/zero", " is a character device, not a regular file");
}

Test(file_read, token_fifo_is_refused_not_waited_on, .init = setup, .fini = teardown, .timeout = 30)
{
    setenv("GW_DEBUG_FILE", logpath, 1);
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    setenv("GW_JOB_TOKEN_FILE", fifo, 1);
    gw_comm_t *comm = NULL;
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG);
    cr_expect_null(comm);
    expect_logged("GW_JOB_TOKEN_FILE=", fifo, " is a FIFO, not a regular file");
    unsetenv("GW_RANK");
    unsetenv("GW_SIZE");
}

/* A FIFO nobody reads is not waited on: the job runs, logging to stderr,
 * and says where its lines go instead. */
Test(file_read, debug_file_fifo_without_reader_falls_back, .init = setup, .fini = teardown,
     .timeout = 30)
{
    setenv("GW_DEBUG_FILE", fifo, 1);
    cr_expect_eq(one_rank_comm(), GW_OK);
}

/* A FIFO someone reads (a pipe to tee through /dev/stderr) takes the lines. */
Test(file_read, debug_file_fifo_with_reader_gets_lines, .init = setup, .fini = teardown,
     .timeout = 30)
{
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd, 0);
    setenv("GW_DEBUG_FILE", fifo, 1);
    gw_logger_t lg;
    cr_expect_eq(gw__logger_init(&lg, 0), GW_OK);
    cr_expect_eq(lg.owns_file, 1, "the FIFO was not taken");
    GW_WARN(&lg, "test", "through the FIFO");
    gw__logger_fini(&lg);
    char buf[256] = "";
    cr_expect_gt(read(rd, buf, sizeof(buf) - 1), 0, "no log line came through the FIFO");
    cr_expect(strstr(buf, "through the FIFO"), "read \"%s\"", buf);
    close(rd);
}

/* The helper itself: a bound on the bytes read, the stat handed back. */
Test(file_read, helper_bounds_and_checks, .init = setup, .fini = teardown, .timeout = 30)
{
    gw_logger_t lg = {.level = GW_LOG_WARN, .rank = -1, .file = tmpfile()};
    cr_assert_not_null(lg.file);
    FILE *f = fopen(logpath, "w");
    cr_assert_not_null(f);
    fputs("0123456789", f);
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    struct stat sb;
    cr_assert_eq(gw__file_read(&lg, "test", "the file", logpath, 10, 0, &buf, &len, &sb), GW_OK);
    cr_expect_eq(len, 10);
    cr_expect_str_eq(buf, "0123456789");
    cr_expect_eq(sb.st_size, 10);
    free(buf);
    buf = NULL;
    cr_expect_eq(gw__file_read(&lg, "test", "the file", logpath, 9, 0, &buf, &len, NULL),
                 GW_ERR_CONFIG);
    cr_expect_null(buf);
    cr_expect_eq(gw__file_read(&lg, "test", "the dir", dir, 9, 0, &buf, &len, NULL), GW_ERR_CONFIG);
    cr_expect_eq(gw__file_read(&lg, "test", "the fifo", fifo, 9, 0, &buf, &len, NULL),
                 GW_ERR_CONFIG);
    fseek(lg.file, 0, SEEK_SET);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, lg.file);
    text[n] = '\0';
    cr_expect(strstr(text, "the file is 10 bytes, more than the 9 it may be"), "%s", text);
    cr_expect(strstr(text, "the dir is a directory, not a regular file"), "%s", text);
    cr_expect(strstr(text, "the fifo is a FIFO, not a regular file"), "%s", text);
    fclose(lg.file);
}
