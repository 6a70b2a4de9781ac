/*
 * tuning_file.c - the tuning file (format in tuning.h): every figure, rule
 * and forced algorithm of the cost model is a key of it, declared once in
 * the table below, which parsing, merging into a communicator's defaults,
 * writing and the log line all read.
 *
 * The file is strict on purpose: a typo in a key or a value that does not
 * parse would otherwise leave a default in force that the user believes
 * replaced, and a wrong algorithm choice shows up only as a slow job. So
 * every problem is an error naming the file and the line, and a key may
 * appear once.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/tuning.h"
#include "common/env.h"
#include "common/file_read.h"

#define TUNING_LINE_MAX 1024
/* Figures beyond these are not measurements of any network: a message that
 * takes a minute, a byte that takes a second. */
#define TUNING_SECONDS_MAX 60.0
#define TUNING_PER_BYTE_MAX 1.0
/* Byte thresholds of the rules: up to 1 TiB ("never" in practice). */
#define TUNING_BYTES_MAX ((long)1 << 40)

typedef enum key_type {
    KEY_SECONDS,  /* double, seconds per message */
    KEY_PER_BYTE, /* double, seconds per byte */
    KEY_CHUNK,    /* size_t, a pipeline chunk */
    KEY_BYTES,    /* size_t, a rule's threshold */
    KEY_RANKS,    /* int, a rule's rank count (0: the rule is off) */
    KEY_ALGO,     /* gw_algo_t forced for one kind of collective */
} key_type_t;

typedef struct key {
    const char *name;
    key_type_t type;
    size_t off;          /* of the field in gw_tuning_t */
    gw_coll_kind_t kind; /* KEY_ALGO: whose algorithm */
} tuning_key_t;

#define FIELD(f) offsetof(gw_tuning_t, f)
#define FORCED(k) (offsetof(gw_tuning_t, force) + (size_t)(k) * sizeof(gw_algo_t))

static const tuning_key_t keys[] = {
    {"alpha", KEY_SECONDS, FIELD(alpha), 0},
    {"beta", KEY_PER_BYTE, FIELD(beta), 0},
    {"gamma", KEY_PER_BYTE, FIELD(gamma), 0},
    {"chunk_bytes", KEY_CHUNK, FIELD(chunk_bytes), 0},
    {"beta_local", KEY_PER_BYTE, FIELD(beta_local), 0},
    {"alpha_local", KEY_SECONDS, FIELD(alpha_local), 0},
    {"direct_large_min", KEY_BYTES, FIELD(direct_large_min), 0},
    {"direct_large_max_ranks", KEY_RANKS, FIELD(direct_large_max_ranks), 0},
    {"direct_max_bytes", KEY_BYTES, FIELD(direct_max_bytes), 0},
    {"direct_max_ranks", KEY_RANKS, FIELD(direct_max_ranks), 0},
    {"direct_pair_min", KEY_BYTES, FIELD(direct_pair_min), 0},
    {"tree4_min", KEY_BYTES, FIELD(tree4_min), 0},
    {"tree4_end", KEY_BYTES, FIELD(tree4_end), 0},
    {"direct_shm_min", KEY_BYTES, FIELD(direct_shm_min), 0},
    {"allreduce", KEY_ALGO, FORCED(GW_COLL_ALLREDUCE), GW_COLL_ALLREDUCE},
    {"allgather", KEY_ALGO, FORCED(GW_COLL_ALLGATHER), GW_COLL_ALLGATHER},
    {"reduce_scatter", KEY_ALGO, FORCED(GW_COLL_REDUCE_SCATTER), GW_COLL_REDUCE_SCATTER},
    {"broadcast", KEY_ALGO, FORCED(GW_COLL_BROADCAST), GW_COLL_BROADCAST},
    {"reduce", KEY_ALGO, FORCED(GW_COLL_REDUCE), GW_COLL_REDUCE},
};
#define NKEYS ((int)(sizeof(keys) / sizeof(keys[0])))

static void *field(gw_tuning_t *t, const tuning_key_t *k) { return (char *)t + k->off; }
static const void *cfield(const gw_tuning_t *t, const tuning_key_t *k)
{
    return (const char *)t + k->off;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* A finite, non-negative decimal number in [0, max], the whole string. */
static int parse_seconds(const char *s, double max, double *out)
{
    char *end = NULL;
    if (!*s)
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The value of key k from text into *t. Returns 0 or -1 after logging. */
static int parse_value(gw_tuning_t *t, const tuning_key_t *k, const char *value, const char *name,
                       long lineno, const gw_logger_t *lg)
{
    long v;
    double d;
    gw_algo_t a;
    switch (k->type) {
    case KEY_SECONDS:
    case KEY_PER_BYTE: {
        double max = k->type == KEY_SECONDS ? TUNING_SECONDS_MAX : TUNING_PER_BYTE_MAX;
        if (parse_seconds(value, max, &d) != 0) {
            GW_ERROR(lg, "tuning", "%s line %ld: %s \"%s\" is not a number of seconds in [0, %g]",
                     name, lineno, k->name, value, max);
            return -1;
        }
        *(double *)field(t, k) = d;
        return 0;
    }
    case KEY_CHUNK:
    case KEY_BYTES: {
        long lo = k->type == KEY_CHUNK ? 4096 : 0;
        long hi = k->type == KEY_CHUNK ? 1L << 30 : TUNING_BYTES_MAX;
        if (gw__parse_long(value, lo, hi, &v) != GW_OK) {
            GW_ERROR(lg, "tuning", "%s line %ld: %s \"%s\" is not an integer in [%ld, %ld]", name,
                     lineno, k->name, value, lo, hi);
            return -1;
        }
        *(size_t *)field(t, k) = (size_t)v;
        return 0;
    }
    case KEY_RANKS:
        if (gw__parse_long(value, 0, 1L << 20, &v) != GW_OK) {
            GW_ERROR(lg, "tuning", "%s line %ld: %s \"%s\" is not a rank count in [0, %ld]", name,
                     lineno, k->name, value, 1L << 20);
            return -1;
        }
        *(int *)field(t, k) = (int)v;
        return 0;
    case KEY_ALGO:
        if (gw_algo_parse(value, &a) != GW_OK || !gw__tuning_coll_has(k->kind, a)) {
            char known[128] = "auto";
            for (int i = 1; i < GW_ALGO_COUNT; i++)
                if (gw__tuning_coll_has(k->kind, (gw_algo_t)i)) {
                    size_t at = strlen(known);
                    snprintf(known + at, sizeof(known) - at, ", %s", gw_algo_name((gw_algo_t)i));
                }
            GW_ERROR(lg, "tuning", "%s line %ld: %s has no algorithm \"%s\" (it has: %s)", name,
                     lineno, k->name, value, known);
            return -1;
        }
        *(gw_algo_t *)field(t, k) = a;
        return 0;
    }
    return -1;
}

/* Apply "key = value" (both trimmed) to *t. Returns 0 or -1 after logging. */
static int apply_key(gw_tuning_t *t, int seen[NKEYS], const char *key, const char *value,
                     const char *name, long lineno, const gw_logger_t *lg)
{
    int k;
    for (k = 0; k < NKEYS && strcmp(key, keys[k].name) != 0; k++)
        ;
    if (k == NKEYS) {
        char known[512] = "";
        for (int i = 0; i < NKEYS; i++) {
            size_t at = strlen(known);
            snprintf(known + at, sizeof(known) - at, "%s%s", i ? ", " : "", keys[i].name);
        }
        GW_ERROR(lg, "tuning", "%s line %ld: unknown key \"%s\" (known: %s)", name, lineno, key,
                 known);
        return -1;
    }
    if (seen[k]) {
        GW_ERROR(lg, "tuning", "%s line %ld: %s given again (first on line %d)", name, lineno, key,
                 seen[k]);
        return -1;
    }
    seen[k] = (int)lineno;
    if (parse_value(t, &keys[k], value, name, lineno, lg) != 0)
        return -1;
    t->from_file |= (uint64_t)1 << k;
    return 0;
}

/* The version line "gradwire-tuning N". Returns 0 or -1 after logging. */
static int check_version(const char *s, const char *name, long lineno, const gw_logger_t *lg)
{
    static const char magic[] = "gradwire-tuning";
    size_t ml = sizeof(magic) - 1;
    long v;
    if (strncmp(s, magic, ml) != 0 || !isspace((unsigned char)s[ml])) {
        GW_ERROR(lg, "tuning",
                 "%s line %ld: expected the version line \"%s %d\" before anything else, found "
                 "\"%s\"",
                 name, lineno, magic, GW_TUNING_FILE_VERSION, s);
        return -1;
    }
    char vbuf[32];
    snprintf(vbuf, sizeof(vbuf), "%s", s + ml);
    if (gw__parse_long(trim(vbuf), 1, 1000000, &v) != GW_OK) {
        GW_ERROR(lg, "tuning", "%s line %ld: bad version in \"%s\"", name, lineno, s);
        return -1;
    }
    if (v != GW_TUNING_FILE_VERSION) {
        GW_ERROR(lg, "tuning",
                 "%s line %ld: tuning file version %ld; this library reads version %d", name,
                 lineno, v, GW_TUNING_FILE_VERSION);
        return -1;
    }
    return 0;
}

gw_status_t gw__tuning_parse(gw_tuning_t *t, FILE *f, const char *name, const gw_logger_t *lg)
{
    gw_tuning_t out = *t;
    int seen[NKEYS] = {0};
    int have_version = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    gw_status_t st = GW_ERR_CONFIG;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > TUNING_LINE_MAX) {
            GW_ERROR(lg, "tuning", "%s line %ld: longer than %d characters", name, lineno,
                     TUNING_LINE_MAX);
            goto out_free;
        }
        if (strlen(line) != (size_t)len) {
            GW_ERROR(lg, "tuning", "%s line %ld: NUL byte: not a text file", name, lineno);
            goto out_free;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        if (!have_version) {
            if (check_version(s, name, lineno, lg) != 0)
                goto out_free;
            have_version = 1;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            GW_ERROR(lg, "tuning", "%s line %ld: expected key = value, found \"%s\"", name, lineno,
                     s);
            goto out_free;
        }
        *eq = '\0';
        if (apply_key(&out, seen, trim(s), trim(eq + 1), name, lineno, lg) != 0)
            goto out_free;
    }
    if (ferror(f) || !feof(f)) { /* a read error, or getline out of memory */
        GW_ERROR(lg, "tuning", "%s: read failed after line %ld: %m", name, lineno);
        goto out_free;
    }
    if (!have_version) {
        GW_ERROR(lg, "tuning", "%s: empty: a tuning file starts with \"gradwire-tuning %d\"", name,
                 GW_TUNING_FILE_VERSION);
        goto out_free;
    }
    *t = out;
    st = GW_OK;
out_free:
    free(line);
    return st;
}

/* "key=value" of key k in *t into buf. */
static void format_key(const gw_tuning_t *t, const tuning_key_t *k, char *buf, size_t len)
{
    const void *p = cfield(t, k);
    switch (k->type) {
    case KEY_SECONDS:
    case KEY_PER_BYTE:
        snprintf(buf, len, "%s = %.9g", k->name, *(const double *)p);
        break;
    case KEY_CHUNK:
    case KEY_BYTES:
        snprintf(buf, len, "%s = %zu", k->name, *(const size_t *)p);
        break;
    case KEY_RANKS:
        snprintf(buf, len, "%s = %d", k->name, *(const int *)p);
        break;
    case KEY_ALGO:
        snprintf(buf, len, "%s = %s", k->name, gw_algo_name(*(const gw_algo_t *)p));
        break;
    }
}

void gw__tuning_describe_file(const gw_tuning_t *file, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < NKEYS && at + 1 < len; k++) {
        if (!(file->from_file & ((uint64_t)1 << k)))
            continue;
        char one[128];
        format_key(file, &keys[k], one, sizeof(one));
        /* "a = b" reads as three words in a log line: "a=b". */
        char *sp = strstr(one, " = ");
        if (sp)
            memmove(sp + 1, sp + 3, strlen(sp + 3) + 1), sp[0] = '=';
        int n = snprintf(buf + at, len - at, "%s%s", at ? " " : "", one);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

void gw__tuning_merge(gw_tuning_t *t, const gw_tuning_t *file)
{
    for (int k = 0; k < NKEYS; k++) {
        if (!(file->from_file & ((uint64_t)1 << k)))
            continue;
        size_t size = keys[k].type == KEY_SECONDS || keys[k].type == KEY_PER_BYTE ? sizeof(double)
                      : keys[k].type == KEY_RANKS                                 ? sizeof(int)
                      : keys[k].type == KEY_ALGO ? sizeof(gw_algo_t)
                                                 : sizeof(size_t);
        memcpy(field(t, &keys[k]), cfield(file, &keys[k]), size);
    }
    t->from_file |= file->from_file;
}

static gw_status_t load_named(gw_tuning_t *t, const char *path, const char *name,
                              const gw_logger_t *lg)
{
    /* Read whole, with a bound, before parsing: a FIFO or /dev/zero named
     * by mistake is refused at once, not waited on or read for ever. */
    char *text;
    size_t len;
    gw_status_t st =
        gw__file_read(lg, "tuning", name, path, GW_TUNING_FILE_MAX, 0, &text, &len, NULL);
    if (st != GW_OK)
        return st;
    FILE *f = fmemopen(text, len, "r");
    if (!f) {
        GW_ERROR(lg, "tuning", "cannot parse %s: %m", name);
        free(text);
        return GW_ERR_NO_MEMORY;
    }
    st = gw__tuning_parse(t, f, name, lg);
    fclose(f);
    free(text);
    if (st == GW_OK) {
        char given[1024];
        gw__tuning_describe_file(t, given, sizeof(given));
        GW_INFO(lg, "tuning", "%s: %s (every other key: the transport's default)", name,
                *given ? given : "no key");
    }
    return st;
}

gw_status_t gw__tuning_load(gw_tuning_t *t, const char *path, const gw_logger_t *lg)
{
    char name[4096 + 32];
    snprintf(name, sizeof(name), "tuning file %s", path);
    return load_named(t, path, name, lg);
}

gw_status_t gw__tuning_load_env(gw_tuning_t *t, const gw_logger_t *lg)
{
    const char *path;
    if (gw__env_str(lg, GW_ENV_TUNING_FILE, &path) != GW_OK)
        return GW_ERR_CONFIG;
    if (!path)
        return GW_OK;
    char name[4096 + 32];
    snprintf(name, sizeof(name), "GW_TUNING_FILE=%s", path);
    return load_named(t, path, name, lg);
}

gw_status_t gw__tuning_write(const gw_tuning_t *t, FILE *f)
{
    int bad = fprintf(f, "gradwire-tuning %d\n", GW_TUNING_FILE_VERSION) < 0;
    for (int k = 0; k < NKEYS && !bad; k++) {
        char line[160];
        format_key(t, &keys[k], line, sizeof(line));
        bad = fprintf(f, "%s\n", line) < 0;
    }
    return bad || fflush(f) != 0 ? GW_ERR_SYSTEM : GW_OK;
}
