/*
 * kit_json.c - the JSON writer of gradwire's programs. It streams: every
 * call writes at once, and the writer only remembers, per open container,
 * whether a member was written (so it knows where commas go), what closes
 * it and the whitespace its caller wants before each member. That keeps
 * the layout of every report the same as its readers (tests, scripts,
 * people) have always seen, while the quoting, escaping and the null for
 * non-finite numbers are done in one place.
 */
#include <math.h>

#include "kit.h"

void gw_kit_json_start(gw_kit_json_t *j, FILE *f, int digits)
{
    j->f = f;
    j->digits = digits;
    j->depth = 0;
    j->next_ws = NULL;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The comma and whitespace before a member, and its key. At depth 0 the
 * one top-level value is written as it is. */
static void member(gw_kit_json_t *j, const char *key)
{
    if (j->depth > 0) {
        int first = j->level[j->depth - 1].members++ == 0;
        const char *ws = j->next_ws ? j->next_ws : j->level[j->depth - 1].ws;
        if (!first)
            fputc(',', j->f);
        fputs(ws ? ws : first ? "" : " ", j->f);
    }
    j->next_ws = NULL;
    if (key) {
        put_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void open_container(gw_kit_json_t *j, const char *key, const char *ws, char open, char close)
{
    member(j, key);
    fputc(open, j->f);
    if (j->depth < GW_KIT_JSON_DEPTH) {
        j->level[j->depth].close = close;
        j->level[j->depth].members = 0;
        j->level[j->depth].ws = ws;
    }
    j->depth++;
}

void gw_kit_json_object(gw_kit_json_t *j, const char *key, const char *ws)
{
    open_container(j, key, ws, '{', '}');
}

void gw_kit_json_array(gw_kit_json_t *j, const char *key, const char *ws)
{
    open_container(j, key, ws, '[', ']');
}

void gw_kit_json_close(gw_kit_json_t *j, const char *ws)
{
    if (j->depth == 0 || j->depth > GW_KIT_JSON_DEPTH)
        return; /* a caller's mistake; the output shows it */
    j->depth--;
    if (ws && j->level[j->depth].members > 0)
        fputs(ws, j->f);
    fputc(j->level[j->depth].close, j->f);
}

void gw_kit_json_break(gw_kit_json_t *j, const char *ws) { j->next_ws = ws; }

void gw_kit_json_num(gw_kit_json_t *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.*g", j->digits, v);
    else
        fputs("null", j->f); /* JSON has no NaN or infinity */
}

void gw_kit_json_num_or_null(gw_kit_json_t *j, const char *key, int present, double v)
{
    if (present)
        gw_kit_json_num(j, key, v);
    else
        gw_kit_json_null(j, key);
}

void gw_kit_json_int_or_null(gw_kit_json_t *j, const char *key, int present, long long v)
{
    if (present)
        gw_kit_json_int(j, key, v);
    else
        gw_kit_json_null(j, key);
}

void gw_kit_json_int(gw_kit_json_t *j, const char *key, long long v)
{
    member(j, key);
    fprintf(j->f, "%lld", v);
}

void gw_kit_json_uint(gw_kit_json_t *j, const char *key, unsigned long long v)
{
    member(j, key);
    fprintf(j->f, "%llu", v);
}

void gw_kit_json_bool(gw_kit_json_t *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void gw_kit_json_null(gw_kit_json_t *j, const char *key)
{
    member(j, key);
    fputs("null", j->f);
}

void gw_kit_json_str(gw_kit_json_t *j, const char *key, const char *s)
{
    member(j, key);
    if (s)
        put_string(j->f, s);
    else
        fputs("null", j->f);
}
