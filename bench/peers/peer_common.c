/*
 * peer_common.c - flags, patterns, statistics and reports shared by the
 * peer-library allreduce drivers. See peer_common.h for why they share them.
 *
 * Figures follow nccl-tests and gradwire-bench: GB/s is 1e9 bytes per
 * second, algbw = size / time, busbw = algbw x 2(n-1)/n. The time of one
 * size is the median over the timed iterations of each iteration's maximum
 * over ranks (the drivers gather that maximum), and min/max of the same
 * series go into the JSON report. Table layout, footer and JSON keys are
 * gradwire-bench allreduce's, so one script reads every library's report.
 */
#include "peer_common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void peer_opts_default(struct peer_opts *o)
{
    /* The defaults are gradwire-bench allreduce's, so the same bare command
     * line means the same sweep for every library. */
    memset(o, 0, sizeof(*o));
    o->min_bytes = 8;
    o->max_bytes = 32u << 20;
    o->step_bytes = 1u << 20;
    o->step_factor = 2.0;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->dtype = PEER_FLOAT32;
    o->op = PEER_SUM;
}

int peer_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mult = 1;

    if (s == NULL || *s == '\0' || *s == '-')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -1;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        mult = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1ull << 30;
        end++;
        break;
    default:
        return -1;
    }
    /* Accept "32MB" and "32MiB" as spelled in some scripts. */
    if (mult > 1 && (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0))
        end += strlen(end);
    if (*end != '\0')
        return -1;
    if (v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_int(const char *s, int min, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_dtype(const char *s, peer_dtype_t *out)
{
    if (strcmp(s, "float32") == 0 || strcmp(s, "float") == 0 || strcmp(s, "fp32") == 0)
        *out = PEER_FLOAT32;
    else if (strcmp(s, "float64") == 0 || strcmp(s, "double") == 0 || strcmp(s, "fp64") == 0)
        *out = PEER_FLOAT64;
    else if (strcmp(s, "int32") == 0 || strcmp(s, "int") == 0)
        *out = PEER_INT32;
    else
        return -1;
    return 0;
}

static int parse_op(const char *s, peer_op_t *out)
{
    if (strcmp(s, "sum") == 0)
        *out = PEER_SUM;
    else if (strcmp(s, "max") == 0)
        *out = PEER_MAX;
    else if (strcmp(s, "min") == 0)
        *out = PEER_MIN;
    else
        return -1;
    return 0;
}

static int opt_is(const char *arg, const char *shortname, const char *longname)
{
    return (shortname != NULL && strcmp(arg, shortname) == 0) ||
           (longname != NULL && strcmp(arg, longname) == 0);
}

int peer_opts_parse_one(struct peer_opts *o, int argc, char **argv, int *i, int print_errors)
{
    const char *arg = argv[*i];
    const char *val;
    int bad = 0;

    if (!opt_is(arg, "-b", "--minbytes") && !opt_is(arg, "-e", "--maxbytes") &&
        !opt_is(arg, "-i", "--stepbytes") && !opt_is(arg, "-f", "--stepfactor") &&
        !opt_is(arg, "-n", "--iters") && !opt_is(arg, "-w", "--warmup_iters") &&
        !opt_is(arg, "-c", "--check") && !opt_is(arg, "-d", "--datatype") &&
        !opt_is(arg, "-o", "--op") && !opt_is(arg, NULL, "--json") && !opt_is(arg, NULL, "--label"))
        return 0;
    if (*i + 1 >= argc) {
        if (print_errors)
            fprintf(stderr, "error: option %s needs a value\n", arg);
        return -1;
    }
    val = argv[++*i];

    if (opt_is(arg, "-b", "--minbytes")) {
        bad = peer_parse_size(val, &o->min_bytes);
    } else if (opt_is(arg, "-e", "--maxbytes")) {
        bad = peer_parse_size(val, &o->max_bytes);
    } else if (opt_is(arg, "-i", "--stepbytes")) {
        bad = peer_parse_size(val, &o->step_bytes);
    } else if (opt_is(arg, "-f", "--stepfactor")) {
        char *end;
        errno = 0;
        o->step_factor = strtod(val, &end);
        bad = errno != 0 || end == val || *end != '\0' || !(o->step_factor >= 0.0) ||
              o->step_factor > 1e6;
    } else if (opt_is(arg, "-n", "--iters")) {
        bad = parse_int(val, 1, &o->iters);
    } else if (opt_is(arg, "-w", "--warmup_iters")) {
        bad = parse_int(val, 0, &o->warmup);
    } else if (opt_is(arg, "-c", "--check")) {
        bad = parse_int(val, 0, &o->check);
        if (!bad && o->check > 1)
            o->check = 1;
    } else if (opt_is(arg, "-d", "--datatype")) {
        bad = parse_dtype(val, &o->dtype);
    } else if (opt_is(arg, "-o", "--op")) {
        bad = parse_op(val, &o->op);
    } else if (opt_is(arg, NULL, "--json")) {
        o->json_path = val;
    } else {
        o->label = val;
    }
    if (bad) {
        if (print_errors)
            fprintf(stderr, "error: bad value '%s' for %s (see --help)\n", val, arg);
        return -1;
    }
    return 1;
}

int peer_opts_validate(const struct peer_opts *o, int print_errors)
{
    if (o->min_bytes > o->max_bytes) {
        if (print_errors)
            fprintf(stderr, "error: -b %zu is larger than -e %zu\n", o->min_bytes, o->max_bytes);
        return -1;
    }
    if (o->min_bytes < peer_dtype_size(o->dtype)) {
        if (print_errors)
            fprintf(stderr, "error: -b %zu is smaller than one %s element (%zu B)\n", o->min_bytes,
                    peer_dtype_name(o->dtype), peer_dtype_size(o->dtype));
        return -1;
    }
    if (o->step_factor <= 1.0 && o->step_bytes == 0 && o->min_bytes != o->max_bytes) {
        if (print_errors)
            fprintf(stderr, "error: the sweep would not advance: give -f > 1 or -i > 0\n");
        return -1;
    }
    return 0;
}

void peer_opts_usage(FILE *f)
{
    fprintf(f, "  -b, --minbytes SIZE     smallest message (default 8; K/M/G suffixes)\n"
               "  -e, --maxbytes SIZE     largest message (default 32M)\n"
               "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
               "  -i, --stepbytes SIZE    add SIZE each step instead (when -f is 1 or less)\n"
               "  -n, --iters N           timed iterations per size and mode (default 20)\n"
               "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
               "  -c, --check 0|1         verify every result, report #wrong (default 1)\n"
               "  -d, --datatype T        float32 (default), float64, int32\n"
               "  -o, --op OP             sum, max, min (default sum)\n"
               "      --json FILE         also write per-size median/min/max as JSON (rank 0)\n"
               "      --label STR         free text copied into the JSON report\n");
}

size_t peer_next_size(const struct peer_opts *o, size_t cur)
{
    size_t next;

    if (o->step_factor > 1.0) {
        double d = (double)cur * o->step_factor;
        next = d >= (double)SIZE_MAX ? SIZE_MAX : (size_t)d;
        if (next <= cur)
            next = cur + 1;
    } else {
        if (o->step_bytes == 0 || cur > SIZE_MAX - o->step_bytes)
            return 0;
        next = cur + o->step_bytes;
    }
    return next > o->max_bytes ? 0 : next;
}

size_t peer_dtype_size(peer_dtype_t t)
{
    switch (t) {
    case PEER_FLOAT32:
        return sizeof(float);
    case PEER_FLOAT64:
        return sizeof(double);
    case PEER_INT32:
        return sizeof(int32_t);
    }
    return 1;
}

const char *peer_dtype_name(peer_dtype_t t)
{
    switch (t) {
    case PEER_FLOAT32:
        return "float32";
    case PEER_FLOAT64:
        return "float64";
    case PEER_INT32:
        return "int32";
    }
    return "?";
}

const char *peer_op_name(peer_op_t op)
{
    switch (op) {
    case PEER_SUM:
        return "sum";
    case PEER_MAX:
        return "max";
    case PEER_MIN:
        return "min";
    }
    return "?";
}

/* The pattern repeats every PATTERN_PERIOD elements, so the expected result
 * of an element depends only on its index modulo that period and can be
 * computed once per check instead of once per element and rank. Values lie
 * in [-15, 15]: sums stay exact in float32 far beyond any rank count. */
#define PATTERN_PERIOD 31

static int pattern_value(int rank, size_t i)
{
    return (int)(((unsigned long long)rank * 7u + (i % PATTERN_PERIOD) * 3u) % PATTERN_PERIOD) - 15;
}

void peer_fill(void *buf, size_t count, peer_dtype_t t, int rank)
{
    size_t i;

    for (i = 0; i < count; i++) {
        int v = pattern_value(rank, i);
        switch (t) {
        case PEER_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case PEER_FLOAT64:
            ((double *)buf)[i] = (double)v;
            break;
        case PEER_INT32:
            ((int32_t *)buf)[i] = v;
            break;
        }
    }
}

uint64_t peer_check(const void *buf, size_t count, peer_dtype_t t, peer_op_t op, int nranks)
{
    long long expect[PATTERN_PERIOD];
    uint64_t wrong = 0;
    size_t i;
    int r, k;

    for (k = 0; k < PATTERN_PERIOD; k++) {
        long long acc = pattern_value(0, (size_t)k);
        for (r = 1; r < nranks; r++) {
            long long v = pattern_value(r, (size_t)k);
            switch (op) {
            case PEER_SUM:
                acc += v;
                break;
            case PEER_MAX:
                acc = v > acc ? v : acc;
                break;
            case PEER_MIN:
                acc = v < acc ? v : acc;
                break;
            }
        }
        expect[k] = acc;
    }
    for (i = 0; i < count; i++) {
        long long e = expect[i % PATTERN_PERIOD];
        int ok = 0;
        switch (t) {
        case PEER_FLOAT32:
            ok = ((const float *)buf)[i] == (float)e;
            break;
        case PEER_FLOAT64:
            ok = ((const double *)buf)[i] == (double)e;
            break;
        case PEER_INT32:
            ok = ((const int32_t *)buf)[i] == (int32_t)e;
            break;
        }
        wrong += !ok;
    }
    return wrong;
}

double peer_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void peer_stats_compute(struct peer_stats *s, double *times, int n, size_t bytes, int nranks)
{
    double med;

    qsort(times, (size_t)n, sizeof(*times), cmp_double);
    med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    s->median_us = med * 1e6;
    s->min_us = times[0] * 1e6;
    s->max_us = times[n - 1] * 1e6;
    s->algbw = med > 0.0 ? (double)bytes / med / 1e9 : 0.0;
    s->busbw = s->algbw * (nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0);
}

void peer_report_init(struct peer_report *r, FILE *out, const struct peer_opts *opts,
                      const char *library, const char *version, const char *transport,
                      const char *algo, int nranks)
{
    memset(r, 0, sizeof(*r));
    r->out = out;
    r->opts = opts;
    r->library = library;
    r->version = version;
    r->transport = transport;
    r->algo = algo;
    r->nranks = nranks;
}

/* The table layout is gradwire-bench allreduce's, column for column, so the
 * tables of one run can be read side by side or pasted together. */
void peer_report_header(struct peer_report *r)
{
    const struct peer_opts *o = r->opts;

    fprintf(r->out, "# %s allreduce (gradwire bench/peers), %s\n", r->library, r->version);
    fprintf(r->out, "# ranks: %d  transport: %s  algorithm: %s\n", r->nranks, r->transport,
            r->algo);
    if (o->step_factor > 1.0)
        fprintf(r->out, "# minBytes %zu maxBytes %zu step: %g(factor)", o->min_bytes, o->max_bytes,
                o->step_factor);
    else
        fprintf(r->out, "# minBytes %zu maxBytes %zu step: %zu(bytes)", o->min_bytes, o->max_bytes,
                o->step_bytes);
    fprintf(r->out, " warmup iters: %d iters: %d validation: %d\n#\n", o->warmup, o->iters,
            o->check);
    fprintf(r->out, "#%61s%s%23s%s\n", "", "out-of-place", "", "in-place");
    fprintf(r->out, "#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int p = 0; p < 2; p++)
        fprintf(r->out, "  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    fprintf(r->out, "\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    fprintf(r->out, "  %7s  %6s  %6s  %6s  %7s  %6s  %6s\n", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
            "(GB/s)", "(GB/s)");
    fflush(r->out);
}

/* Prints one mode's columns; times keep 7 characters however long. */
static void print_mode(FILE *out, const struct peer_stats *s, int checked)
{
    double us = s->median_us;

    if (us >= 10000)
        fprintf(out, "  %7.0f", us);
    else if (us >= 100)
        fprintf(out, "  %7.1f", us);
    else
        fprintf(out, "  %7.2f", us);
    fprintf(out, "  %6.2f  %6.2f", s->algbw, s->busbw);
    if (checked)
        fprintf(out, "  %6" PRIu64, s->wrong);
    else
        fprintf(out, "  %6s", "N/A");
}

int peer_report_row(struct peer_report *r, const struct peer_row *row)
{
    fprintf(r->out, "%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
            peer_dtype_name(r->opts->dtype), peer_op_name(r->opts->op), -1);
    print_mode(r->out, &row->oop, r->opts->check);
    print_mode(r->out, &row->ip, r->opts->check);
    fprintf(r->out, "\n");
    fflush(r->out);

    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 32;
        struct peer_row *rows = realloc(r->rows, cap * sizeof(*rows));
        if (rows == NULL) {
            fprintf(stderr, "error: out of memory keeping results for the JSON report\n");
            return -1;
        }
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *row;
    return 0;
}

uint64_t peer_report_wrong(const struct peer_report *r)
{
    uint64_t total = 0;
    size_t i;

    for (i = 0; i < r->nrows; i++)
        total += r->rows[i].oop.wrong + r->rows[i].ip.wrong;
    return total;
}

static double avg_busbw(const struct peer_report *r)
{
    double sum = 0.0;
    size_t i;

    /* As nccl-tests and gradwire-bench: the mean over every size of both
     * modes. */
    for (i = 0; i < r->nrows; i++)
        sum += r->rows[i].oop.busbw + r->rows[i].ip.busbw;
    return r->nrows ? sum / (2.0 * (double)r->nrows) : 0.0;
}

static void json_string(FILE *f, const char *s)
{
    if (s == NULL) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f); /* JSON has no NaN or infinity */
}

static void json_mode(FILE *f, const char *name, const struct peer_stats *s, int checked)
{
    fprintf(f, "\"%s\": {\"time_us\": {\"median\": ", name);
    json_num(f, s->median_us);
    fputs(", \"min\": ", f);
    json_num(f, s->min_us);
    fputs(", \"max\": ", f);
    json_num(f, s->max_us);
    fputs("}, \"algbw\": ", f);
    json_num(f, s->algbw);
    fputs(", \"busbw\": ", f);
    json_num(f, s->busbw);
    if (checked)
        fprintf(f, ", \"wrong\": %" PRIu64 "}", s->wrong);
    else
        fputs(", \"wrong\": null}", f);
}

/* The keys are gradwire-bench allreduce's (one script reads both), plus
 * library, library_version and label. */
static int write_json(const struct peer_report *r, const char *path)
{
    const struct peer_opts *o = r->opts;
    uint64_t wrong = peer_report_wrong(r);
    /* Created for the user alone, as gradwire-bench's reports are (the
     * peers do not link the programs' kit, hence the open here). */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    size_t i;

    if (f == NULL) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "error: cannot open JSON report '%s': %s\n", path, strerror(errno));
        return -1;
    }
    fputs("{\n  \"benchmark\": \"allreduce\",\n  \"library\": ", f);
    json_string(f, r->library);
    fputs(",\n  \"library_version\": ", f);
    json_string(f, r->version);
    fprintf(f, ",\n  \"ranks\": %d,\n  \"transport\": ", r->nranks);
    json_string(f, r->transport);
    fputs(",\n  \"algo\": ", f);
    json_string(f, r->algo);
    fputs(",\n  \"label\": ", f);
    json_string(f, o->label);
    fputs(",\n  \"units\": {\"size\": \"bytes\", \"time\": \"us\", "
          "\"bandwidth\": \"GB/s (1e9 bytes/s)\"},\n",
          f);
    fprintf(f, "  \"params\": {\"minbytes\": %zu, \"maxbytes\": %zu, ", o->min_bytes, o->max_bytes);
    if (o->step_factor > 1.0)
        fprintf(f, "\"stepfactor\": %g, \"stepbytes\": null, ", o->step_factor);
    else
        fprintf(f, "\"stepfactor\": null, \"stepbytes\": %zu, ", o->step_bytes);
    fprintf(f, "\"iters\": %d, \"warmup_iters\": %d, \"check\": %s, ", o->iters, o->warmup,
            o->check ? "true" : "false");
    fprintf(f, "\"dtypes\": [\"%s\"], \"ops\": [\"%s\"]},\n  \"results\": [",
            peer_dtype_name(o->dtype), peer_op_name(o->op));
    for (i = 0; i < r->nrows; i++) {
        const struct peer_row *row = &r->rows[i];
        fprintf(f,
                "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                "\"root\": -1, \"algo\": ",
                i ? "," : "", row->bytes, row->count, peer_dtype_name(o->dtype),
                peer_op_name(o->op));
        json_string(f, r->algo);
        fputs(",\n     ", f);
        json_mode(f, "out_of_place", &row->oop, o->check);
        fputs(",\n     ", f);
        json_mode(f, "in_place", &row->ip, o->check);
        fputs("}", f);
    }
    fputs(r->nrows ? "\n  ],\n  \"avg_busbw\": " : "],\n  \"avg_busbw\": ", f);
    json_num(f, avg_busbw(r));
    if (o->check)
        fprintf(f, ",\n  \"wrong_total\": %" PRIu64, wrong);
    else
        fputs(",\n  \"wrong_total\": null", f);
    fprintf(f, ",\n  \"ok\": %s,\n  \"error\": null\n}\n", wrong == 0 ? "true" : "false");
    if (ferror(f)) {
        fprintf(stderr, "error: writing JSON report '%s' failed\n", path);
        fclose(f);
        return -1;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "error: writing JSON report '%s' failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int peer_report_finish(struct peer_report *r)
{
    uint64_t wrong = peer_report_wrong(r);

    if (r->opts->check)
        fprintf(r->out, "# Wrong elements       : %" PRIu64 " %s\n", wrong,
                wrong ? "FAILED" : "OK");
    else
        fprintf(r->out, "# Wrong elements       : N/A (not checked: -c 0)\n");
    fprintf(r->out, "# Avg bus bandwidth    : %g\n#\n", avg_busbw(r));
    fflush(r->out);
    if (r->opts->json_path != NULL)
        return write_json(r, r->opts->json_path);
    return 0;
}

void peer_report_free(struct peer_report *r)
{
    free(r->rows);
    r->rows = NULL;
    r->nrows = r->cap = 0;
}
