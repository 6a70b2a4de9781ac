/*
 * log_capture.h - a gradwire logger that writes into a temporary file, and
 * what the tests ask of its text: for tests that check what the library
 * says (one INFO line, no WARN, the error naming the cause).
 *
 * Header-only, every function static inline.
 */
#ifndef GW_TESTS_LOG_CAPTURE_H
#define GW_TESTS_LOG_CAPTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* A logger at `level` whose lines go to a temporary file (fclose(lg.file)
 * when done). */
static inline gw_logger_t capture_logger(gw_log_level_t level)
{
    gw_logger_t lg;
    memset(&lg, 0, sizeof(lg));
    lg.level = level;
    lg.rank = 0;
    lg.file = tmpfile();
    cr_assert_not_null(lg.file);
    strcpy(lg.host, "test");
    return lg;
}

/* Everything logged so far, as a string to free. */
static inline char *captured(gw_logger_t *lg)
{
    fflush(lg->file);
    long n = ftell(lg->file);
    char *s = calloc(1, (size_t)n + 1);
    cr_assert_not_null(s);
    rewind(lg->file);
    size_t got = fread(s, 1, (size_t)n, lg->file);
    s[got] = '\0';
    fseek(lg->file, 0, SEEK_END);
    return s;
}

/* How often needle occurs in s. */
static inline int count_in(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

#endif /* GW_TESTS_LOG_CAPTURE_H */
