/*
 * status_cmd.c - `gradwire status`: how a running job is doing, asked of
 * its rank 0 through the root address with the job token (gw_job_status).
 *
 * Per rank: the collective it is in (or last finished) and for how long,
 * the step it waits in and for whom, the collectives done, the bytes it
 * posted to and from each peer, and how old rank 0's news of it is. Then
 * the lagging ranks: those others have waited for longer than a second,
 * and those that stay in an older collective than the newest for longer
 * than a second.
 * --json writes the same as one JSON object. Rank 0 answers from what the
 * ranks sent it on their own, so asking never blocks or slows the job.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradwire.h"
#include "kit.h"
#include "status_cmd.h"

static int usage(FILE *out, int code)
{
    fprintf(out, "usage: gradwire status [--root HOST:PORT] [--json] [--timeout-ms N]\n"
                 "\n"
                 "Ask a running job how every rank is doing: the collective each is in and for\n"
                 "how long, the collectives done, the bytes sent to and received from each peer,\n"
                 "and the lagging ranks. Rank 0 answers from the news the ranks send it four\n"
                 "times a second; the query never blocks or slows the job.\n"
                 "\n"
                 "  --root HOST:PORT   the job's root address (default: GW_ROOT)\n"
                 "  --json             one JSON object instead of the table\n"
                 "  --timeout-ms N     give up after N ms (default 2000)\n"
                 "\n"
                 "The job token is GW_JOB_TOKEN's or GW_JOB_TOKEN_FILE's; a wrong one gets no\n"
                 "answer (exit 1).\n");
    return code;
}

/* Whether rank r lags: another rank has waited for it for more than a
 * second, or it is behind the newest collective and has been where it is
 * for more than a second. The news of each rank is up to a quarter second
 * old, so in a healthy job ranks seem a few collectives apart: only one
 * that stays behind lags. */
static int lagging(const gw_rank_status_t *s, int n, int r, uint64_t newest)
{
    if (!s[r].known)
        return 0;
    if (s[r].seq < newest && s[r].for_s > 1.0)
        return 1;
    for (int k = 0; k < n; k++)
        if (s[k].known && s[k].running && s[k].waiting_on == r && s[k].for_s > 1.0)
            return 1;
    return 0;
}

static void print_json(const gw_rank_status_t *s, int n, const char *root, uint64_t newest)
{
    gw_kit_json_t j;
    gw_kit_json_start(&j, stdout, 6);
    gw_kit_json_object(&j, NULL, "\n  ");
    gw_kit_json_str(&j, "root", root);
    gw_kit_json_int(&j, "size", n);
    gw_kit_json_array(&j, "ranks", "\n    ");
    for (int r = 0; r < n; r++) {
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_int(&j, "rank", r);
        gw_kit_json_bool(&j, "known", s[r].known);
        gw_kit_json_bool(&j, "running", s[r].running);
        gw_kit_json_str(&j, "op", s[r].op);
        gw_kit_json_uint(&j, "seq", s[r].seq);
        gw_kit_json_uint(&j, "step", s[r].step);
        gw_kit_json_int(&j, "waiting_on", s[r].waiting_on);
        gw_kit_json_num(&j, "for_s", s[r].for_s);
        gw_kit_json_num(&j, "age_s", s[r].age_s);
        gw_kit_json_uint(&j, "done", s[r].done);
        gw_kit_json_uint(&j, "bytes_sent", s[r].bytes_sent);
        gw_kit_json_uint(&j, "bytes_recv", s[r].bytes_recv);
        gw_kit_json_array(&j, "peers", NULL);
        for (int k = 0; k < s[r].npeers; k++) {
            gw_kit_json_object(&j, NULL, NULL);
            gw_kit_json_int(&j, "peer", s[r].peers[k].peer);
            gw_kit_json_uint(&j, "sent", s[r].peers[k].sent);
            gw_kit_json_uint(&j, "recv", s[r].peers[k].recv);
            gw_kit_json_close(&j, NULL);
        }
        gw_kit_json_close(&j, NULL);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_array(&j, "lagging", NULL);
    for (int r = 0; r < n; r++)
        if (lagging(s, n, r, newest))
            gw_kit_json_int(&j, NULL, r);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_close(&j, "\n");
    printf("\n");
}

static void print_table(const gw_rank_status_t *s, int n, const char *root, uint64_t newest)
{
    printf("job at %s: %d ranks\n\n", root, n);
    printf("%-5s %-8s %-28s %10s %8s %12s %12s %7s\n", "rank", "state", "collective", "for", "done",
           "sent", "received", "news");
    for (int r = 0; r < n; r++) {
        if (!s[r].known) {
            printf("%-5d %-8s (no news: it has called no collective yet, or it is gone)\n", r, "-");
            continue;
        }
        char what[64];
        if (s[r].op[0] && s[r].running && s[r].waiting_on >= 0)
            snprintf(what, sizeof(what), "%s #%llu step %u <- %d", s[r].op,
                     (unsigned long long)s[r].seq, s[r].step, s[r].waiting_on);
        else if (s[r].op[0])
            snprintf(what, sizeof(what), "%s #%llu", s[r].op, (unsigned long long)s[r].seq);
        else
            snprintf(what, sizeof(what), "none yet");
        printf("%-5d %-8s %-28s %8.3f s %8llu %12llu %12llu %5.2f s\n", r,
               s[r].running ? "in" : "after", what, s[r].for_s, (unsigned long long)s[r].done,
               (unsigned long long)s[r].bytes_sent, (unsigned long long)s[r].bytes_recv,
               s[r].age_s);
    }
    printf("\nbytes per peer (sent/received):\n");
    for (int r = 0; r < n; r++) {
        if (!s[r].npeers)
            continue;
        printf("  rank %d:", r);
        for (int k = 0; k < s[r].npeers; k++)
            printf("%s %d %llu/%llu", k ? "," : "", s[r].peers[k].peer,
                   (unsigned long long)s[r].peers[k].sent, (unsigned long long)s[r].peers[k].recv);
        printf("\n");
    }
    int any = 0;
    printf("\nlagging:");
    for (int r = 0; r < n; r++)
        if (lagging(s, n, r, newest)) {
            printf("%s rank %d (in #%llu", any ? ";" : "", r, (unsigned long long)s[r].seq);
            if (s[r].seq < newest)
                printf(", others reached #%llu", (unsigned long long)newest);
            printf(")");
            any = 1;
        }
    printf("%s\n", any ? "" : " none");
}

int gw_status_main(int argc, char **argv)
{
    static const struct option opts[] = {{"root", required_argument, NULL, 'r'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"timeout-ms", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *root = NULL;
    int json = 0, timeout_ms = 2000, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            root = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 600000) {
                fprintf(stderr, "gradwire status: --timeout-ms wants 1..600000, not \"%s\"\n",
                        optarg);
                return 2;
            }
            timeout_ms = (int)v;
            break;
        }
        case 'h':
            return usage(stdout, 0);
        default:
            return usage(stderr, 2);
        }
    }
    if (optind != argc)
        return usage(stderr, 2);
    if (!root)
        root = getenv("GW_ROOT");
    if (!root) {
        fprintf(stderr, "gradwire status: no root address: give --root HOST:PORT or set "
                        "GW_ROOT\n");
        return 2;
    }
    gw_rank_status_t *s = NULL;
    int n = 0;
    gw_status_t st = gw_job_status(root, NULL, timeout_ms, &s, &n);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire status: no answer from the job at %s: %s (%s)\n", root,
                gw_status_str(st), gw_status_name(st));
        return 1;
    }
    uint64_t newest = 0;
    for (int r = 0; r < n; r++)
        if (s[r].known && s[r].seq > newest)
            newest = s[r].seq;
    if (json)
        print_json(s, n, root, newest);
    else
        print_table(s, n, root, newest);
    gw_job_status_free(s);
    return 0;
}
