/*
 * bench_compress_report.c - what `gradwire-bench compress` reports: rank
 * 0's table, one line per size and codec as the sizes are measured, and at
 * the end the whole run as JSON (parameters, every row, and the top-k
 * selection against the full sort it replaces).
 */
#include <stdio.h>

#include "bench_compress.h"

void gw_bench_compress_print_header(const struct cbench *b)
{
    printf("# gradwire-bench compress, gradwire %s\n", gw_version());
    printf("# ranks: %d  transport: %s  dense algorithm: %s  iters: %ld  warmup: %ld\n", b->size,
           gw_comm_transport(b->comm), gw_algo_name(b->o.algo), b->o.sw.iters, b->o.sw.warmup);
    printf("# top-k ratio %g (DGC momentum %g), PowerSGD rank %ld, bucket %ld elements\n"
           "# comm, codec: rank 0's mean time in exchanges (wall) and in the codec (its CPU time)\n"
           "# enc, dec: codec GB/s of float32 input, rank 0 alone on one core, wall, best of %ld\n"
           "# cpu: the same for encode + decode per CPU second (robust to a busy machine)\n#\n",
           b->o.ratio, b->o.momentum, b->o.rank, b->o.bucket, b->o.solo_iters);
    printf("#%11s  %-8s  %10s  %7s  %7s  %12s  %7s  %9s  %9s  %6s  %6s  %6s  %5s\n", "size(B)",
           "codec", "time(us)", "algbw", "speedup", "wire(B)", "ratio", "comm(us)", "codec(us)",
           "enc", "dec", "cpu", "agree");
    printf("#%11s  %-8s  %10s  %7s  %7s  %12s  %7s  %9s  %9s  %6s  %6s  %6s  %5s\n", "", "",
           "(median)", "(GB/s)", "(x)", "(rank 0)", "(x)", "(rank 0)", "(cpu)", "(GB/s)", "(GB/s)",
           "(GB/s)", "");
    fflush(stdout);
}

void gw_bench_compress_print_result(const struct cres *r)
{
    char wire[32], comm[32], cpuu[32], enc[32], dec[32], cpu[32];
    snprintf(wire, sizeof(wire), "%llu", (unsigned long long)r->wire);
    snprintf(comm, sizeof(comm), r->dense ? "-" : "%.0f", r->comm_us);
    snprintf(cpuu, sizeof(cpuu), r->dense ? "-" : "%.0f", r->cpu_us);
    snprintf(enc, sizeof(enc), r->enc_gbps > 0 ? "%.2f" : "-", r->enc_gbps);
    snprintf(dec, sizeof(dec), r->dec_gbps > 0 ? "%.2f" : "-", r->dec_gbps);
    snprintf(cpu, sizeof(cpu), r->cpu_gbps > 0 ? "%.2f" : "-", r->cpu_gbps);
    printf("%12zu  %-8s  %10.0f  %7.3f  %7.2f  %12s  %7.2f  %9s  %9s  %6s  %6s  %6s  %5s\n",
           r->bytes, r->name, r->t.med_us, r->algbw, r->speedup, wire, r->ratio, comm, cpuu, enc,
           dec, cpu, r->agree ? "yes" : "NO");
    fflush(stdout);
}

static void json_result(gw_kit_json_t *j, const struct cres *r)
{
    gw_kit_json_object(j, NULL, NULL);
    gw_kit_json_uint(j, "size", r->bytes);
    gw_kit_json_str(j, "codec", r->name);
    gw_bench_json_timing(j, &r->t);
    gw_kit_json_num(j, "algbw", r->algbw);
    gw_kit_json_num(j, "speedup", r->speedup);
    gw_kit_json_uint(j, "bytes_sent", r->wire);
    /* The dense allreduce is the reference: ratio 1, no codec time. */
    gw_kit_json_num(j, "compression_ratio", r->dense ? 1 : r->ratio);
    gw_kit_json_num_or_null(j, "comm_us", !r->dense, r->comm_us);
    gw_kit_json_num_or_null(j, "codec_cpu_us", !r->dense, r->cpu_us);
    gw_kit_json_num_or_null(j, "encode_gbps", r->enc_gbps > 0, r->enc_gbps);
    gw_kit_json_num_or_null(j, "decode_gbps", r->dec_gbps > 0, r->dec_gbps);
    gw_kit_json_num_or_null(j, "codec_cpu_gbps", r->cpu_gbps > 0, r->cpu_gbps);
    gw_kit_json_bool(j, "agree", r->agree);
    gw_kit_json_close(j, NULL);
}

int gw_bench_compress_write_json(gw_bench_report_t *f, const struct cbench *b, int ok)
{
    const struct copts *o = &b->o;
    gw_kit_json_t j;
    if (gw_bench_json_begin(&j, f, o->json, "compress", b->comm) != 0)
        return -1;
    gw_kit_json_object(&j, "units", NULL);
    gw_kit_json_str(&j, "size", "bytes");
    gw_kit_json_str(&j, "time", "us");
    gw_kit_json_str(&j, "bandwidth", "GB/s (1e9 bytes/s) of uncompressed float32");
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "params", NULL);
    gw_kit_json_uint(&j, "minbytes", o->sw.minbytes);
    gw_kit_json_uint(&j, "maxbytes", o->sw.maxbytes);
    gw_kit_json_int(&j, "stepfactor", o->sw.factor);
    gw_kit_json_int(&j, "iters", o->sw.iters);
    gw_kit_json_int(&j, "warmup_iters", o->sw.warmup);
    gw_kit_json_str(&j, "dense_algo", gw_algo_name(o->algo));
    gw_kit_json_num(&j, "topk_ratio", o->ratio);
    gw_kit_json_num(&j, "topk_momentum", o->momentum);
    gw_kit_json_int(&j, "powersgd_rank", o->rank);
    gw_kit_json_int(&j, "bucket_elements", o->bucket);
    gw_kit_json_array(&j, "codecs", NULL);
    for (int c = 0; c < o->ncodecs; c++)
        gw_kit_json_str(&j, NULL, gw_codec_name(o->codecs[c]));
    gw_kit_json_close(&j, NULL);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "results", "\n    ");
    for (size_t i = 0; i < b->nres; i++)
        json_result(&j, &b->res[i]);
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_array(&j, "topk_vs_sort", "\n    ");
    for (int i = 0; i < b->nsorts; i++) {
        const struct sortres *q = &b->sorts[i];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_uint(&j, "size", q->bytes);
        gw_kit_json_num(&j, "select_ms", q->select_ms);
        gw_kit_json_num(&j, "sort_ms", q->sort_ms);
        gw_kit_json_num(&j, "speedup", q->select_ms > 0 ? q->sort_ms / q->select_ms : 0);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n  ");
    return gw_bench_json_end(&j, ok, b->error, o->json);
}
