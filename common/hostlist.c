/*
 * hostlist.c - expanding Slurm host list expressions, as `scontrol show
 * hostnames` does (contract in hostlist.h).
 *
 * An expression is a list of elements separated by commas or white space
 * (outside brackets); empty elements are skipped, so "a,,b," is a and b.
 * An element is text with bracket groups in it: "rack[1-2]-n[01-03]". Each
 * group is a comma-separated list of numbers and ranges lo-hi (lo <= hi,
 * decimal digits only), and the element stands for every combination of
 * one value from each group, in Slurm's order: the last group varies
 * fastest, then the first, the second, ..., the one before the last
 * slowest. So "n[1,3]x[2-3]" is n1x2 n1x3 n3x2 n3x3, and "a[1-2]b[3-4]c[5-6]"
 * is a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ... (read off scontrol). Text may come before and between
 * groups but not after the last one ("x[1-2]y" is refused, as Slurm refuses
 * it). A value is written with at least as many digits as its range's lower
 * bound was, zeros in front: "n[098-101]" gives n098 .. n100 n101, "n[1-003]"
 * n1 n2 n3. Names are neither sorted nor made unique: "n[1-2],n[2-3]" is n1
 * n2 n2 n3.
 *
 * Where Slurm's parser is lenient in odd ways this one refuses, saying why:
 * "n[1-2" (Slurm: "n]"), "n[1-]" (Slurm: n1), white space inside brackets
 * ("n[ 1-2]", Slurm: n01 n02). Slurm's limit of 65536 names per range is
 * kept, and an expression may give GW_HOSTLIST_HOSTS_MAX names in all
 * (counted before any is made, so a short expression for billions of names
 * is refused at once).
 */
#include "common/hostlist.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One value of a group: the number and how many digits it takes at least. */
typedef struct value {
    unsigned long long n;
    int width;
} value_t;

/* One bracket group: its values in order, and the text before it. */
typedef struct group {
    const char *text; /* text before the group, text_len bytes */
    size_t text_len;
    value_t *values;
    size_t count;
} group_t;

/* The names so far: offsets into one growing buffer. */
typedef struct builder {
    char *buf;
    size_t len, cap;
    size_t *offsets;
    size_t count, offsets_cap;
    char *err;
    size_t err_cap;
} builder_t;

__attribute__((format(printf, 2, 3))) static gw_status_t fail(builder_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (b->err && b->err_cap)
        vsnprintf(b->err, b->err_cap, fmt, ap);
    va_end(ap);
    return GW_ERR_INVALID_ARG;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Parse the decimal digits s[0..len) into *n; -1 when they are not all
 * digits, none, or too large. */
static int parse_number(const char *s, size_t len, unsigned long long *n)
{
    if (len == 0 || len > 19)
        return -1;
    *n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *n = *n * 10 + (unsigned long long)(s[i] - '0');
    }
    return 0;
}

/* The values of the bracket group s[0..len) (between '[' and ']'). */
static gw_status_t parse_group(builder_t *b, const char *elem, const char *s, size_t len,
                               group_t *g)
{
    size_t cap = 0;
    g->values = NULL;
    g->count = 0;
    if (len == 0)
        return fail(b, "empty brackets in \"%s\"", elem);
    for (const char *p = s, *end = s + len; p <= end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *dash = memchr(p, '-', (size_t)(stop - p));
        unsigned long long lo, hi;
        size_t lo_len = (size_t)((dash ? dash : stop) - p);
        if (parse_number(p, lo_len, &lo) != 0 ||
            (dash && parse_number(dash + 1, (size_t)(stop - dash - 1), &hi) != 0))
            return fail(b, "\"%.*s\" in \"%s\" is not a number nor a range lo-hi of numbers",
                        (int)(stop - p), p, elem);
        if (!dash)
            hi = lo;
        if (hi < lo)
            return fail(b, "range %.*s in \"%s\" ends below its start", (int)(stop - p), p, elem);
        if (hi - lo >= GW_HOSTLIST_RANGE_MAX)
            return fail(b, "range %.*s in \"%s\" has more than %d names", (int)(stop - p), p, elem,
                        GW_HOSTLIST_RANGE_MAX);
        size_t n = (size_t)(hi - lo) + 1;
        if (g->count + n > GW_HOSTLIST_HOSTS_MAX)
            return fail(b, "\"%s\" has more than %d names", elem, GW_HOSTLIST_HOSTS_MAX);
        if (grow((void **)&g->values, &cap, g->count + n, sizeof(value_t)) != 0)
            return GW_ERR_NO_MEMORY;
        for (unsigned long long v = lo;; v++) {
            g->values[g->count++] = (value_t){v, (int)lo_len};
            if (v == hi)
                break;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return GW_OK;
}

static gw_status_t add_name(builder_t *b, const group_t *groups, size_t ngroups, const size_t *idx,
                            const char *elem)
{
    char name[GW_HOSTLIST_NAME_MAX + 1];
    size_t len = 0;
    for (size_t k = 0; k < ngroups; k++) {
        const group_t *g = &groups[k];
        int w = 0;
        if (len + g->text_len <= GW_HOSTLIST_NAME_MAX) {
            memcpy(name + len, g->text, g->text_len);
            len += g->text_len;
        } else {
            len = GW_HOSTLIST_NAME_MAX + 1;
        }
        if (g->values && len <= GW_HOSTLIST_NAME_MAX) {
            const value_t *v = &g->values[idx[k]];
            w = snprintf(name + len, sizeof(name) - len, "%0*llu", v->width, v->n);
            len = w < 0 || (size_t)w >= sizeof(name) - len ? GW_HOSTLIST_NAME_MAX + 1
                                                           : len + (size_t)w;
        }
        if (len > GW_HOSTLIST_NAME_MAX)
            return fail(b, "\"%s\" gives a name longer than %d characters", elem,
                        GW_HOSTLIST_NAME_MAX);
    }
    if (len == 0)
        return fail(b, "\"%s\" gives an empty name", elem);
    if (b->count >= GW_HOSTLIST_HOSTS_MAX)
        return fail(b, "the list has more than %d names", GW_HOSTLIST_HOSTS_MAX);
    if (grow((void **)&b->buf, &b->cap, b->len + len + 1, 1) != 0 ||
        grow((void **)&b->offsets, &b->offsets_cap, b->count + 1, sizeof(size_t)) != 0)
        return GW_ERR_NO_MEMORY;
    memcpy(b->buf + b->len, name, len);
    b->buf[b->len + len] = '\0';
    b->offsets[b->count++] = b->len;
    b->len += len + 1;
    return GW_OK;
}

/* One element, elem[0..len), into b. */
static gw_status_t expand_element(builder_t *b, const char *start, size_t len)
{
    char elem[80]; /* the element as messages quote it, cut short when long */
    if (len < 64)
        snprintf(elem, sizeof(elem), "%.*s", (int)len, start);
    else
        snprintf(elem, sizeof(elem), "%.*s...", 60, start);
    group_t groups[32];
    size_t ngroups = 0;
    gw_status_t st = GW_OK;
    const char *p = start, *end = start + len;
    while (st == GW_OK) {
        const char *open = memchr(p, '[', (size_t)(end - p));
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (close && (!open || close < open)) {
            st = fail(b, "']' without '[' in \"%s\"", elem);
            break;
        }
        if (ngroups == sizeof(groups) / sizeof(groups[0])) {
            st = fail(b, "\"%s\" has more than %zu bracket groups", elem, ngroups - 1);
            break;
        }
        group_t *g = &groups[ngroups++];
        g->text = p;
        g->values = NULL;
        g->count = 1;
        if (!open) { /* the text after the last group */
            g->text_len = (size_t)(end - p);
            if (ngroups > 1 && g->text_len > 0)
                st = fail(b, "text \"%.*s\" after the last bracket in \"%s\" (Slurm allows none)",
                          (int)g->text_len, p, elem);
            break;
        }
        g->text_len = (size_t)(open - p);
        if (!close) {
            st = fail(b, "'[' without ']' in \"%s\"", elem);
            break;
        }
        const char *inner = memchr(open + 1, '[', (size_t)(close - open - 1));
        if (inner) {
            st = fail(b, "brackets inside brackets in \"%s\"", elem);
            break;
        }
        st = parse_group(b, elem, open + 1, (size_t)(close - open - 1), g);
        p = close + 1;
    }
    /* How many names the groups make, before making any: an expression of
     * a few bytes can ask for billions ("n[0-65535]m[0-65535]"). */
    size_t total = 1;
    for (size_t k = 0; st == GW_OK && k < ngroups; k++) {
        size_t c = groups[k].count;
        if (total > (GW_HOSTLIST_HOSTS_MAX - b->count) / c)
            st = b->count ? fail(b, "\"%s\" gives more than %d names (with the %zu before it)",
                                 elem, GW_HOSTLIST_HOSTS_MAX, b->count)
                          : fail(b, "\"%s\" gives more than %d names", elem, GW_HOSTLIST_HOSTS_MAX);
        total *= c;
    }
    /* The odometer, in Slurm's order: the last group turns fastest, then
     * the first, the second, ..., the one before the last slowest. */
    size_t idx[32] = {0}, order[32], nvalued = 0;
    for (size_t k = 0; k < ngroups; k++)
        if (groups[k].values)
            order[nvalued++] = k;
    if (nvalued > 1) {
        size_t last = order[nvalued - 1];
        memmove(order + 1, order, (nvalued - 1) * sizeof(order[0]));
        order[0] = last;
    }
    while (st == GW_OK) {
        st = add_name(b, groups, ngroups, idx, elem);
        size_t j = 0;
        for (; j < nvalued; j++) {
            size_t k = order[j];
            if (++idx[k] < groups[k].count)
                break;
            idx[k] = 0;
        }
        if (j == nvalued)
            break;
    }
    for (size_t k = 0; k < ngroups; k++)
        free(groups[k].values);
    return st;
}

static int is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }

gw_status_t gw__hostlist_expand(const char *expr, gw_hostlist_t *out, char *err, size_t cap)
{
    builder_t b = {.err = err, .err_cap = cap};
    gw_status_t st = GW_OK;
    memset(out, 0, sizeof(*out));
    if (err && cap)
        err[0] = '\0';
    if (!expr)
        return fail(&b, "no host list");
    for (const char *p = expr; *p && st == GW_OK;) {
        if (is_separator(*p)) {
            p++;
            continue;
        }
        const char *q = p;
        int depth = 0;
        while (*q && (depth > 0 || !is_separator(*q))) {
            depth += *q == '[' ? 1 : *q == ']' ? -1 : 0;
            q++;
        }
        st = expand_element(&b, p, (size_t)(q - p));
        p = q;
    }
    if (st == GW_OK && b.count) {
        out->names = malloc(b.count * sizeof(char *));
        if (!out->names)
            st = GW_ERR_NO_MEMORY;
    }
    if (st != GW_OK) {
        if (st == GW_ERR_NO_MEMORY)
            fail(&b, "out of memory expanding the host list");
        free(b.buf);
        free(b.offsets);
        return st;
    }
    for (size_t i = 0; i < b.count; i++)
        out->names[i] = b.buf + b.offsets[i];
    out->count = b.count;
    out->storage = b.buf;
    free(b.offsets);
    return GW_OK;
}

void gw__hostlist_free(gw_hostlist_t *list)
{
    if (!list)
        return;
    free(list->storage);
    free(list->names);
    memset(list, 0, sizeof(*list));
}
