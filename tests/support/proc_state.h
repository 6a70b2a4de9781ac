/*
 * proc_state.h - a process's state letter from /proc/PID/stat, for tests
 * and workers that watch ranks end (Z: ended, not reaped yet).
 */
#ifndef GW_TESTS_SUPPORT_PROC_STATE_H
#define GW_TESTS_SUPPORT_PROC_STATE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
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

/* How many live processes have arg as one of their arguments
 * (/proc/PID/cmdline): a test that passes each job a directory of its own
 * finds the job's processes by it, whether or not they got as far as
 * saying who they are. Zombies have no arguments left, so they do not
 * count. */
static inline int procs_with_arg(const char *arg)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[8192];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        for (size_t at = 0; at < n; at += strlen(buf + at) + 1)
            if (strcmp(buf + at, arg) == 0) {
                found++;
                break;
            }
    }
    closedir(d);
    return found;
}

#endif /* GW_TESTS_SUPPORT_PROC_STATE_H */
