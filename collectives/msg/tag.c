/*
 * tag.c - signatures and tags (see tag.h for what they protect).
 */
#include "collectives/msg/tag.h"

#include <string.h>

#include "collectives/comm/comm.h"

uint32_t gw__sig_words(const uint64_t *words, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t w = 0; w < n; w++) {
        uint64_t v = words[w];
        for (int i = 0; i < 8; i++) {
            h ^= (uint32_t)(v & 0xff);
            h *= 16777619u;
            v >>= 8;
        }
    }
    return h;
}

#define COLL_WORDS(kind, count, dtype, op, root, algo)                          \
    {                                                                           \
        (uint64_t)(kind), (uint64_t)(count), (uint64_t)(dtype), (uint64_t)(op), \
            (uint64_t)(int64_t)(root), (uint64_t)(algo),                        \
    }

uint32_t gw__sig_coll(gw_coll_kind_t kind, size_t count, gw_dtype_t dtype, gw_op_t op, int root,
                      gw_algo_t algo)
{
    const uint64_t words[] = COLL_WORDS(kind, count, dtype, op, root, algo);
    return gw__sig_words(words, sizeof(words) / sizeof(words[0]));
}

uint32_t gw__sig_p2p(size_t count, gw_dtype_t dtype)
{
    const uint64_t words[] = {GW__SIG_P2P_KIND, (uint64_t)count, (uint64_t)dtype};
    return gw__sig_words(words, sizeof(words) / sizeof(words[0]));
}

uint32_t gw__comm_sig_p2p(gw_comm_t *comm, size_t count, gw_dtype_t dtype)
{
    gw_sig_memo_t *m = &comm->sig_memo;
    if (!m->p2p_valid || m->p2p_count != count || m->p2p_dtype != dtype) {
        m->p2p_sig = gw__sig_p2p(count, dtype);
        m->p2p_count = count;
        m->p2p_dtype = dtype;
        m->p2p_valid = 1;
    }
    return m->p2p_sig;
}

static void stamp(gw_comm_t *comm, uint64_t seq, uint32_t sig)
{
    comm->tag.seq = seq;
    comm->tag.sig = sig;
    comm->tag.comm_id = comm->id; /* keeps sub-communicators apart (comm_split.c) */
}

void gw__tag_collective(gw_comm_t *comm, uint32_t sig)
{
    comm->seq++;
    stamp(comm, comm->seq, sig);
}

void gw__coll_begin(gw_comm_t *comm, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                    gw_op_t op, int root, gw_algo_t algo)
{
    gw_sig_memo_t *m = &comm->sig_memo;
    const uint64_t words[] = COLL_WORDS(kind, count, dtype, op, root, algo);
    _Static_assert(sizeof(words) == sizeof(m->coll_words), "the memo holds a collective's words");
    if (!m->coll_valid || memcmp(words, m->coll_words, sizeof(words)) != 0) {
        m->coll_sig = gw__sig_words(words, sizeof(words) / sizeof(words[0]));
        memcpy(m->coll_words, words, sizeof(words));
        m->coll_valid = 1;
    }
    gw__tag_collective(comm, m->coll_sig);
}

void gw__tag_p2p(gw_comm_t *comm, uint32_t sig) { stamp(comm, comm->seq + 1, sig); }

void gw__tag_clear(gw_comm_t *comm) { memset(&comm->tag, 0, sizeof(comm->tag)); }
