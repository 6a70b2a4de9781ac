/*
 * proc_state.h - a process's state letter from /proc/PID/stat, for tests
 * and workers that watch ranks end (Z: ended, not reaped yet).
 */
#ifndef GW_TESTS_SUPPORT_PROC_STATE_H
#define GW_TESTS_SUPPORT_PROC_STATE_H

#include <stdio.h>
#include <string.h>

/* The state letter of process pid (R, S, Z, ...), or 0 when it is gone
 * (reaped, or never was). The letter follows the command's closing
 * parenthesis, which the command itself may contain: hence strrchr. */
static inline char proc_state(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

#endif /* GW_TESTS_SUPPORT_PROC_STATE_H */
