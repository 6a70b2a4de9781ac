/*
 * sock_strangers.c - connections that did not prove the job's key, logged
 * with a bound.
 *
 * Whatever can reach a listening port can connect to it: a port scanner, a
 * health check, a rank of another job, an impostor, or one unprivileged
 * process connecting in a loop. Each such connection is dropped, and the
 * first ones are worth a line each (they are how a wrong address or a
 * wrong token shows), but one line per connection lets a flood write
 * megabytes a second into every rank's log. So the first
 * GW_SOCK_STRANGERS_LOGGED are logged one by one at WARN, then a line says
 * that the rest are counted, and the counts by kind are summed up in one
 * line at most once every GW_SOCK_STRANGER_SUMMARY_MS (each connection is
 * still logged at TRACE, for whoever asks). The bootstrap root and the TCP
 * transport's listener keep one of these each; the caller words its own
 * one-by-one lines and names the kinds.
 */
#include <stdint.h>
#include <stdio.h>

#include "common/clock.h"
#include "transport/sock.h"

static long counted(const gw_sock_strangers_t *s)
{
    long n = 0;
    for (int k = 0; k < s->nkinds && k < GW_SOCK_STRANGER_KINDS; k++)
        n += s->dropped[k];
    return n;
}

int64_t gw__sock_strangers_due(const gw_sock_strangers_t *s)
{
    return counted(s) ? s->summary_at + GW_SOCK_STRANGER_SUMMARY_MS : INT64_MAX;
}

int gw__sock_stranger(gw_sock_strangers_t *s, int kind)
{
    s->total++;
    if (s->logged < GW_SOCK_STRANGERS_LOGGED) {
        s->logged++;
        return 1;
    }
    if (s->logged == GW_SOCK_STRANGERS_LOGGED) {
        s->logged++;
        GW_WARN(s->log, s->subsys,
                "%d connections on %s dropped: the next ones are counted and summed up once a "
                "second (each logged at TRACE)",
                GW_SOCK_STRANGERS_LOGGED, s->where);
        s->summary_at = gw__now_ms();
    }
    if (kind < 0 || kind >= s->nkinds || kind >= GW_SOCK_STRANGER_KINDS)
        kind = 0;
    s->dropped[kind]++;
    return 0;
}

void gw__sock_strangers_summary(gw_sock_strangers_t *s, int64_t now, int force, const char *tail)
{
    long n = counted(s);
    if (n == 0 || (!force && now < gw__sock_strangers_due(s)))
        return;
    char parts[192];
    size_t len = 0;
    parts[0] = '\0';
    for (int k = 0; k < s->nkinds && k < GW_SOCK_STRANGER_KINDS; k++) {
        if (!s->dropped[k])
            continue;
        int w = snprintf(parts + len, sizeof(parts) - len, "%s%ld %s", len ? ", " : "",
                         s->dropped[k], s->kind_names[k]);
        if (w > 0 && (size_t)w < sizeof(parts) - len)
            len += (size_t)w;
        s->dropped[k] = 0;
    }
    GW_WARN(s->log, s->subsys,
            "dropped %ld more connection%s on %s that did not prove the job token (%s) in the "
            "last %lld ms%s",
            n, n == 1 ? "" : "s", s->where, parts, (long long)(now - s->summary_at),
            tail ? tail : "");
    s->summary_at = now;
}
