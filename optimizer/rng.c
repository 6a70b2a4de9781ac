/*
 * rng.c - the trainer's random numbers: xoshiro256** seeded through
 * splitmix64. Every rank seeds its own generator from the job's seed, so
 * initial weights and shuffles are the same on every rank without any
 * message, and the state (four words) fits in a checkpoint.
 */
#include <math.h>

#include "trainer.h"

uint64_t gw_train_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void gw_train_rng_seed(gw_train_rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed = gw_train_mix64(seed);
        r->s[i] = seed;
    }
    /* An all-zero state would stay zero forever. */
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gw_train_rng_next(gw_train_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double gw_train_rng_uniform(gw_train_rng_t *r)
{
    return (double)(gw_train_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Box-Muller without caching the second value, so the state alone says
 * what comes next. */
double gw_train_rng_normal(gw_train_rng_t *r)
{
    double u1 = gw_train_rng_uniform(r), u2 = gw_train_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Lemire's nearly-divisionless method would be faster; rejection keeps it
 * obviously unbiased. */
uint64_t gw_train_rng_below(gw_train_rng_t *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do {
        v = gw_train_rng_next(r);
    } while (v >= limit);
    return v % n;
}

void gw_train_shuffle(uint32_t *a, size_t n, gw_train_rng_t *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gw_train_rng_below(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
