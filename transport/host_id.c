/*
 * host_id.c - which ranks share a host, as far as shared memory is concerned
 * (contract in host_id.h): a hash of the host name, the kernel's boot id and
 * the identities of our network namespace, pid namespace and /dev/shm.
 * The mux (mux.c) publishes it in every rank's address for the plan
 * (select.c), and the shared-memory transport refuses peers with another
 * id.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/sha256.h"
#include "transport/host_id.h"

#define SUBSYS "select"

static void hash_file_id(gw_sha256_t *h, const gw_logger_t *lg, const char *label, const char *path)
{
    struct stat sb;
    gw__sha256_update(h, label, strlen(label) + 1);
    if (stat(path, &sb) != 0) {
        GW_TRACE(lg, SUBSYS, "host id: stat(%s): %m (left out)", path);
        return;
    }
    uint64_t v[2] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino};
    gw__sha256_update(h, v, sizeof(v));
}

gw_status_t gw__host_id(const gw_logger_t *lg, uint64_t *out)
{
    gw_sha256_t h;
    gw__sha256_init(&h);
    char buf[256];
    memset(buf, 0, sizeof(buf));
    if (gethostname(buf, sizeof(buf) - 1) != 0)
        GW_TRACE(lg, SUBSYS, "host id: gethostname: %m (left out)");
    gw__sha256_update(&h, "host", 5);
    gw__sha256_update(&h, buf, strlen(buf) + 1);
    memset(buf, 0, sizeof(buf));
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
            n = 0;
        buf[n] = '\0';
        close(fd);
    } else {
        GW_TRACE(lg, SUBSYS, "host id: /proc/sys/kernel/random/boot_id: %m (left out)");
    }
    gw__sha256_update(&h, "boot", 5);
    gw__sha256_update(&h, buf, strlen(buf) + 1);
    /* The namespace links name the namespace by inode; their stat() is the
     * namespace's identity. */
    hash_file_id(&h, lg, "netns", "/proc/self/ns/net");
    hash_file_id(&h, lg, "pidns", "/proc/self/ns/pid");
    hash_file_id(&h, lg, "devshm", "/dev/shm");
    uint8_t digest[GW_SHA256_DIGEST_LEN];
    gw__sha256_final(&h, digest);
    uint64_t id;
    memcpy(&id, digest, sizeof(id));
    *out = id;
    return GW_OK;
}

gw_status_t gw__host_id_published(const gw_logger_t *lg, uint64_t *out)
{
    const char *fake = NULL;
    if (gw__env_str(lg, GW_ENV_HOST_ID, &fake) != GW_OK)
        return GW_ERR_CONFIG;
    if (!fake)
        return gw__host_id(lg, out);
    if (!*fake) {
        GW_ERROR(lg, SUBSYS, "GW_HOST_ID is set but empty: unset it or name a host");
        return GW_ERR_CONFIG;
    }
    gw_sha256_t h;
    gw__sha256_init(&h);
    gw__sha256_update(&h, "fake-host", 10);
    gw__sha256_update(&h, fake, strlen(fake) + 1);
    uint8_t digest[GW_SHA256_DIGEST_LEN];
    gw__sha256_final(&h, digest);
    memcpy(out, digest, sizeof(*out));
    GW_INFO(lg, SUBSYS, "host id from GW_HOST_ID=\"%s\" (testing override)", fake);
    return GW_OK;
}
