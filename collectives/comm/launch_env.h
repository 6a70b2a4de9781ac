/*
 * launch_env.h - what a launcher gives a job (gw_comm_init_env, api/comm_init.c):
 * rank, size, bootstrap root and job token from GW_*, torchrun's, Open
 * MPI's, Slurm's variables (launch_env.c) or PMIx (launch_pmix.c), under
 * mpirun, srun --mpi=pmix and prterun.
 */
#ifndef GW_COLLECTIVES_COMM_LAUNCH_ENV_H
#define GW_COLLECTIVES_COMM_LAUNCH_ENV_H

#include <stddef.h>

#include "common/log.h"
#include "gradwire.h"

/* What PMIx told this process: its rank and the job's size, rank 0's
 * bootstrap address, and the job token rank 0 made (hex). */
typedef struct gw_pmix_job {
    int rank, size;
    char root[320];
    char token[80];
} gw_pmix_job_t;

/* Under a PMIx server (PMIX_NAMESPACE in the environment): load libpmix at
 * run time, and agree on the bootstrap through it. Rank 0 chooses its
 * address (GW_SOCKET_IFNAME's interface; else 127.0.0.1 when the whole job
 * is on this host, else its first interface that is up, not loopback, and
 * has an IPv4 address) and a free port, and makes a random token unless
 * token_given (GW_JOB_TOKEN is set); it puts both, every rank fences (at
 * most timeout_ms), the others get them. GW_ERR_NOT_FOUND when there is no
 * PMIx server (the caller tries the next launcher), GW_ERR_CONFIG when
 * there is one but libpmix cannot be loaded or the exchange fails (logged,
 * saying what to install or what PMIx said). */
gw_status_t gw__pmix_job(const gw_logger_t *lg, int token_given, int timeout_ms,
                         gw_pmix_job_t *job);

/* What cfg's strings point into once gw__launch_env_config filled it. */
typedef struct gw_launch_env {
    gw_pmix_job_t pmix;
    char root[512];
    char token[512];
} gw_launch_env_t;

/* Fill cfg (from gw_config_init) from the launcher's environment, as
 * launch_env.c's top says: rank, size, and, where GW_ROOT / GW_JOB_TOKEN
 * do not give them, the bootstrap root and the job token. The strings live
 * in keep. GW_ERR_CONFIG naming the variable that is missing or bad. */
gw_status_t gw__launch_env_config(const gw_logger_t *lg, int default_timeout_ms, gw_config_t *cfg,
                                  gw_launch_env_t *keep);

/* The first line of GW_JOB_TOKEN_FILE (a regular file of this user that
 * nobody else may read, 16 characters or more) into buf, *token pointing
 * there; *token stays NULL when the variable is unset. GW_ERR_CONFIG (or
 * the file's error) naming the file and what is wrong. gw_comm_join reads
 * it too. */
gw_status_t gw__launch_env_token_file(const gw_logger_t *lg, char *buf, size_t cap,
                                      const char **token);

/* Under `gradwire launch` (GW_LAUNCH_SETUP="FD:RANK", an inherited pipe to
 * the launcher): tell it this process entered gw_comm_init ('I'), or left
 * it joined ('J') or failed ('F'), so that the launcher can fail a job one
 * of whose ranks exited while the others wait for it in set-up
 * (tools/launch_formed.c). Quiet and harmless without a launcher: a value
 * that does not parse, or an FD that is no pipe, is ignored. */
void gw__launch_tell_setup(char what);

#endif
