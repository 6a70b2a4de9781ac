/* A program outside the project, built against an installed gradwire. */
#include <gradwire.h>
#include <stdio.h>

int main(void)
{
    gw_comm_t *comm;
    if (gw_comm_init_env(&comm) != GW_OK)
        return 1;
    double x = gw_comm_rank(comm) + 1.0, sum = 0;
    gw_status_t st = gw_allreduce(comm, &x, &sum, 1, GW_FLOAT64, GW_SUM);
    int n = gw_comm_size(comm);
    printf("gradwire %s: rank %d sum %g\n", gw_version(), gw_comm_rank(comm), sum);
    gw_comm_destroy(comm);
    return st == GW_OK && sum == n * (n + 1) / 2.0 ? 0 : 1;
}
