/*
 * kit_file.c - how the programs create the files that hold a user's data
 * or results (checkpoints, weights, reports, benchmark JSON): readable and
 * writable by the user alone. On a shared machine a world-readable file in
 * a project directory shows other users the model and what it measured.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"

FILE *gw_kit_fopen_private(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, GW_KIT_PRIVATE_MODE);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f)
        close(fd);
    return f;
}

void gw_kit_read_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}
