/*
 * parallel_grid.c - the grid of ranks of a model-parallel run: which rank
 * holds which data shard, pipeline stage and tensor slice, and the three
 * sub-communicators (gw_comm_split) each kind of traffic runs on.
 *
 * The world of dp x pp x tp ranks is laid out tensor-parallel innermost:
 * rank = (dp_rank * pp + pp_rank) * tp + tp_rank. The tensor-parallel group
 * (same data shard, same stage) allreduces partial activations twice per
 * layer pair and micro-batch, the most frequent traffic, so its ranks are
 * neighbours; the pipeline group (same shard, same slice) passes
 * activations and their gradients between consecutive stages with
 * gw_send/gw_recv; the data-parallel group (same stage, same slice)
 * allreduces the gradients once per step, as the data-parallel trainer
 * does. Stages get consecutive layers, at least one each, cut where the
 * largest stage's multiply-adds per rank (the sum of its layers' in x
 * out, a tensor-parallel layer's divided by tp) is smallest, so that no stage holds the others up more than the layer sizes
 * force (a pipeline runs at its slowest stage's pace). Within a stage, layers pair up Megatron style (Shoeybi
 * et al. 2019): the first of a pair is column-parallel (its output units
 * split over the group, so its ReLU needs nothing from the others), the
 * second row-parallel (its input units split, the partial products summed
 * by an allreduce); a stage's odd last layer is kept whole on every rank
 * of the group.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model_parallel.h"

char gw_train_tp_kind(int l, int lo, int hi, int tp)
{
    if (tp == 1)
        return 'F';
    int i = l - lo;
    if (i % 2 == 1)
        return 'R';
    return l + 1 < hi ? 'C' : 'F';
}

__attribute__((format(printf, 1, 2))) static gw_status_t bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gradwire-train: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return GW_ERR_INVALID_ARG;
}

/* Every rank checks the same figures, so every rank refuses together. */
static gw_status_t check(gw_train_grid_t *g, const int *sizes, int nlayers)
{
    int mp = g->tp * g->pp;
    if (g->pp > nlayers)
        return bad("--pipeline-parallel %d asks for more stages than the model's %d weight "
                   "layers (one layer per stage at least)",
                   g->pp, nlayers);
    if (g->world % mp != 0)
        return bad("--tensor-parallel %d x --pipeline-parallel %d = %d ranks per model replica "
                   "do not divide the world of %d ranks",
                   g->tp, g->pp, mp, g->world);
    int split = 0;
    for (int s = 0; s < g->pp; s++)
        for (int l = g->lo[s]; l < g->lo[s + 1]; l++) {
            char k = gw_train_tp_kind(l, g->lo[s], g->lo[s + 1], g->tp);
            if (k == 'C' && sizes[l + 1] % g->tp != 0)
                return bad("layer %d has %d output units, which do not split evenly over "
                           "--tensor-parallel %d (choose hidden sizes divisible by it)",
                           l, sizes[l + 1], g->tp);
            split += k != 'F';
        }
    if (g->tp > 1 && split == 0)
        return bad("--tensor-parallel %d has nothing to split: every stage holds a single "
                   "layer (a split needs a pair of layers in a stage; %d layers, %d stages)",
                   g->tp, nlayers, g->pp);
    return GW_OK;
}

static gw_status_t split(gw_comm_t *comm, int color, int key, gw_comm_t **out, const char *what)
{
    gw_status_t st = gw_comm_split(comm, color, key, out);
    if (st != GW_OK)
        fprintf(stderr, "gradwire-train: splitting the %s communicator failed: %s (%s)\n", what,
                gw_status_str(st), gw_status_name(st));
    return st;
}

/* A stage of layers [i, j): its multiply-adds per sample on one rank of
 * its tensor group (split layers divided by tp). */
static double stage_cost(const int *sizes, int i, int j, int tp)
{
    double c = 0;
    for (int l = i; l < j; l++)
        c += (double)sizes[l] * sizes[l + 1] / (gw_train_tp_kind(l, i, j, tp) == 'F' ? 1 : tp);
    return c;
}

/* lo[0..pp] of the partition of layers into pp contiguous stages whose
 * largest cost is least (dynamic programming over the cut points). */
static void balance(const int *sizes, int nlayers, int pp, int tp, int *lo)
{
    /* best[k][j]: first j layers in k stages; cut[k][j]: where the k-th begins. */
    double best[GW_TRAIN_MAX_LAYERS + 1][GW_TRAIN_MAX_LAYERS + 1];
    int cut[GW_TRAIN_MAX_LAYERS + 1][GW_TRAIN_MAX_LAYERS + 1];
    for (int j = 1; j <= nlayers; j++)
        best[1][j] = stage_cost(sizes, 0, j, tp), cut[1][j] = 0;
    for (int k = 2; k <= pp; k++)
        for (int j = k; j <= nlayers; j++) {
            best[k][j] = -1;
            for (int i = k - 1; i < j; i++) {
                double here = stage_cost(sizes, i, j, tp);
                double c = best[k - 1][i] > here ? best[k - 1][i] : here;
                if (best[k][j] < 0 || c < best[k][j])
                    best[k][j] = c, cut[k][j] = i;
            }
        }
    lo[pp] = nlayers;
    for (int k = pp, j = nlayers; k >= 1; k--)
        j = lo[k - 1] = cut[k][j];
}

gw_status_t gw_train_grid_init(gw_train_grid_t *g, gw_comm_t *comm, const gw_train_opts_t *o,
                               const int *sizes, int nlayers)
{
    memset(g, 0, sizeof(*g));
    g->world_comm = comm;
    g->world = gw_comm_size(comm);
    g->rank = gw_comm_rank(comm);
    g->tp = o->tensor_parallel;
    g->pp = o->pipeline_parallel;
    if (g->pp <= nlayers)
        balance(sizes, nlayers, g->pp, o->tensor_parallel, g->lo);
    gw_status_t st = check(g, sizes, nlayers);
    if (st != GW_OK)
        return st;
    g->dp = g->world / (g->tp * g->pp);
    g->tp_rank = g->rank % g->tp;
    g->pp_rank = g->rank / g->tp % g->pp;
    g->dp_rank = g->rank / (g->tp * g->pp);
    if ((st = split(comm, g->dp_rank * g->pp + g->pp_rank, g->rank, &g->tp_comm, "tensor")) ||
        (st = split(comm, g->dp_rank * g->tp + g->tp_rank, g->rank, &g->pp_comm, "pipeline")) ||
        (st = split(comm, g->pp_rank * g->tp + g->tp_rank, g->rank, &g->dp_comm, "data")))
        return st;
    return GW_OK;
}

void gw_train_grid_free(gw_train_grid_t *g)
{
    gw_comm_t **c[] = {&g->tp_comm, &g->pp_comm, &g->dp_comm};
    for (int i = 0; i < 3; i++) {
        if (*c[i])
            gw_comm_destroy(*c[i]);
        *c[i] = NULL;
    }
}
