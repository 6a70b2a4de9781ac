/*
 * kit_time.c - the clock every program times with (CLOCK_MONOTONIC, which
 * no change of the wall clock moves), and the order statistics their
 * reports use: benchmarks report medians with min and max, since one slow
 * call on a busy machine says nothing about the code.
 */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "kit.h"

int64_t gw_kit_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double gw_kit_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

double gw_kit_now_s(void)
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

void gw_kit_sort(double *v, size_t n) { qsort(v, n, sizeof(double), cmp_double); }

double gw_kit_median_sorted(const double *v, size_t n)
{
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double gw_kit_percentile_sorted(const double *v, size_t n, double p)
{
    long k = (long)ceil(p / 100.0 * (double)n) - 1;
    if (k < 0)
        k = 0;
    if (k >= (long)n)
        k = (long)n - 1;
    return v[k];
}
