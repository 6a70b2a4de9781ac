/*
 * rank_memory.c - what one rank's share of a run costs in memory, computed
 * before anything is allocated, and the --max-rank-memory budget check.
 *
 * The figure counts what the trainer allocates for the model: parameters,
 * their gradients, the optimizer's momentum (one float each), and the
 * activation workspace (each layer's output and its gradient, for as many
 * rows as the workspace holds, plus the stage's input). The data set
 * itself is not counted: it is sharded by data parallelism only, the same
 * for every way of splitting the model. A data-parallel rank holds the
 * whole model, so a model over the budget cannot run that way; tensor
 * parallelism divides the split layers' weights by tp, pipeline
 * parallelism gives each rank only its stage's layers. ZeRO (zero.c) keeps
 * the whole model but only a block of each bucket's momentum per rank,
 * and at stage 2 of its reduced gradient, plus backward's two-bucket
 * workspace: gw_train_mem_zero asks zero.c's plan, whose allocations
 * follow it.
 */
#include "model_parallel.h"
#include "zero.h"

double gw_train_mem_total(const gw_train_mem_t *m)
{
    return m->params + m->grads + m->optimizer + m->activations;
}

void gw_train_mem_format(double bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

void gw_train_mem_data_parallel(const int *sizes, int nlayers, size_t cap, size_t local_b,
                                gw_train_mem_t *m)
{
    double n = 0, act = 0;
    for (int l = 0; l < nlayers; l++) {
        n += (double)sizes[l] * sizes[l + 1] + sizes[l + 1];
        act += 2.0 * (double)cap * sizes[l + 1] * sizeof(float);
    }
    m->params = m->grads = m->optimizer = n * sizeof(float);
    /* The local batch the step gathers its samples into. */
    m->activations = act + (double)local_b * sizes[0] * sizeof(float);
}

void gw_train_mem_zero(int stage, int world, size_t bucket_bytes, const int *sizes, int nlayers,
                       size_t cap, size_t local_b, gw_train_mem_t *m)
{
    gw_train_mem_data_parallel(sizes, nlayers, cap, local_b, m);
    gw_train_zero_sizes(sizes, nlayers, world, bucket_bytes, stage, &m->grads, &m->optimizer);
}

gw_status_t gw_train_mem_check(const gw_train_opts_t *o, const gw_train_mem_t *m, const char *who,
                               int suggest_split)
{
    double total = gw_train_mem_total(m);
    if (o->max_rank_memory == 0 || total <= (double)o->max_rank_memory)
        return GW_OK;
    char t[32], b[32], p[32], g[32], o_[32], a[32];
    gw_train_mem_format(total, t, sizeof(t));
    gw_train_mem_format((double)o->max_rank_memory, b, sizeof(b));
    gw_train_mem_format(m->params, p, sizeof(p));
    gw_train_mem_format(m->grads, g, sizeof(g));
    gw_train_mem_format(m->optimizer, o_, sizeof(o_));
    gw_train_mem_format(m->activations, a, sizeof(a));
    fprintf(stderr,
            "gradwire-train: %s needs %s (%.0f bytes: parameters %s, gradients %s, the "
            "optimizer's momentum %s, activations %s), more than --max-rank-memory %s (%zu "
            "bytes)%s\n",
            who, t, total, p, g, o_, a, b, o->max_rank_memory,
            suggest_split && !o->zero
                ? "; split the model over ranks with --tensor-parallel K and/or "
                  "--pipeline-parallel K, or shard the optimizer with --zero 1|2"
            : suggest_split ? "; split the model over ranks with --tensor-parallel K and/or "
                              "--pipeline-parallel K"
                            : "; split it further (a larger --tensor-parallel or "
                              "--pipeline-parallel) or use a smaller --batch");
    return GW_ERR_CONFIG;
}
