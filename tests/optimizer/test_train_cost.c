/*
 * The cost of a run: the report's node-hours (nodes = ranks / --ranks-per-
 * node, rounded up, times the training time), samples per node-hour, and
 * with --price-per-node-hour the cost of the run and of reaching
 * --target-acc; without a price the costs are null. The scaling driver
 * shows node-hours and cost next to efficiency.
 */
#include "train_util.h"

/* The number after "key": in text; -1 when absent, -2 when null. */
static double field(const char *text, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(text, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    return strncmp(p, "null", 4) == 0 ? -2 : strtod(p, NULL);
}

static char *run_report(int n, const char *dir, char *const *extra)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/r.json", dir);
    char *args[32] = {"--data", "synthetic", "--synthetic",  "4000,400,8,3,1", "--hidden",
                      "16",     "--batch",   "32",           "--epochs",       "2",
                      "--json", path,        "--no-progress"};
    int k = 13;
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    run_result_t r = train_run(n, args, 120);
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    cr_assert(strstr(r.output, "node-hours"), "no cost line:\n%s", r.output);
    free(r.output);
    char *json = read_file(path);
    cr_assert_not_null(json);
    return json;
}

Test(train_cost, node_hours_and_price, .timeout = 120)
{
    char *dir = make_tmpdir("cost");
    cr_assert_not_null(dir);
    char *priced[] = {
        "--price-per-node-hour", "2.5", "--ranks-per-node", "2", "--target-acc", "0.4", NULL};
    char *j = run_report(4, dir, priced);
    double train_s = field(j, "train_s"), nh = field(j, "node_hours");
    cr_assert_eq(field(j, "nodes"), 2, "4 ranks at 2 per node are 2 nodes:\n%s", j);
    cr_assert(train_s > 0 && fabs(nh - 2 * train_s / 3600) <= 1e-9 + 1e-6 * nh, "%s", j);
    cr_assert(fabs(field(j, "cost") - 2.5 * nh) <= 1e-6 * nh, "cost is not price x node-hours");
    double sph = field(j, "samples_per_node_hour");
    cr_assert(fabs(sph - field(j, "samples") / nh) <= 1e-6 * sph, "%s", j);
    double tt = field(j, "cost_to_target");
    cr_assert(tt > 0 && tt <= field(j, "cost") * 1.000001,
              "the target (40%%) is reached, for no more than the run:\n%s", j);
    cr_assert(fabs(tt - 2.5 * 2 * field(j, "time_to_target_s") / 3600) <= 1e-6 * tt, "%s", j);
    free(j);
    char *unpriced[] = {"--target-acc", "0.4", NULL};
    j = run_report(2, dir, unpriced);
    cr_assert_eq(field(j, "nodes"), 2, "a rank is a node by default");
    cr_assert_eq(field(j, "cost"), -2, "no price, no cost:\n%s", j);
    cr_assert_eq(field(j, "cost_to_target"), -2);
    cr_assert(field(j, "node_hours") > 0);
    free(j);
    remove_tree(dir);
    free(dir);
}

Test(train_cost, scaling_shows_cost_per_count, .timeout = 300)
{
    char *dir = make_tmpdir("costscal");
    cr_assert_not_null(dir);
    char prefix[512], path[600];
    snprintf(prefix, sizeof(prefix), "%s/s", dir);
    char *args[] = {
        "--scaling", "1,2",         "--scaling-out",  prefix,     "--data",
        "synthetic", "--synthetic", "2000,200,8,3,1", "--hidden", "16",
        "--batch",   "32",          "--steps",        "20",       "--price-per-node-hour",
        "4",         NULL};
    run_result_t r = train_run(0, args, 280);
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    cr_assert(strstr(r.output, "node-hours") && strstr(r.output, "cost"), "%s", r.output);
    free(r.output);
    snprintf(path, sizeof(path), "%s.csv", prefix);
    char *csv = read_file(path);
    cr_assert_not_null(csv);
    cr_assert(strstr(csv, ",node_hours,cost\n"), "%s", csv);
    /* Every run's row ends in node-hours and a cost of 4 per node-hour. */
    int rows = 0;
    for (char *line = strchr(csv, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        if (strncmp(line + 1, "strong,", 7) && strncmp(line + 1, "weak,", 5))
            continue;
        char *end = strchr(line + 1, '\n'), *c = end - 1;
        while (*c != ',')
            c--;
        double cost = strtod(c + 1, NULL);
        char *h = c - 1;
        while (*h != ',')
            h--;
        double nh = strtod(h + 1, NULL);
        cr_assert(nh > 0 && fabs(cost - 4 * nh) <= 1e-4 * cost, "row: %.*s", (int)(end - line - 1),
                  line + 1);
        rows++;
    }
    cr_assert_eq(rows, 4, "strong and weak at 1 and 2 ranks:\n%s", csv);
    free(csv);
    remove_tree(dir);
    free(dir);
}
