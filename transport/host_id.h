/*
 * host_id.h - which ranks share a host, as far as shared memory is
 * concerned. The selection's plan (select.c) routes ranks with equal ids
 * to shared memory, and the shared-memory transport refuses peers with
 * another id.
 */
#ifndef GW_TRANSPORT_HOST_ID_H
#define GW_TRANSPORT_HOST_ID_H

#include <stdint.h>

#include "common/log.h"
#include "gradwire.h"

/* A 64-bit identity of the host as far as shared memory is concerned: a
 * hash of the host name, the kernel's boot id, and the identities of our
 * network namespace, pid namespace and /dev/shm. Ranks with equal ids can
 * map each other's segments, signal and read each other's memory; ranks in
 * different network namespaces (the project's emulated hosts) differ, so
 * they talk over the network as real hosts would. Never fails: what cannot
 * be read is left out (and logged at TRACE). */
gw_status_t gw__host_id(const gw_logger_t *lg, uint64_t *out);

/* The host id that the selection's plan and the communicator's topology
 * see (mux.c publishes it): gw__host_id, unless GW_HOST_ID is set, a
 * testing override that makes ranks on one machine pretend to be on the
 * hosts it names (any non-empty string; ranks with equal strings share a
 * host). The shared-memory transport keeps its own check by gw__host_id,
 * so ranks really on different hosts never try to share memory.
 * GW_ERR_CONFIG (logged) for an empty GW_HOST_ID. */
gw_status_t gw__host_id_published(const gw_logger_t *lg, uint64_t *out);

#endif
