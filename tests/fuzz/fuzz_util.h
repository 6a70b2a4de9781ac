/*
 * fuzz_util.h - what the libFuzzer targets in tests/fuzz share: a logger
 * that formats every message (so that a format string fed bad bytes is
 * exercised) but writes it nowhere, a file holding the input for parsers
 * that read paths, and the checksums that the fuzzers patch so that
 * mutated inputs reach the checks behind them.
 *
 * A fuzz target is a program of its own, so the small amount of state here
 * (the /dev/null stream, opened once) is the harness's, not the library's.
 */
#ifndef GW_TESTS_FUZZ_UTIL_H
#define GW_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A violated property of a parser (a decode that does not round-trip, an
 * accepted value out of its range) is a finding like a crash: trap so that
 * libFuzzer saves the input. */
#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz: %s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                                 \
        }                                                                                     \
    } while (0)

/* A logger at TRACE writing to /dev/null: every message is formatted. */
static inline const gw_logger_t *fuzz_logger(void)
{
    static gw_logger_t lg;
    if (!lg.file) {
        lg.file = fopen("/dev/null", "w");
        if (!lg.file)
            abort();
        lg.level = GW_LOG_TRACE;
        lg.rank = 0;
        snprintf(lg.host, sizeof(lg.host), "fuzz");
    }
    return &lg;
}

/* The bytes in an anonymous memory file; *path names it for open(), fopen()
 * and gzopen() (/proc/self/fd/N). Returns the descriptor, to be closed by
 * the caller; aborts when the system refuses, which is not a finding. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("gw-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            abort();
        off += (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

/* The input as a NUL-terminated string (malloc'd). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
