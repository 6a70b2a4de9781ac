/*
 * checkpoint_dir.c - what a checkpoint directory holds besides the current
 * checkpoint: leftovers of killed writes, and checkpoints that nothing names.
 *
 * A write goes to a temporary file first (checkpoint.c). A rank killed
 * between creating it and renaming it leaves the temporary behind, and
 * nothing else would ever remove it. The temporary's name says whose it
 * is: ".gradwire-train-tmp.PID.FINAL" (earlier versions wrote
 * ".FINAL.tmp.PID"), and at start rank 0 removes every such name, and no
 * other, from the checkpoint directory. Rank 0 does so before its first
 * collective call, and no rank can write a checkpoint before the first
 * training step, which needs rank 0: so no live write is ever removed.
 *
 * `latest` names the step to resume from. When it is missing but
 * checkpoints are there (a copy that lost it, or a crash after the files
 * and before the name), starting from step 0 would prune the user's model
 * at the first checkpoint: --resume refuses instead, and says what it
 * found and how to pick a step.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer.h"

#define TMP_PREFIX ".gradwire-train-tmp."

/* s is one or more decimal digits, then exactly tail. */
static int digits_then(const char *s, const char *tail)
{
    const char *p = s;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > s && strcmp(p, tail) == 0;
}

/* name is the final name of a file checkpoint.c writes: "latest" or
 * "ckpt-STEP-rankR.gwc" with decimal STEP and R. */
static int final_name(const char *name, size_t len)
{
    if (len == 6 && strncmp(name, "latest", 6) == 0)
        return 1;
    char buf[256];
    if (len >= sizeof(buf) || strncmp(name, "ckpt-", 5) != 0)
        return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    char *dash = strchr(buf + 5, '-');
    if (!dash || dash == buf + 5 || strncmp(dash, "-rank", 5) != 0)
        return 0;
    *dash = '\0';
    return digits_then(buf + 5, "") && digits_then(dash + 5, ".gwc");
}

int gw_train_ckpt_is_tmp_name(const char *name)
{
    size_t plen = strlen(TMP_PREFIX);
    if (strncmp(name, TMP_PREFIX, plen) == 0) {
        const char *p = name + plen, *q = p;
        while (*q >= '0' && *q <= '9')
            q++;
        return q > p && *q == '.' && final_name(q + 1, strlen(q + 1));
    }
    /* The earlier versions' ".FINAL.tmp.PID". */
    const char *t = strstr(name, ".tmp.");
    if (name[0] != '.' || !t)
        return 0;
    return final_name(name + 1, (size_t)(t - name - 1)) && digits_then(t + 5, "");
}

void gw_train_ckpt_tmp_path(const char *dir, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/" TMP_PREFIX "%ld.%s", dir, (long)getpid(), name);
}

void gw_train_ckpt_clean_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    int removed = 0;
    while ((e = readdir(d)) != NULL) {
        if (!gw_train_ckpt_is_tmp_name(e->d_name))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            removed++;
        else if (errno != ENOENT)
            fprintf(stderr, "gradwire-train: cannot remove the leftover %s: %m\n", path);
    }
    closedir(d);
    if (removed)
        fprintf(stderr,
                "gradwire-train: removed %d temporary file(s) that killed checkpoint writes left "
                "in %s\n",
                removed, dir);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

gw_status_t gw_train_ckpt_check_resume(const char *dir)
{
    uint64_t step;
    gw_status_t st = gw_train_ckpt_get_latest(dir, &step);
    if (st != GW_ERR_NOT_FOUND)
        return GW_OK; /* there is a `latest`; resuming checks what it names */
    DIR *d = opendir(dir);
    if (!d)
        return GW_OK; /* nothing there yet: the run creates it, or fails saying why */
    uint64_t *steps = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long s;
        unsigned r;
        char tail[8];
        if (!final_name(e->d_name, strlen(e->d_name)) ||
            sscanf(e->d_name, "ckpt-%llu-rank%u.%7s", &s, &r, tail) != 3)
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            uint64_t *ns = realloc(steps, nc * sizeof(*ns));
            if (!ns)
                break; /* the steps so far still make the refusal */
            steps = ns;
            cap = nc;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (n == 0) {
        free(steps);
        return GW_OK;
    }
    qsort(steps, n, sizeof(*steps), cmp_u64);
    /* Each step once, with the number of rank files it has. */
    char list[1024] = "";
    size_t used = 0, shown = 0, distinct = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && steps[j] == steps[i])
            j++;
        distinct++;
        if (shown < 8 && used < sizeof(list)) {
            int w =
                snprintf(list + used, sizeof(list) - used, "\n  step %" PRIu64 " (%zu rank file%s)",
                         steps[i], j - i, j - i == 1 ? "" : "s");
            used += w > 0 ? (size_t)w : 0;
            shown++;
        }
        i = j;
    }
    uint64_t newest = steps[n - 1];
    fprintf(stderr,
            "gradwire-train: --resume: %s holds checkpoints but no `latest` file naming the one to "
            "resume from:%s%s\n"
            "Refusing to start from step 0, which would prune them. To resume, name a step whose "
            "files exist for every rank in %s/latest (e.g. echo %" PRIu64 " > %s/latest); to start "
            "afresh, use another --checkpoint-dir or move the files away.\n",
            dir, list, distinct > shown ? "\n  ..." : "", dir, newest, dir);
    free(steps);
    return GW_ERR_CONFIG;
}
