/*
 * ib_gid.c - which GID a RoCE port uses.
 *
 * On RoCE the GID table holds one entry per IP address of the network
 * device and RoCE version, in an order that depends on when the addresses
 * were added, and index 0 is the link-local RoCE v1 GID derived from the
 * MAC address. Picking the wrong entry is the most common RoCE support
 * question: v1 is not routable, a link-local GID does not reach other
 * subnets, and ranks that pick different versions cannot talk at all. So,
 * unless GW_IB_GID_INDEX says otherwise, we take the entry every rank of a
 * cluster configured alike will also take: the first RoCE v2 GID that is an
 * IPv4-mapped address (::ffff:a.b.c.d), then the first global IPv6 RoCE v2
 * GID, then the same for RoCE v1; link-local GIDs only when nothing else
 * exists, and zero GIDs (unused entries) never. The version of each entry
 * comes from sysfs (gid_attrs/types), which is also what rdma-core's tools
 * read; the sysfs root is a parameter so that the tests can build fake
 * trees.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ib/ib_internal.h"

int gw__ib_gid_parse(const char *text, uint8_t gid[16])
{
    /* "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx", eight groups of four hex
     * digits, as the kernel prints them. */
    const char *s = text;
    for (int g = 0; g < 8; g++) {
        unsigned v = 0;
        for (int k = 0; k < 4; k++, s++) {
            char c = *s;
            unsigned d;
            if (c >= '0' && c <= '9')
                d = (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                d = (unsigned)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                d = (unsigned)(c - 'A' + 10);
            else
                return -1;
            v = v * 16 + d;
        }
        gid[2 * g] = (uint8_t)(v >> 8);
        gid[2 * g + 1] = (uint8_t)v;
        if (g < 7 && *s++ != ':')
            return -1;
    }
    while (*s == '\n' || *s == ' ')
        s++;
    return *s == '\0' ? 0 : -1;
}

static int is_zero(const uint8_t gid[16])
{
    for (int i = 0; i < 16; i++)
        if (gid[i])
            return 0;
    return 1;
}

static int is_v4_mapped(const uint8_t gid[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static int is_link_local(const uint8_t gid[16])
{
    return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

void gw__ib_gid_str(const uint8_t gid[16], char *buf, size_t cap)
{
    char tmp[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, gid, tmp, sizeof(tmp)))
        snprintf(tmp, sizeof(tmp), "?");
    snprintf(buf, cap, "%s", tmp);
}

/* The first line of a small sysfs file, without its newline; -1 when it
 * cannot be read (the kernel answers EINVAL for unused GID entries). */
static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char *ok = fgets(buf, (int)cap, f);
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Higher is better; -1: never. */
static int score(const char *type, const uint8_t gid[16])
{
    if (is_zero(gid))
        return -1;
    int v2 = strcmp(type, "RoCE v2") == 0;
    int v1 = strcmp(type, "IB/RoCE v1") == 0 || strcmp(type, "RoCE v1") == 0;
    if (!v1 && !v2)
        return -1;
    if (is_link_local(gid))
        return v2 ? 1 : 0;
    if (is_v4_mapped(gid))
        return v2 ? 5 : 3;
    return v2 ? 4 : 2;
}

/* Entry i of a port's table (dir: .../ports/<port>): 0 with its GID and
 * type; -1 when the GID cannot be read or parsed (an unused entry reads as
 * EINVAL), -2 when only the type cannot. */
static int read_entry(const char *dir, long i, uint8_t gid[16], char *type, size_t type_cap)
{
    char path[600], text[128];
    snprintf(path, sizeof(path), "%s/gids/%ld", dir, i);
    if (read_line(path, text, sizeof(text)) != 0 || gw__ib_gid_parse(text, gid) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/gid_attrs/types/%ld", dir, i);
    if (read_line(path, type, type_cap) != 0)
        return -2;
    return 0;
}

/* Calls fn for every numbered entry of the port's table; the number of
 * entries, or -1 with errno when the table cannot be listed. */
typedef void (*entry_fn)(void *ctx, long index, int readable, const uint8_t gid[16],
                         const char *type);
static int for_each_entry(const char *dir, entry_fn fn, void *ctx)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/gids", dir);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int entries = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL;
        long i = strtol(de->d_name, &end, 10);
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end != '\0' || i > 65535)
            continue;
        entries++;
        uint8_t gid[16];
        char type[32] = "";
        int r = read_entry(dir, i, gid, type, sizeof(type));
        fn(ctx, i, r == 0, gid, type);
    }
    closedir(d);
    return entries;
}

static void port_dir(const char *sysfs, const char *device, int port, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/class/infiniband/%s/ports/%d", sysfs, device, port);
}

typedef struct best_state {
    int best, best_score;
    char best_type[32];
    uint8_t best_gid[16];
} best_state_t;

static void consider(void *ctx, long i, int readable, const uint8_t gid[16], const char *type)
{
    best_state_t *b = ctx;
    if (!readable)
        return;
    int s = score(type, gid);
    if (s > b->best_score || (s == b->best_score && s >= 0 && i < b->best)) {
        b->best_score = s;
        b->best = (int)i;
        snprintf(b->best_type, sizeof(b->best_type), "%s", type);
        memcpy(b->best_gid, gid, sizeof(b->best_gid));
    }
}

gw_status_t gw__ib_gid_pick(const char *sysfs, const char *device, int port, int *index, char *desc,
                            size_t desc_cap)
{
    char dir[512];
    port_dir(sysfs, device, port, dir, sizeof(dir));
    best_state_t b = {.best = -1, .best_score = -1};
    int entries = for_each_entry(dir, consider, &b);
    if (entries < 0) {
        snprintf(desc, desc_cap, "cannot list %s/gids: %s", dir, strerror(errno));
        return GW_ERR_NOT_FOUND;
    }
    if (b.best < 0 || b.best_score < 0) {
        snprintf(desc, desc_cap,
                 "%s:%d has no usable RoCE GID among %d entries (is an IP address configured "
                 "on its network device?)",
                 device, port, entries);
        return GW_ERR_NOT_FOUND;
    }
    char gs[64];
    gw__ib_gid_str(b.best_gid, gs, sizeof(gs));
    snprintf(desc, desc_cap, "GID index %d (%s, %s%s)", b.best, b.best_type, gs,
             b.best_score <= 1 ? ", link-local: other subnets are out of reach" : "");
    *index = b.best;
    return GW_OK;
}

/* The usable entries, lowest index first, as "1 (RoCE v2, ::ffff:1.2.3.4),
 * 3 (...)"; at most 16 of them. */
typedef struct usable_list {
    long index[16];
    char text[16][96];
    int n;
    int roce;
} usable_list_t;

static void collect_usable(void *ctx, long i, int readable, const uint8_t gid[16], const char *type)
{
    usable_list_t *u = ctx;
    if (!readable || is_zero(gid) || (u->roce && score(type, gid) < 0))
        return;
    /* Insert in index order; keep the 16 lowest. */
    int at = u->n;
    while (at > 0 && u->index[at - 1] > i)
        at--;
    if (at >= 16)
        return;
    int last = u->n < 16 ? u->n : 15;
    for (int k = last; k > at; k--) {
        u->index[k] = u->index[k - 1];
        memcpy(u->text[k], u->text[k - 1], sizeof(u->text[k]));
    }
    char gs[64];
    gw__ib_gid_str(gid, gs, sizeof(gs));
    u->index[at] = i;
    /* A line longer than its slot keeps its start, marked as cut. */
    if (snprintf(u->text[at], sizeof(u->text[at]), "%ld (%s, %s%s)", i, type[0] ? type : "?", gs,
                 is_link_local(gid) ? ", link-local" : "") >= (int)sizeof(u->text[at]))
        memcpy(u->text[at] + sizeof(u->text[at]) - 4, "...", 4);
    if (u->n < 16)
        u->n++;
}

gw_status_t gw__ib_gid_check(const char *sysfs, const char *device, int port, int index, int roce,
                             int table_len, char *desc, size_t desc_cap)
{
    char dir[512];
    port_dir(sysfs, device, port, dir, sizeof(dir));
    char probe[600];
    snprintf(probe, sizeof(probe), "%s/gids", dir);
    DIR *d = opendir(probe);
    if (d)
        closedir(d);
    else {
        /* No sysfs (a container without /sys/class/infiniband): only the
         * range can be checked here; the caller queries the GID itself. */
        if (index >= table_len) {
            snprintf(desc, desc_cap,
                     "GW_IB_GID_INDEX=%d: %s port %d has no GID at index %d (its table has %d "
                     "entries, 0..%d)",
                     index, device, port, index, table_len, table_len - 1);
            return GW_ERR_CONFIG;
        }
        snprintf(desc, desc_cap, "GID index %d (GW_IB_GID_INDEX)", index);
        return GW_OK;
    }
    char why[160] = "";
    uint8_t gid[16];
    char type[32] = "";
    int r =
        index < table_len && index <= 65535 ? read_entry(dir, index, gid, type, sizeof(type)) : -3;
    if (r == -3)
        snprintf(why, sizeof(why), "has no GID at index %d (its table has %d entries, 0..%d)",
                 index, table_len, table_len - 1);
    else if (r == -1 || is_zero(gid))
        snprintf(why, sizeof(why), "has no GID at index %d (the entry is unused: all zeros)",
                 index);
    else if (roce && r == -2)
        snprintf(why, sizeof(why),
                 "cannot tell the RoCE version of GID index %d (gid_attrs/types unreadable)",
                 index);
    else if (roce && score(type, gid) < 0)
        snprintf(why, sizeof(why), "has GID index %d of type '%s', which is not RoCE v1 or v2",
                 index, type);
    if (!why[0]) {
        char gs[64];
        gw__ib_gid_str(gid, gs, sizeof(gs));
        snprintf(desc, desc_cap, "GID index %d (%s, %s, from GW_IB_GID_INDEX%s)", index,
                 type[0] ? type : "?", gs,
                 is_link_local(gid) ? "; link-local: other subnets are out of reach" : "");
        return GW_OK;
    }
    usable_list_t u = {.roce = roce};
    int entries = for_each_entry(dir, collect_usable, &u);
    size_t used = (size_t)snprintf(desc, desc_cap, "GW_IB_GID_INDEX=%d: %s port %d %s; ", index,
                                   device, port, why);
    if (u.n == 0) {
        if (used < desc_cap)
            snprintf(desc + used, desc_cap - used,
                     "no entry of its %d is usable (is an IP address configured on its network "
                     "device?)",
                     entries);
        return GW_ERR_CONFIG;
    }
    if (used < desc_cap)
        used += (size_t)snprintf(desc + used, desc_cap - used, "usable indices: ");
    for (int k = 0; k < u.n && used < desc_cap; k++)
        used += (size_t)snprintf(desc + used, desc_cap - used, "%s%s", k ? ", " : "", u.text[k]);
    if (used < desc_cap)
        snprintf(desc + used, desc_cap - used, " (or unset it: gradwire picks one)");
    return GW_ERR_CONFIG;
}
