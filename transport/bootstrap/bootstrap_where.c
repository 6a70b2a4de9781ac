/*
 * bootstrap_where.c - the referee's account of where every rank was when it
 * decided a case, for the verdict and its log line: "ranks 0,1,3 are in
 * allreduce #1042 at steps 3,3,4 waiting for rank 2; rank 2 did not
 * answer". Each rank's place is what it said of itself last (its report,
 * or its answer to the referee), which carries its flight recorder's kind
 * and step (0: it has none).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transport/bootstrap/bootstrap_internal.h"

/* Ranks in the same call waiting for the same rank are told together
 * (their steps may differ: each counts its own waits). */
static int same_place(const gw_bs_report_t *a, const gw_bs_report_t *b)
{
    return a->seq == b->seq && a->op_kind == b->op_kind && a->waiting_on == b->waiting_on;
}

/* Appends printf-style text to buf[0 .. cap), which *len tracks; stops
 * quietly at the end. */
__attribute__((format(printf, 4, 5))) static void add(char *buf, size_t cap, size_t *len,
                                                      const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len = n < 0 ? cap : *len + (size_t)n;
}

/* Where every rank was when the case was decided, grouped: "ranks 0,1,3
 * are in allreduce #1042 at steps 3,3,4 waiting for rank 2; rank 2 did
 * not answer". Each rank's place comes from its report or its answer,
 * which carry its flight recorder's kind and step (0: it has none). */
void gw__bs_where_all(const gw_bs_report_t *const *accounts, const unsigned char *gone, int size,
                      gw_bs_op_namer_t namer, unsigned char *done, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    memset(done, 0, (size_t)size);
    for (int r = 0; r < size; r++) {
        const gw_bs_report_t *a = accounts[r];
        if (done[r] || !a)
            continue;
        int n = 0, same_step = 1;
        for (int k = r; k < size; k++) {
            const gw_bs_report_t *b = accounts[k];
            if (b && same_place(a, b)) {
                n++;
                same_step &= b->step == a->step;
            }
        }
        add(buf, cap, &len, "%s%s ", len ? "; " : "", n > 1 ? "ranks" : "rank");
        for (int k = r, first = 1; k < size; k++) {
            const gw_bs_report_t *b = accounts[k];
            if (b && same_place(a, b)) {
                add(buf, cap, &len, "%s%d", first ? "" : ",", k);
                first = 0;
                done[k] = 1;
            }
        }
        add(buf, cap, &len, " %s in ", n > 1 ? "are" : "is");
        if (a->op_kind && namer)
            add(buf, cap, &len, "%s ", namer(a->op_kind));
        if (a->seq)
            add(buf, cap, &len, "#%llu", (unsigned long long)a->seq);
        else
            add(buf, cap, &len, "a point-to-point call");
        if (a->step && same_step) {
            add(buf, cap, &len, " step %u", a->step);
        } else if (a->step) {
            add(buf, cap, &len, " at steps ");
            for (int k = r, first = 1; k < size; k++) {
                const gw_bs_report_t *b = accounts[k];
                if (b && same_place(a, b)) {
                    add(buf, cap, &len, "%s%u", first ? "" : ",", b->step);
                    first = 0;
                }
            }
        }
        if (a->waiting_on >= 0)
            add(buf, cap, &len, " waiting for rank %d", a->waiting_on);
    }
    for (int r = 0; r < size; r++)
        if (!accounts[r])
            add(buf, cap, &len, "%srank %d %s", len ? "; " : "", r,
                gone[r] ? "is gone" : "did not answer");
}
