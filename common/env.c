/*
 * env.c - the parsers of env.h: read the variable the registry declares,
 * check it with the registry's rule (env_registry.c) and log what is
 * wrong once, with the value quoted so that a stray control character
 * shows.
 */
#include "env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Room for a quoted value in an error line. */
#define QUOTE_MAX 256

/* s between double quotes, with what would break the log line (control
 * characters, quotes, backslashes) written as C escapes, and cut short
 * with "..." past what a log line should hold. */
static const char *quote(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    buf[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n' || c == '\t' || c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = c == '\n' ? 'n' : c == '\t' ? 't' : (char)c;
        } else if (iscntrl(c)) {
            n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        } else {
            buf[n++] = (char)c;
        }
    }
    if (*s) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

/* Check v's value s; log what is wrong. A secret's value is never logged. */
static gw_status_t check(const gw_logger_t *lg, const gw_env_var_t *v, const char *s, long *num,
                         int *index)
{
    char why[320];
    if (gw__env_check(v, s, num, index, why, sizeof(why)) == GW_OK)
        return GW_OK;
    if (v->type == GW_ENV_T_SECRET || !*s) {
        GW_ERROR(lg, "env", "%s %s", v->name, why);
    } else {
        char q[QUOTE_MAX];
        GW_ERROR(lg, "env", "%s=%s %s", v->name, quote(s, q, sizeof(q)), why);
    }
    return GW_ERR_CONFIG;
}

/* The registry's entry of id, and its value (NULL if unset), checked. */
static gw_status_t get(const gw_logger_t *lg, gw_env_id_t id, const gw_env_var_t **v,
                       const char **s, long *num, int *index)
{
    *v = gw__env_var(id);
    *s = *v ? getenv((*v)->name) : NULL;
    if (!*v)
        return GW_ERR_INVALID_ARG;
    return *s ? check(lg, *v, *s, num, index) : GW_OK;
}

gw_status_t gw__env_str(const gw_logger_t *lg, gw_env_id_t id, const char **out)
{
    const gw_env_var_t *v;
    const char *s;
    *out = NULL;
    if (get(lg, id, &v, &s, NULL, NULL) != GW_OK)
        return GW_ERR_CONFIG;
    *out = s;
    return GW_OK;
}

gw_status_t gw__env_int(const gw_logger_t *lg, gw_env_id_t id, long *out)
{
    const gw_env_var_t *v;
    const char *s;
    long n = 0;
    if (get(lg, id, &v, &s, &n, NULL) != GW_OK ||
        (v->type != GW_ENV_T_INT && v->type != GW_ENV_T_BOOL))
        return GW_ERR_CONFIG;
    *out = s ? n : v->dflt;
    return GW_OK;
}

gw_status_t gw__env_choice(const gw_logger_t *lg, gw_env_id_t id, int *out)
{
    const gw_env_var_t *v;
    const char *s;
    int i = 0;
    if (get(lg, id, &v, &s, NULL, &i) != GW_OK || v->type != GW_ENV_T_CHOICE)
        return GW_ERR_CONFIG;
    *out = s ? i : (int)v->dflt;
    return GW_OK;
}

gw_status_t gw__env_hostport(const gw_logger_t *lg, gw_env_id_t id, char *host, size_t host_cap,
                             int *port, int *found)
{
    const gw_env_var_t *v;
    const char *s;
    *found = 0;
    if (get(lg, id, &v, &s, NULL, NULL) != GW_OK || v->type != GW_ENV_T_HOSTPORT)
        return GW_ERR_CONFIG;
    if (!s)
        return GW_OK;
    if (gw__parse_hostport(s, host, host_cap, port) != GW_OK) {
        char q[QUOTE_MAX];
        GW_ERROR(lg, "env", "%s=%s is too long a host:port", v->name, quote(s, q, sizeof(q)));
        return GW_ERR_CONFIG;
    }
    *found = 1;
    return GW_OK;
}

gw_status_t gw__env_check_all(const gw_logger_t *lg, int warn_unknown)
{
    gw_status_t st = GW_OK;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GW_", 3) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        char name[128];
        if (!eq || (size_t)(eq - *e) >= sizeof(name))
            continue;
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        const gw_env_var_t *v = gw__env_find(name);
        if (v) {
            /* GW_RANK and GW_SIZE are gradwire launch's: checked where that
             * convention is in use, like the other launchers'. */
            if (v->category != GW_ENV_C_LAUNCHER && check(lg, v, eq + 1, NULL, NULL) != GW_OK)
                st = GW_ERR_CONFIG;
            continue;
        }
        const gw_env_var_t *near = gw__env_closest(name);
        if (near && warn_unknown)
            GW_WARN(lg, "env", "%s is not a gradwire variable (ignored): did you mean %s?", name,
                    near->name);
        else if (warn_unknown)
            GW_INFO(lg, "env", "%s is not a gradwire variable (ignored)", name);
    }
    return st;
}
