/*
 * bench_kernels.c - `gradwire-bench-kernels`: the throughput of the
 * reduction kernels (gw__reduce), one core, no communication.
 *
 * Unlike gradwire-bench this is a developer's tool: the kernels are internal,
 * so it links the static library and calls them directly, and it is not
 * installed. For float16 and bfloat16 it times every instruction set of
 * reduce_half.h that this CPU has, side by side: the sets take turns within
 * each round, so that they share the machine's noise, and the speed-up
 * column is the ratio of their medians. Each set's output is compared with
 * the portable kernels' bit for bit (the #wrong column; any difference makes
 * the exit status 1).
 *
 * GB/s is the bytes of one operand (count x element size, 1e9 bytes/s) per
 * second, the rate at which a reduction consumes a received buffer; the
 * memory traffic is three times that (read a and b, write out).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce_half.h"
#include "collectives/reduce_kernels.h"
#include "kit.h"

#define MAX_ROUNDS 1000
#define ROUND_NS 5000000.0 /* aim for 5 ms of calls per timed sample */

typedef struct opts {
    size_t bytes; /* per operand */
    int rounds;
    unsigned dtypes; /* bit per gw_dtype_t */
    unsigned ops;    /* bit per gw_op_t */
} opts_t;

/* One kernel to time: dtype, op and, for half precision, the ISA (-1: the
 * dtype's only kernels, through gw__reduce). */
typedef struct variant {
    int isa;
    double ns[MAX_ROUNDS]; /* per call */
    long reps;             /* calls per sample */
    long wrong;
} variant_t;

static void run(const variant_t *v, void *out, const void *a, const void *b, size_t count,
                gw_dtype_t dt, gw_op_t op)
{
    if (v->isa < 0)
        gw__reduce(out, a, b, count, dt, op);
    else
        (void)gw__reduce_half_isa(out, a, b, count, dt, op, (gw_half_isa_t)v->isa);
}

/* Inputs like gradients: values in [-1, 1), never NaN, the same for every
 * run (a fixed generator). */
static void fill(void *buf, size_t count, gw_dtype_t dt, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        float f = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        switch (dt) {
        case GW_FLOAT32:
            ((float *)buf)[i] = f;
            break;
        case GW_FLOAT64:
            ((double *)buf)[i] = f;
            break;
        case GW_FLOAT16:
            ((uint16_t *)buf)[i] = gw__float_to_half(f);
            break;
        case GW_BFLOAT16:
            ((uint16_t *)buf)[i] = gw__float_to_bf16(f);
            break;
        case GW_INT8:
        case GW_UINT8:
            ((uint8_t *)buf)[i] = (uint8_t)(s >> 56);
            break;
        case GW_INT32:
            ((uint32_t *)buf)[i] = (uint32_t)(s >> 32);
            break;
        default:
            ((uint64_t *)buf)[i] = s;
            break;
        }
    }
}

/* Time every variant of (dt, op) and print its rows. Returns the number of
 * outputs that differ from the portable kernels'. */
static long bench_one(const opts_t *o, gw_dtype_t dt, gw_op_t op, unsigned char *a,
                      unsigned char *b, unsigned char *out, unsigned char *ref)
{
    size_t es = gw_dtype_size(dt), count = o->bytes / es, bytes = count * es;
    variant_t vs[GW_HALF_ISA_COUNT];
    int nv = 0;
    if (dt == GW_FLOAT16 || dt == GW_BFLOAT16) {
        for (int isa = 0; isa < GW_HALF_ISA_COUNT; isa++)
            if (gw__half_isa_supported((gw_half_isa_t)isa))
                vs[nv++].isa = isa;
    } else {
        vs[nv++].isa = -1;
    }
    fill(a, count, dt, 1);
    fill(b, count, dt, 2);
    /* The first variant (portable, or the only one) gives the reference. */
    run(&vs[0], ref, a, b, count, dt, op);
    for (int v = 0; v < nv; v++) {
        memset(out, 0, bytes);
        run(&vs[v], out, a, b, count, dt, op);
        vs[v].wrong = 0;
        for (size_t i = 0; i < count; i++)
            vs[v].wrong += memcmp(out + i * es, ref + i * es, es) != 0;
        /* Calibrate: enough calls per sample for ROUND_NS. */
        double t0 = (double)gw_kit_now_ns();
        run(&vs[v], out, a, b, count, dt, op);
        double one = (double)gw_kit_now_ns() - t0;
        vs[v].reps = one > 0 ? (long)(ROUND_NS / one) : 1000;
        if (vs[v].reps < 1)
            vs[v].reps = 1;
    }
    for (int r = 0; r < o->rounds; r++)
        for (int v = 0; v < nv; v++) {
            double t0 = (double)gw_kit_now_ns();
            for (long k = 0; k < vs[v].reps; k++)
                run(&vs[v], out, a, b, count, dt, op);
            vs[v].ns[r] = ((double)gw_kit_now_ns() - t0) / (double)vs[v].reps;
        }
    double base_median = 0;
    long wrong = 0;
    for (int v = 0; v < nv; v++) {
        gw_kit_sort(vs[v].ns, (size_t)o->rounds);
        double med = vs[v].ns[o->rounds / 2];
        double lo = vs[v].ns[0], hi = vs[v].ns[o->rounds - 1];
        if (v == 0)
            base_median = med;
        const char *isa = vs[v].isa < 0 ? "-" : gw__half_isa_name((gw_half_isa_t)vs[v].isa);
        /* Fastest sample gives the highest rate: max GB/s from lo. */
        printf("%-9s %-5s %-9s %10zu %10.2f %8.2f %8.2f %8.2fx %7ld\n", gw_dtype_name(dt),
               gw_op_name(op), isa, bytes, (double)bytes / med, (double)bytes / hi,
               (double)bytes / lo, base_median / med, vs[v].wrong);
        wrong += vs[v].wrong;
    }
    return wrong;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gradwire-bench-kernels [--bytes SIZE] [--rounds N] [--dtype LIST]\n"
            "                              [--op LIST]\n"
            "\n"
            "  --bytes SIZE   bytes per operand (default 512K; K, M, G suffixes)\n"
            "  --rounds N     timed samples per kernel, 3..%d (default 21)\n"
            "  --dtype LIST   comma-separated dtypes (default float16,bfloat16,float32)\n"
            "  --op LIST      comma-separated ops (default sum,prod,min,max)\n"
            "\n"
            "Prints the median GB/s (bytes of one operand per second) with the\n"
            "slowest and fastest sample, the speed-up over the first instruction set\n"
            "(portable) and #wrong, the elements that differ from its output.\n",
            MAX_ROUNDS);
}

/* "a,b,c" of dtype or op names into a bit set; says on stderr what is
 * wrong, if anything. */
static int parse_list(const char *s, unsigned *out, int is_dtype)
{
    const char *what = is_dtype ? "dtype" : "op";
    char buf[256];
    if (!s || !*s || strlen(s) >= sizeof(buf)) {
        fprintf(stderr, "gradwire-bench-kernels: --%s needs a list of names\n", what);
        return -1;
    }
    strcpy(buf, s);
    unsigned bits = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        gw_dtype_t dt;
        gw_op_t op;
        if (is_dtype ? gw_dtype_parse(tok, &dt) != GW_OK : gw_op_parse(tok, &op) != GW_OK) {
            fprintf(stderr, "gradwire-bench-kernels: unknown %s '%s'\n", what, tok);
            return -1;
        }
        bits |= 1u << (is_dtype ? (unsigned)dt : (unsigned)op);
    }
    if (!bits) {
        fprintf(stderr, "gradwire-bench-kernels: --%s needs a list of names\n", what);
        return -1;
    }
    *out = bits;
    return 0;
}

static int bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "gradwire-bench-kernels: bad value for %s: '%s'\n", opt,
            val ? val : "(missing)");
    return 2;
}

int main(int argc, char **argv)
{
    opts_t o = {512 * 1024, 21, 1u << GW_FLOAT16 | 1u << GW_BFLOAT16 | 1u << GW_FLOAT32,
                1u << GW_SUM | 1u << GW_PROD | 1u << GW_MIN | 1u << GW_MAX};
    static const struct option longopts[] = {
        {"bytes", required_argument, NULL, 'b'}, {"rounds", required_argument, NULL, 'r'},
        {"dtype", required_argument, NULL, 'd'}, {"op", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;
    long v;
    gw_kit_getopt_begin();
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'b':
            if (gw_kit_parse_size(optarg, &o.bytes) != 0 || o.bytes == 0 ||
                o.bytes > (size_t)1 << 40)
                return bad_value("--bytes", optarg);
            break;
        case 'r':
            if (gw_kit_parse_long(optarg, 3, MAX_ROUNDS, &v) != 0)
                return bad_value("--rounds", optarg);
            o.rounds = (int)v;
            break;
        case 'd':
        case 'o':
            if (parse_list(optarg, c == 'd' ? &o.dtypes : &o.ops, c == 'd') != 0)
                return 2; /* parse_list said why */
            break;
        case ':':
            if (optopt == 'd' || optopt == 'o') {
                parse_list(NULL, NULL, optopt == 'd'); /* says that a list is needed */
                return 2;
            }
            return bad_value(argv[optind - 1], NULL);
        default:
            fprintf(stderr, "gradwire-bench-kernels: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gradwire-bench-kernels: unknown option '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    /* 8-byte elements at most, one element at least. */
    if (o.bytes < 8) {
        fprintf(stderr, "gradwire-bench-kernels: --bytes must be at least 8\n");
        return 2;
    }
    unsigned char *a = malloc(o.bytes), *b = malloc(o.bytes);
    unsigned char *out = malloc(o.bytes), *ref = malloc(o.bytes);
    if (!a || !b || !out || !ref) {
        fprintf(stderr, "gradwire-bench-kernels: out of memory for 4 x %zu bytes\n", o.bytes);
        free(a);
        free(b);
        free(out);
        free(ref);
        return 1;
    }
    printf("# fastest half-precision kernels on this CPU: %s\n",
           gw__half_isa_name(gw__half_isa_best()));
    printf("# %-7s %-5s %-9s %10s %10s %8s %8s %9s %7s\n", "dtype", "op", "isa", "bytes", "GB/s",
           "min", "max", "speedup", "#wrong");
    long wrong = 0;
    for (int dt = 0; dt < GW_DTYPE_COUNT; dt++)
        for (int op = 0; op < GW_OP_COUNT; op++)
            if ((o.dtypes >> dt & 1) && (o.ops >> op & 1) &&
                gw__reduce_supported((gw_dtype_t)dt, (gw_op_t)op)) /* no bitwise op on floats */
                wrong += bench_one(&o, (gw_dtype_t)dt, (gw_op_t)op, a, b, out, ref);
    free(a);
    free(b);
    free(out);
    free(ref);
    return wrong ? 1 : 0;
}
