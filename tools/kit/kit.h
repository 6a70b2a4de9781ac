/*
 * kit.h - the small kit that gradwire's programs share (gradwire-bench,
 * gradwire-train, the `gradwire` command and the developer tools): number
 * parsing with one set of rules and suffixes, usage errors in one form,
 * getopt_long's error cases, one JSON writer, a monotonic clock and the
 * RDMA ports sysfs shows.
 *
 * The kit sees neither the library nor its internals: it is libc only, so
 * that every program built on the public API can link it as a user's
 * program would. It keeps no state between calls.
 */
#ifndef GW_TOOLS_KIT_H
#define GW_TOOLS_KIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The exit status of every program after a bad command line. */
#define GW_KIT_EXIT_USAGE 2

/* ---- numbers (kit_parse.c) ---- */

/* A whole-string decimal integer in [min, max] into *out. Returns 0, or -1
 * for anything else: empty, leading space, trailing characters, overflow,
 * out of range (*out is then untouched). */
int gw_kit_parse_long(const char *s, long min, long max, long *out);

/* A whole-string floating-point number in [min, max] (NaN is never in
 * range). Returns 0 or -1, as gw_kit_parse_long. */
int gw_kit_parse_double(const char *s, double min, double max, double *out);

/* A whole-string unsigned integer, decimal, 0x hexadecimal or 0 octal, as
 * strtoull reads them with base 0, without a sign. Returns 0 or -1. */
int gw_kit_parse_u64(const char *s, uint64_t *out);

/* "4096", "64K", "32M", "1G", "2T" (binary multiples, either case; an
 * optional "B" or "iB" may follow the suffix) into *out. Returns 0, or -1
 * for anything else: empty, signs, spaces, unknown suffixes, overflow. */
int gw_kit_parse_size(const char *s, size_t *out);

/* "1,2,4,8": up to max positive integers (each at most 1000000) into out.
 * Returns how many, or -1 for an empty list, a bad element or too many. */
int gw_kit_parse_int_list(const char *s, int *out, int max);

/* ---- usage errors and getopt_long (kit_usage.c) ---- */

/* How a program names itself in a usage error: "NAME: message" and then
 * tail, e.g. "\n(see gradwire-bench p2p --help)\n". */
typedef struct gw_kit_prog {
    const char *name;
    const char *tail;
} gw_kit_prog_t;

/* Print a usage error on stderr; returns GW_KIT_EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int gw_kit_usage_error(const gw_kit_prog_t *p,
                                                             const char *fmt, ...);

/* Before a getopt_long loop: a fresh scan (glibc rescans from the start
 * after optind = 0) with getopt's own messages off, since ours name the
 * program. Option strings start with "+:": stop at the first operand, and
 * return ':' for a missing value. */
void gw_kit_getopt_begin(void);

/* The usage error for what getopt_long returned that no case of the loop
 * took: ':' (an option without its value) or '?' (an unknown option).
 * Returns GW_KIT_EXIT_USAGE. */
int gw_kit_getopt_error(const gw_kit_prog_t *p, int c, char **argv);

/* After the loop of a program that takes no operands: a usage error for
 * the first one, or -1 when there is none. */
int gw_kit_no_operands(const gw_kit_prog_t *p, int argc, char **argv);

/* ---- RDMA ports as sysfs shows them (kit_rdma.c) ---- */

#define GW_KIT_RDMA_GIDS 8
typedef struct gw_kit_rdma_port {
    char device[64]; /* "mlx5_0", "rxe0" */
    int port;        /* from 1 */
    char state[24];  /* "ACTIVE", "DOWN", ... */
    char link_layer[24];
    int ngids; /* the first GW_KIT_RDMA_GIDS non-zero GIDs */
    struct {
        int index;
        char gid[48];
        char type[24];   /* "RoCE v2", "IB/RoCE v1", or "" */
        char netdev[32]; /* the Ethernet device of a RoCE GID, or "" */
    } gids[GW_KIT_RDMA_GIDS];
} gw_kit_rdma_port_t;

/* Up to cap ports of every device under $GW_IB_SYSFS (default /sys)
 * /class/infiniband, sorted by device and port; 0 when there is none. */
int gw_kit_rdma_ports(gw_kit_rdma_port_t *out, int cap);

/* ---- JSON (kit_json.c) ---- */

#define GW_KIT_JSON_DEPTH 8

/*
 * A streaming JSON writer that keeps the layout its caller chooses. Each
 * container is opened with the whitespace that goes before each of its
 * members (NULL: none before the first, one space after each comma: an
 * inline container); gw_kit_json_break() replaces it for the next member
 * only, and gw_kit_json_close() writes its whitespace before the bracket
 * only when the container has members. Keys are NULL inside arrays.
 * Numbers print with %.*g in `digits` significant digits, and as null when
 * they are not finite (JSON has no NaN or infinity); strings are escaped.
 */
typedef struct gw_kit_json {
    FILE *f;
    int digits;
    int depth;
    const char *next_ws;
    struct {
        char close;
        int members;
        const char *ws;
    } level[GW_KIT_JSON_DEPTH];
} gw_kit_json_t;

void gw_kit_json_start(gw_kit_json_t *j, FILE *f, int digits);
void gw_kit_json_object(gw_kit_json_t *j, const char *key, const char *ws);
void gw_kit_json_array(gw_kit_json_t *j, const char *key, const char *ws);
void gw_kit_json_close(gw_kit_json_t *j, const char *ws);
void gw_kit_json_break(gw_kit_json_t *j, const char *ws);
void gw_kit_json_num(gw_kit_json_t *j, const char *key, double v);
void gw_kit_json_int(gw_kit_json_t *j, const char *key, long long v);
void gw_kit_json_uint(gw_kit_json_t *j, const char *key, unsigned long long v);
void gw_kit_json_bool(gw_kit_json_t *j, const char *key, int v);
void gw_kit_json_null(gw_kit_json_t *j, const char *key);
/* s as an escaped string, or null when s is NULL. */
void gw_kit_json_str(gw_kit_json_t *j, const char *key, const char *s);
/* v when present, else null. */
void gw_kit_json_num_or_null(gw_kit_json_t *j, const char *key, int present, double v);
void gw_kit_json_int_or_null(gw_kit_json_t *j, const char *key, int present, long long v);

/* ---- files (kit_file.c) ---- */

/* The mode of the files that hold a user's data or results. */
#define GW_KIT_PRIVATE_MODE 0600

/* fopen(path, "w") for such a file: a file it creates has mode
 * GW_KIT_PRIVATE_MODE (less the umask), not 0666; one that exists keeps its
 * mode. NULL with errno set on failure. */
FILE *gw_kit_fopen_private(const char *path);

/* The first line of the file at path (a sysfs or procfs value), without its
 * newline, into out[0..cap); "" when it cannot be read. */
void gw_kit_read_line(const char *path, char *out, size_t cap);

/* ---- time and order statistics (kit_time.c) ---- */

/* CLOCK_MONOTONIC, in nanoseconds, microseconds or seconds. */
int64_t gw_kit_now_ns(void);
double gw_kit_now_us(void);
double gw_kit_now_s(void);

/* ---- timelines (kit_trace.c) ---- */

/* Merge the ranks' GW_TRACE files FILE.rank-0.json .. FILE.rank-(n-1).json
 * into FILE (0600) and remove them, after waiting up to wait_ms for each
 * to be complete. 0 (with how many ranks' files and events went in; no
 * file at all: nothing written), -1 when FILE could not be written (said
 * on stderr). */
int gw_kit_trace_merge(const char *file, int nranks, int wait_ms, int *merged, int *events);

/* Sort v[0..n) ascending. */
void gw_kit_sort(double *v, size_t n);

/* The median of v[0..n) (n > 0, sorted ascending): the middle element, or
 * the mean of the two middle ones. */
double gw_kit_median_sorted(const double *v, size_t n);

/* The p-th percentile of v[0..n) (n > 0, sorted ascending) by the
 * nearest-rank method: the smallest element with at least p% of the
 * elements at or below it. */
double gw_kit_percentile_sorted(const double *v, size_t n, double p);

#endif
