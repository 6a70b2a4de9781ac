/*
 * fd_count.h - the open file descriptors of this process, and the sockets
 * among them, from /proc/self/fd; and gradwire's shared-memory segments
 * mapped, from /proc/self/maps: what the workers that check connection
 * counts (worker_split, worker_scale) report. Header-only: the workers
 * link the library alone.
 */
#ifndef GW_TESTS_SUPPORT_FD_COUNT_H
#define GW_TESTS_SUPPORT_FD_COUNT_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static inline void count_fds(int *fds, int *socks)
{
    *fds = *socks = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], link[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
            continue;
        link[n] = '\0';
        (*fds)++;
        if (strncmp(link, "socket:", 7) == 0)
            (*socks)++;
    }
    closedir(d);
    (*fds)--; /* the directory's own */
}

/* Lines of /proc/self/maps that contain `needle`, -1 when it cannot be read. */
static inline int count_maps_of(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Mappings of /dev/shm/gw-* (the segments of connected pairs). */
static inline int count_shm_maps(void) { return count_maps_of("/dev/shm/gw-"); }

#endif
