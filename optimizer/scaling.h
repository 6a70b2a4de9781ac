/*
 * scaling.h - what the two halves of `gradwire-train --scaling` share:
 * scaling.c runs the job at each node count and projects from the figures
 * the runs measured; scaling_report.c prints the table and writes the CSV,
 * JSON and plot.
 */
#ifndef GW_OPTIMIZER_SCALING_H
#define GW_OPTIMIZER_SCALING_H

#include <limits.h>

#include "trainer.h"

#define MAX_COUNTS 32
#define MAX_PASS 256

typedef struct run {
    int n;
    int weak;
    int ok;
    double sps, compute_per_sample, alpha, beta, allreduce_s, grad_bytes, tta, acc, train_s;
    double eff;
    double node_hours, cost; /* from the run's report; cost NAN without a price */
} run_t;

typedef struct scaling {
    int counts[MAX_COUNTS], ncounts;
    int project[MAX_COUNTS], nproject;
    int strong, weak;
    const char *launcher, *hosts, *out;
    const char *launch_args[MAX_PASS];
    int nlaunch_args;
    const char *pass[MAX_PASS]; /* options for the trainer */
    int npass;
    int batch;
    int has_steps, has_epochs;
    char self[PATH_MAX], launcher_buf[PATH_MAX];
} scaling_t;

typedef struct projection {
    int n;
    double strong_lo, strong_hi, weak_lo, weak_hi;
} projection_t;

/* Everything the driver measured and projected. */
typedef struct scaling_result {
    run_t runs[2 * MAX_COUNTS];
    int nruns;
    projection_t pr[MAX_COUNTS];
    int np;
    double alpha, beta, c; /* the projection's link and compute figures */
    long cores;
} scaling_result_t;

/* Print the efficiencies and the projection, write PREFIX.csv and
 * PREFIX.json and, with gnuplot, PREFIX.png. */
void gw_train_scaling_report(const scaling_t *s, const scaling_result_t *res);

#endif
