/*
 * The scaling driver, `gradwire-train --scaling 1,2`: it runs the job at
 * each node count under `gradwire launch`, prints strong and weak scaling
 * efficiency with the base count at 100% and the others computed from the
 * rates the jobs measured (checked against the jobs' own reports), a
 * projection labelled as one, and writes CSV, JSON and (with gnuplot
 * installed) a PNG plot.
 */
#include "train_util.h"

/* The samples_per_s a job of the driver wrote in its own JSON report,
 * PREFIX-KIND-N.json, or -1. */
static double job_rate(const char *prefix, const char *kind, int n)
{
    char path[700];
    snprintf(path, sizeof(path), "%s-%s-%d.json", prefix, kind, n);
    char *json = read_file(path);
    if (!json)
        return -1;
    const char *p = strstr(json, "\"samples_per_s\": ");
    double v = p ? strtod(p + strlen("\"samples_per_s\": "), NULL) : -1;
    free(json);
    return v;
}

/* The efficiency column of the CSV row "KIND,N,...", or -1. */
static double csv_efficiency(const char *csv, const char *kind, int n)
{
    char row[64];
    snprintf(row, sizeof(row), "\n%s,%d,", kind, n);
    const char *p = strstr(csv, row);
    if (!p)
        return -1;
    p += strlen(row);
    for (int field = 0; field < 2; field++) { /* past global_batch and samples_per_s */
        p = strchr(p, ',');
        if (!p)
            return -1;
        p++;
    }
    return strtod(p, NULL);
}

Test(scaling, runs_each_count_and_writes_reports, .timeout = 400)
{
    char *dir = make_tmpdir("scal");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    char prefix[512], path[600];
    snprintf(prefix, sizeof(prefix), "%s/s", dir);
    char *args[] = {"--scaling", "1,2",         "--scaling-out",  prefix,     "--data",
                    "synthetic", "--synthetic", "2000,200,8,3,1", "--hidden", "16",
                    "--batch",   "32",          "--steps",        "20",       NULL};
    run_result_t r = train_run(0, args, 380);
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    cr_assert(strstr(r.output, "strong scaling,   2 rank(s), global batch 32"), "%s", r.output);
    cr_assert(strstr(r.output, "weak   scaling,   2 rank(s), global batch 64"), "%s", r.output);
    cr_assert(strstr(r.output, "100.0%"), "the base count must be at 100%%:\n%s", r.output);
    cr_assert(strstr(r.output, "PROJECTION (alpha-beta ring model, not measured)"), "%s", r.output);
    snprintf(path, sizeof(path), "%s.csv", prefix);
    char *csv = read_file(path);
    cr_assert_not_null(csv, "no CSV written");
    cr_assert(strstr(csv, "kind,ranks,global_batch,samples_per_s,efficiency"), "%s", csv);
    cr_assert(strstr(csv, "\nstrong,2,32,") && strstr(csv, "\nweak,2,64,"), "%s", csv);
    cr_assert(strstr(csv, "\nprojection-strong,4,"), "%s", csv);
    /* The base count is at 100% by definition; the efficiency at 2 ranks is
     * not: it must be the per-rank rate at 2 over the per-rank rate at 1,
     * from the rates the jobs themselves wrote in their own reports. */
    const char *kinds[] = {"strong", "weak"};
    for (int k = 0; k < 2; k++) {
        double sps1 = job_rate(prefix, kinds[k], 1), sps2 = job_rate(prefix, kinds[k], 2);
        cr_assert(sps1 > 0 && sps2 > 0, "%s: no samples_per_s in the jobs' reports", kinds[k]);
        double want = (sps2 / 2) / sps1;
        double eff1 = csv_efficiency(csv, kinds[k], 1), eff2 = csv_efficiency(csv, kinds[k], 2);
        cr_assert(fabs(eff1 - 1.0) < 1e-9, "%s, 1 rank: efficiency %g, want 1:\n%s", kinds[k], eff1,
                  csv);
        /* The CSV has four decimals. */
        cr_assert(fabs(eff2 - want) <= 1e-4 + 1e-4 * want,
                  "%s, 2 ranks: efficiency %g, but the jobs' rates %g and %g samples/s give "
                  "%g:\n%s",
                  kinds[k], eff2, sps1, sps2, want, csv);
    }
    free(csv);
    snprintf(path, sizeof(path), "%s.json", prefix);
    char *json = read_file(path);
    cr_assert_not_null(json, "no JSON written");
    cr_assert(strstr(json, "\"kind\": \"weak\", \"ranks\": 2, \"ok\": true"), "%s", json);
    cr_assert(strstr(json, "not a measurement"), "%s", json);
    free(json);
    if (system("command -v gnuplot > /dev/null 2>&1") == 0) {
        snprintf(path, sizeof(path), "%s.png", prefix);
        size_t len = 0;
        unsigned char *png = read_bin(path, &len);
        cr_assert(png && len > 8 && memcmp(png, "\x89PNG", 4) == 0, "no PNG plot written");
        free(png);
    }
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(scaling, bad_counts_are_refused, .timeout = 60)
{
    char *args[] = {"--scaling", "1,x", NULL};
    run_result_t r = train_run(0, args, 50);
    cr_assert(r.exited && r.status == 2, "%s", r.output);
    cr_assert(strstr(r.output, "--scaling wants node counts like 1,2,4,8"), "%s", r.output);
    free(r.output);
}

/* The driver sets the batch of each run itself, so it takes --batch out of
 * the options it passes on; the value must still be checked like every
 * other training option, not replaced by the default. */
Test(scaling, bad_batch_is_refused, .timeout = 120)
{
    char *dir = make_tmpdir("scalb");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/s", dir);
    const char *bad[] = {"0", "abc", "-4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *args[] = {"--scaling", "1",           "--scaling-out", prefix,         "--data",
                        "synthetic", "--synthetic", "200,50,8,3,1",  "--hidden",     "8",
                        "--steps",   "1",           "--batch",       (char *)bad[i], NULL};
        run_result_t r = train_run(0, args, 100);
        cr_assert(r.exited && r.status == 2, "--batch %s: status %d, want 2:\n%s", bad[i], r.status,
                  r.output);
        cr_assert(strstr(r.output, "--batch wants 1..16777216"), "--batch %s:\n%s", bad[i],
                  r.output);
        free(r.output);
    }
    remove_tree(dir);
    free(dir);
}
