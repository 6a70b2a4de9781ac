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

gw_status_t gw__ib_gid_pick(const char *sysfs, const char *device, int port, int *index, char *desc,
                            size_t desc_cap)
{
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports/%d", sysfs, device, port);
    snprintf(path, sizeof(path), "%s/gids", dir);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(desc, desc_cap, "cannot list %s: %s", path, strerror(errno));
        return GW_ERR_NOT_FOUND;
    }
    int best = -1, best_score = -1, entries = 0;
    char best_type[32] = "";
    uint8_t best_gid[16];
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL;
        long i = strtol(de->d_name, &end, 10);
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end != '\0' || i > 65535)
            continue;
        entries++;
        char text[128], type[32];
        uint8_t gid[16];
        snprintf(path, sizeof(path), "%s/gids/%ld", dir, i);
        if (read_line(path, text, sizeof(text)) != 0 || gw__ib_gid_parse(text, gid) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/gid_attrs/types/%ld", dir, i);
        if (read_line(path, type, sizeof(type)) != 0)
            continue;
        int s = score(type, gid);
        if (s > best_score || (s == best_score && s >= 0 && i < best)) {
            best_score = s;
            best = (int)i;
            snprintf(best_type, sizeof(best_type), "%s", type);
            memcpy(best_gid, gid, sizeof(best_gid));
        }
    }
    closedir(d);
    if (best < 0 || best_score < 0) {
        snprintf(desc, desc_cap,
                 "%s:%d has no usable RoCE GID among %d entries (is an IP address configured "
                 "on its network device?)",
                 device, port, entries);
        return GW_ERR_NOT_FOUND;
    }
    char gs[64];
    gw__ib_gid_str(best_gid, gs, sizeof(gs));
    snprintf(desc, desc_cap, "GID index %d (%s, %s%s)", best, best_type, gs,
             best_score <= 1 ? ", link-local: other subnets are out of reach" : "");
    *index = best;
    return GW_OK;
}
