/*
 * byteorder.h - load and store integers at unaligned addresses in an
 * explicit byte order.
 *
 * Every wire format and file format of gradwire names its byte order, and
 * this is the one place that implements them: big-endian (network order)
 * for what crosses the network (TCP frames, verbs out-of-band messages, the
 * bootstrap protocol), little-endian for files that stay on the machines
 * that wrote them (compression state). The shared-memory transport's
 * control words are read only by processes of the same host; they use
 * little-endian too so that no format depends on the host's order.
 *
 * memcpy keeps the accesses legal at any alignment (the compiler turns it
 * into a single load or store); glibc's <endian.h> swaps where needed.
 */
#ifndef GW_COMMON_BYTEORDER_H
#define GW_COMMON_BYTEORDER_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void gw__put_be16(uint8_t *p, uint16_t v)
{
    v = htobe16(v);
    memcpy(p, &v, sizeof v);
}

static inline void gw__put_be32(uint8_t *p, uint32_t v)
{
    v = htobe32(v);
    memcpy(p, &v, sizeof v);
}

static inline void gw__put_be64(uint8_t *p, uint64_t v)
{
    v = htobe64(v);
    memcpy(p, &v, sizeof v);
}

static inline uint16_t gw__get_be16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return be16toh(v);
}

static inline uint32_t gw__get_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return be32toh(v);
}

static inline uint64_t gw__get_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return be64toh(v);
}

static inline void gw__put_le32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof v);
}

static inline void gw__put_le64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof v);
}

static inline uint32_t gw__get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return le32toh(v);
}

static inline uint64_t gw__get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

#endif
