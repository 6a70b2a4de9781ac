/*
 * report.c - what the trainer tells its user: a progress bar while an epoch
 * runs (only on a terminal, on rank 0), one line per epoch with loss,
 * train/test accuracy, throughput and where the time went, and the same
 * figures as CSV (one row per epoch) and JSON (the run as one object, with
 * the measured link and compute figures the scaling driver projects from);
 * and the final weights, as raw float32, for --save-weights.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"
#include "straggler.h"
#include "trainer.h"

#define BAR_WIDTH 30

static const char *csv_header =
    "epoch,loss,train_acc,test_loss,test_acc,samples_per_s,compute_s,comm_s,codec_s,wait_s,"
    "epoch_s,elapsed_s,lr\n";

static void csv_line(FILE *f, const gw_train_epoch_stats_t *s)
{
    fprintf(f, "%d,%.6f,%.6f,%.6f,%.6f,%.2f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.6g\n", s->epoch,
            s->loss, s->train_acc, s->test_loss, s->test_acc, s->samples_per_s, s->compute_s,
            s->comm_s, s->codec_s, s->wait_s, s->epoch_s, s->elapsed_s, s->lr);
}

/* Rank 0's CSV: the header and the epochs so far. */
static gw_status_t open_csv(gw_train_report_t *r)
{
    if (r->rank != 0 || !r->csv_path || r->csv)
        return GW_OK;
    r->csv = gw_kit_fopen_private(r->csv_path);
    if (!r->csv) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", r->csv_path);
        return GW_ERR_SYSTEM;
    }
    fputs(csv_header, r->csv);
    for (int i = 0; i < r->nepochs; i++)
        csv_line(r->csv, &r->epochs[i]);
    fflush(r->csv);
    return GW_OK;
}

/* Nodes for world ranks, ranks_per_node to a node (the last one partly used). */
static int nodes_of(int world, int ranks_per_node)
{
    return (world + ranks_per_node - 1) / ranks_per_node;
}

gw_status_t gw_train_report_open(gw_train_report_t *r, const gw_train_opts_t *o, int rank,
                                 int world)
{
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    r->world = world;
    r->time_to_target_s = -1;
    r->target_acc = o->target_acc;
    r->alpha_s = r->beta_s_per_byte = r->allreduce_s = -1;
    r->mode = o->mode == GW_TRAIN_ASYNC ? "async" : "sync";
    r->ranks_per_node = o->ranks_per_node;
    r->nodes = r->nodes_start = nodes_of(world, o->ranks_per_node);
    r->wall_open_s = r->wall_mark_s = gw_kit_now_s();
    r->nodes_to_target = -1;
    r->price_per_node_hour = o->price_per_node_hour;
    r->codec = o->codec;
    gw_train_opts_fingerprint(o, world, r->config, sizeof(r->config));
    r->tty = rank == 0 && (o->progress == 1 || (o->progress < 0 && isatty(STDERR_FILENO)));
    r->quiet = o->quiet;
    r->csv_path = o->report_csv;
    gw_status_t st = open_csv(r);
    if (st != GW_OK)
        return st;
    r->open = 1;
    return GW_OK;
}

/* The mean node count over the run's wall time so far. */
static double mean_nodes(const gw_train_report_t *r)
{
    double now = gw_kit_now_s(), span = now - r->wall_open_s;
    double node_s = r->node_wall_s + r->nodes * (now - r->wall_mark_s);
    return span > 0 ? node_s / span : r->nodes;
}

void gw_train_report_world(gw_train_report_t *r, int world)
{
    double now = gw_kit_now_s();
    r->node_wall_s += r->nodes * (now - r->wall_mark_s);
    r->wall_mark_s = now;
    r->world = world;
    r->nodes = nodes_of(world, r->ranks_per_node);
}

gw_status_t gw_train_report_rank(gw_train_report_t *r, int rank)
{
    int was = r->rank;
    r->rank = rank;
    return was != 0 && rank == 0 ? open_csv(r) : GW_OK;
}

void gw_train_report_progress(gw_train_report_t *r, int epoch, long step, long steps, double loss)
{
    if (!r->tty || steps <= 0)
        return;
    double now = gw_kit_now_s();
    if (step < steps && now - r->last_bar < 0.1)
        return; /* ten updates a second are plenty */
    r->last_bar = now;
    int fill = (int)(BAR_WIDTH * step / steps);
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    fprintf(stderr, "\r epoch %3d [%s] %5.1f%% step %ld/%ld loss %.4f ", epoch, bar,
            100.0 * (double)step / (double)steps, step, steps, loss);
    fflush(stderr);
}

gw_status_t gw_train_report_epoch(gw_train_report_t *r, const gw_train_epoch_stats_t *s)
{
    if (r->nepochs == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        gw_train_epoch_stats_t *n = realloc(r->epochs, (size_t)cap * sizeof(*n));
        if (!n) {
            fprintf(stderr, "gradwire-train: out of memory for the report\n");
            return GW_ERR_NO_MEMORY;
        }
        r->epochs = n;
        r->cap = cap;
    }
    r->epochs[r->nepochs++] = *s;
    if (r->nodes_to_target < 0 && s->test_acc >= 0 && s->test_acc >= r->target_acc)
        r->nodes_to_target = mean_nodes(r);
    if (r->rank != 0)
        return GW_OK;
    if (r->tty)
        fprintf(stderr, "\r%*s\r", BAR_WIDTH + 50, "");
    if (!r->quiet) {
        char test[48] = "   -   ";
        if (s->test_acc >= 0)
            snprintf(test, sizeof(test), "%6.2f%%", 100 * s->test_acc);
        printf("epoch %3d  loss %.4f  train %6.2f%%  test %s  %9.0f samples/s  "
               "compute %.2fs comm %.2fs codec %.2fs wait %.2fs  lr %.4g\n",
               s->epoch, s->loss, 100 * s->train_acc, test, s->samples_per_s, s->compute_s,
               s->comm_s, s->codec_s, s->wait_s, s->lr);
        fflush(stdout);
    }
    if (r->csv) {
        csv_line(r->csv, s);
        fflush(r->csv);
    }
    return GW_OK;
}

static gw_status_t write_json(const gw_train_report_t *r, const char *path)
{
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return GW_ERR_SYSTEM;
    }
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 9);
    gw_kit_json_object(&j, NULL, NULL);
    gw_kit_json_str(&j, "tool", "gradwire-train");
    gw_kit_json_str(&j, "version", gw_version());
    gw_kit_json_str(&j, "mode", r->mode);
    gw_kit_json_str(&j, "codec", r->codec);
    gw_kit_json_str(&j, "config", r->config);
    gw_kit_json_int(&j, "world", r->world);
    gw_kit_json_int(&j, "cores", sysconf(_SC_NPROCESSORS_ONLN));
    gw_kit_json_num(&j, "steps", (double)r->steps);
    gw_kit_json_num(&j, "samples", (double)r->samples);
    gw_kit_json_num(&j, "train_s", r->train_s);
    gw_kit_json_num(&j, "samples_per_s", r->train_s > 0 ? (double)r->samples / r->train_s : NAN);
    gw_kit_json_num(&j, "target_acc", r->target_acc);
    /* A figure that was not measured is negative here and null there. */
    gw_kit_json_num_or_null(&j, "time_to_target_s", r->time_to_target_s >= 0, r->time_to_target_s);
    gw_kit_json_num(&j, "compute_per_sample_s", r->compute_per_sample_s);
    gw_kit_json_num(&j, "grad_bytes", (double)r->grad_bytes);
    gw_kit_json_num_or_null(&j, "link_alpha_s", r->alpha_s >= 0, r->alpha_s);
    gw_kit_json_num_or_null(&j, "link_beta_s_per_byte", r->beta_s_per_byte >= 0,
                            r->beta_s_per_byte);
    gw_kit_json_num_or_null(&j, "allreduce_s", r->allreduce_s >= 0, r->allreduce_s);
    /* The cost of the run: node-hours of training time (evaluation not
     * counted, like train_s), and with a price, money. */
    double mean = mean_nodes(r), nh = mean * r->train_s / 3600;
    double nh_target =
        (r->nodes_to_target >= 0 ? r->nodes_to_target : mean) * r->time_to_target_s / 3600;
    int priced = r->price_per_node_hour > 0, reached = r->time_to_target_s >= 0;
    gw_kit_json_int(&j, "nodes", r->nodes_start);
    gw_kit_json_int(&j, "nodes_end", r->nodes);
    gw_kit_json_num(&j, "nodes_mean", mean);
    gw_kit_json_num(&j, "node_hours", nh);
    gw_kit_json_num_or_null(&j, "samples_per_node_hour", nh > 0, (double)r->samples / nh);
    gw_kit_json_num_or_null(&j, "node_hours_to_target", reached, nh_target);
    gw_kit_json_num_or_null(&j, "price_per_node_hour", priced, r->price_per_node_hour);
    gw_kit_json_num_or_null(&j, "cost", priced, nh * r->price_per_node_hour);
    gw_kit_json_num_or_null(&j, "cost_to_target", priced && reached,
                            nh_target * r->price_per_node_hour);
    if (r->rank_memory > 0)
        gw_kit_json_num(&j, "rank_memory_bytes", r->rank_memory);
    if (r->dp_memory[0] > 0) {
        /* Data parallel: what rank 0 holds, by kind; with --zero the
         * momentum (and, stage 2, the gradients) are its shard. */
        gw_kit_json_object(&j, "memory", NULL);
        gw_kit_json_int(&j, "zero", r->zero);
        gw_kit_json_num(&j, "params", r->dp_memory[0]);
        gw_kit_json_num(&j, "grads", r->dp_memory[1]);
        gw_kit_json_num(&j, "optimizer", r->dp_memory[2]);
        gw_kit_json_num(&j, "activations", r->dp_memory[3]);
        gw_kit_json_close(&j, NULL);
    }
    if (r->par_tp > 0) {
        gw_kit_json_object(&j, "parallel", NULL);
        gw_kit_json_int(&j, "data", r->par_dp);
        gw_kit_json_int(&j, "pipeline", r->par_pp);
        gw_kit_json_int(&j, "tensor", r->par_tp);
        gw_kit_json_int(&j, "micro_batches", r->par_micro);
        gw_kit_json_num(&j, "bubble_theory", r->par_bubble_theory);
        gw_kit_json_array(&j, "bubble_per_stage", NULL);
        for (int i = 0; i < r->par_pp; i++)
            gw_kit_json_num(&j, NULL, r->par_bubble[i]);
        gw_kit_json_close(&j, NULL);
        gw_kit_json_array(&j, "memory_per_rank", "\n    ");
        for (int i = 0; r->par_memory && i < r->world; i++) {
            const double *m = r->par_memory + 4 * i;
            gw_kit_json_object(&j, NULL, NULL);
            gw_kit_json_int(&j, "rank", i);
            gw_kit_json_num(&j, "params", m[0]);
            gw_kit_json_num(&j, "grads", m[1]);
            gw_kit_json_num(&j, "optimizer", m[2]);
            gw_kit_json_num(&j, "activations", m[3]);
            gw_kit_json_num(&j, "total", m[0] + m[1] + m[2] + m[3]);
            gw_kit_json_close(&j, NULL);
        }
        gw_kit_json_close(&j, "\n  ");
        gw_kit_json_close(&j, NULL);
    }
    if (r->straggler)
        gw_train_straggler_json(r->straggler, &j);
    double fin = r->nepochs ? r->epochs[r->nepochs - 1].test_acc : NAN;
    gw_kit_json_num_or_null(&j, "final_test_acc", fin >= 0, fin);
    gw_kit_json_array(&j, "epochs", "\n  ");
    for (int i = 0; i < r->nepochs; i++) {
        const gw_train_epoch_stats_t *s = &r->epochs[i];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_int(&j, "epoch", s->epoch);
        gw_kit_json_num(&j, "loss", s->loss);
        gw_kit_json_num(&j, "train_acc", s->train_acc);
        gw_kit_json_num_or_null(&j, "test_loss", s->test_acc >= 0, s->test_loss);
        gw_kit_json_num_or_null(&j, "test_acc", s->test_acc >= 0, s->test_acc);
        gw_kit_json_num(&j, "samples_per_s", s->samples_per_s);
        gw_kit_json_num(&j, "compute_s", s->compute_s);
        gw_kit_json_num(&j, "comm_s", s->comm_s);
        gw_kit_json_num(&j, "codec_s", s->codec_s);
        gw_kit_json_num(&j, "wait_s", s->wait_s);
        gw_kit_json_num(&j, "epoch_s", s->epoch_s);
        gw_kit_json_num(&j, "elapsed_s", s->elapsed_s);
        gw_kit_json_num(&j, "lr", s->lr);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "");
    gw_kit_json_close(&j, NULL);
    fputc('\n', f);
    if (fclose(f) != 0) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

gw_status_t gw_train_report_close(gw_train_report_t *r, const char *json_path)
{
    gw_status_t st = GW_OK;
    if (r->tty)
        fprintf(stderr, "\r%*s\r", BAR_WIDTH + 50, "");
    if (r->rank == 0 && !r->quiet && r->nepochs > 0) {
        double mean = mean_nodes(r), nh = mean * r->train_s / 3600;
        if (r->nodes == r->nodes_start && r->node_wall_s == 0)
            printf("gradwire-train: %.4g node-hours (%d node(s) x %.1f s of training)", nh,
                   r->nodes, r->train_s);
        else /* an elastic run: each count for the time it ran */
            printf("gradwire-train: %.4g node-hours (%d node(s) at the start, %d at the end, "
                   "%.2f on average x %.1f s of training)",
                   nh, r->nodes_start, r->nodes, mean, r->train_s);
        printf(", %.4g samples per node-hour", nh > 0 ? (double)r->samples / nh : 0.0);
        if (r->price_per_node_hour > 0) {
            printf(", cost %.4g at %g per node-hour", nh * r->price_per_node_hour,
                   r->price_per_node_hour);
            double at_target = r->nodes_to_target >= 0 ? r->nodes_to_target : mean;
            if (r->time_to_target_s >= 0)
                printf(", %.4g to reach %.2f%% test accuracy",
                       at_target * r->time_to_target_s / 3600 * r->price_per_node_hour,
                       100 * r->target_acc);
            else
                printf(" (%.2f%% test accuracy not reached)", 100 * r->target_acc);
        }
        printf("\n");
    }
    if (r->rank == 0 && json_path)
        st = write_json(r, json_path);
    if (r->csv && fclose(r->csv) != 0 && st == GW_OK) {
        fprintf(stderr, "gradwire-train: cannot write the CSV report: %m\n");
        st = GW_ERR_SYSTEM;
    }
    r->csv = NULL;
    free(r->epochs);
    r->epochs = NULL;
    return st;
}

gw_status_t gw_train_save_floats(const char *path, const float *a, size_t n)
{
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return GW_ERR_SYSTEM;
    }
    size_t w = fwrite(a, sizeof(float), n, f);
    if (fclose(f) != 0 || w != n) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}
