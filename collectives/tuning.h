/*
 * tuning.h - the alpha-beta cost model that picks an allreduce algorithm.
 *
 * T(algo, n, S) = a_alpha(algo, n) * alpha + a_beta(algo, n) * S * beta
 *               + a_gamma(algo, n) * S * gamma
 * with alpha the per-message latency (s), beta the per-byte wire time (s/B)
 * and gamma the per-byte reduction time (s/B). The coefficients of each
 * algorithm are derived in tuning.c.
 */
#ifndef GW_COLLECTIVES_TUNING_H
#define GW_COLLECTIVES_TUNING_H

#include <stddef.h>

#include "gradwire.h"

typedef struct gw_tuning {
    double alpha;       /* seconds per message */
    double beta;        /* seconds per byte on a link */
    double gamma;       /* seconds per byte reduced */
    size_t chunk_bytes; /* pipeline chunk of ring and tree */
} gw_tuning_t;

/* Defaults for a transport ("tcp", "self"). */
void gw__tuning_defaults(gw_tuning_t *t, const char *transport);

/* Predicted seconds for an allreduce of bytes over nranks with algo. */
double gw__tuning_predict(const gw_tuning_t *t, gw_algo_t algo, int nranks, size_t bytes);

/* The cheapest algorithm by the model (never GW_ALGO_AUTO). */
gw_algo_t gw__tuning_pick(const gw_tuning_t *t, int nranks, size_t bytes);

#endif
