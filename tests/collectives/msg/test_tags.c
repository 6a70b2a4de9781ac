/*
 * test_tags.c - the one home of tags and signatures (collectives/msg/tag.c):
 * the signature values are part of the wire format, so they are pinned here
 * to the values the code gave before they moved, and the stamping rules
 * (a collective advances the sequence, a point-to-point message borrows the
 * next one, a waiting rank carries the empty tag) are checked on a bare
 * communicator.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "collectives/comm/comm.h"
#include "collectives/msg/tag.h"

Test(tags, signatures_keep_their_wire_values)
{
    cr_assert_eq(gw__sig_coll(GW_COLL_ALLREDUCE, 1024, GW_FLOAT32, GW_SUM, 0, GW_ALGO_RING),
                 0x4083cdf9u);
    cr_assert_eq(gw__sig_coll(GW_COLL_BROADCAST, 7, GW_BFLOAT16, GW_SUM, 5, GW_ALGO_TREE),
                 0xb344d9a4u);
    cr_assert_eq(gw__sig_p2p(3, GW_INT8), 0x459e6a80u);
    /* Both are FNV-1a over their words, the hash the compressed calls use. */
    const uint64_t words[] = {GW_COLL_ALLREDUCE, 1024, GW_FLOAT32, GW_SUM, 0, GW_ALGO_RING};
    cr_assert_eq(gw__sig_words(words, 6), 0x4083cdf9u);
    const uint64_t p2p[] = {GW__SIG_P2P_KIND, 3, GW_INT8};
    cr_assert_eq(gw__sig_words(p2p, 3), 0x459e6a80u);
}

Test(tags, every_argument_changes_the_signature)
{
    uint32_t base = gw__sig_coll(GW_COLL_REDUCE, 100, GW_FLOAT32, GW_SUM, 1, GW_ALGO_TREE);
    cr_assert_neq(base, gw__sig_coll(GW_COLL_ALLREDUCE, 100, GW_FLOAT32, GW_SUM, 1, GW_ALGO_TREE));
    cr_assert_neq(base, gw__sig_coll(GW_COLL_REDUCE, 101, GW_FLOAT32, GW_SUM, 1, GW_ALGO_TREE));
    cr_assert_neq(base, gw__sig_coll(GW_COLL_REDUCE, 100, GW_FLOAT64, GW_SUM, 1, GW_ALGO_TREE));
    cr_assert_neq(base, gw__sig_coll(GW_COLL_REDUCE, 100, GW_FLOAT32, GW_MAX, 1, GW_ALGO_TREE));
    cr_assert_neq(base, gw__sig_coll(GW_COLL_REDUCE, 100, GW_FLOAT32, GW_SUM, 2, GW_ALGO_TREE));
    cr_assert_neq(base, gw__sig_coll(GW_COLL_REDUCE, 100, GW_FLOAT32, GW_SUM, 1, GW_ALGO_RING));
    cr_assert_neq(gw__sig_p2p(100, GW_FLOAT32), gw__sig_p2p(100, GW_INT32));
}

Test(tags, stamping_rules)
{
    gw_comm_t comm;
    memset(&comm, 0, sizeof(comm));
    comm.seq = 41;
    gw__tag_p2p(&comm, 7);
    cr_assert(comm.seq == 41 && comm.tag.seq == 42 && comm.tag.sig == 7,
              "a message borrows the next collective's number without taking it");
    gw__coll_begin(&comm, GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0, GW_ALGO_AUTO);
    cr_assert(comm.seq == 42 && comm.tag.seq == 42, "a collective takes the next number");
    cr_assert_eq(comm.tag.sig, gw__sig_coll(GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0, GW_ALGO_AUTO));
    cr_assert_eq(comm.tag.comm_id, 0, "a root communicator's id is 0");
    gw__tag_collective(&comm, 9);
    cr_assert(comm.seq == 43 && comm.tag.seq == 43 && comm.tag.sig == 9);
    comm.id = 0xabcd1234u;
    gw__tag_collective(&comm, 9);
    cr_assert_eq(comm.tag.comm_id, 0xabcd1234u, "a sub-communicator's id is in every tag");
    gw__tag_p2p(&comm, 7);
    cr_assert_eq(comm.tag.comm_id, 0xabcd1234u);
    comm.seq = 43;
    gw__tag_clear(&comm);
    cr_assert(comm.seq == 43 && comm.tag.seq == 0 && comm.tag.sig == 0,
              "the empty tag, and the sequence kept");
}

Test(tags, communicators_are_unrelated)
{
    /* Sub-communicators' messages share the root's connections: another
     * communicator's sequence numbers say nothing about ours. */
    gw_msg_tag_t current = {.seq = 5, .sig = 0xaa, .comm_id = 7};
    gw_msg_tag_t older_other = {.seq = 2, .sig = 0xbb, .comm_id = 0};
    gw_msg_tag_t same_seq_other = {.seq = 5, .sig = 0xbb, .comm_id = 8};
    gw_msg_tag_t older_same = {.seq = 2, .sig = 0xaa, .comm_id = 7};
    gw_msg_tag_t same_seq_same = {.seq = 5, .sig = 0xbb, .comm_id = 7};
    cr_assert(!gw__tag_conflicts(&older_other, &current));
    cr_assert(!gw__tag_conflicts(&same_seq_other, &current));
    cr_assert(gw__tag_conflicts(&older_same, &current));
    cr_assert(gw__tag_conflicts(&same_seq_same, &current));
    gw_msg_tag_t twin = {.seq = 5, .sig = 0xaa, .comm_id = 9};
    cr_assert(!gw__tag_equal(&twin, &current), "another communicator's message never matches");
    twin.comm_id = 7;
    cr_assert(gw__tag_equal(&twin, &current));
}

/* The memo (gw_sig_memo_t) gives every call FNV-1a's own value: a call
 * that differs from the last in any one word, then the last again. */
Test(tags, memoised_signatures_are_the_computed_ones)
{
    gw_comm_t comm;
    memset(&comm, 0, sizeof(comm));
    typedef struct {
        gw_coll_kind_t kind;
        size_t count;
        gw_dtype_t dtype;
        gw_op_t op;
        int root;
        gw_algo_t algo;
    } call_t;
    const call_t calls[] = {
        {GW_COLL_ALLREDUCE, 4, GW_FLOAT32, GW_SUM, 0, GW_ALGO_AUTO},
        {GW_COLL_ALLREDUCE, 4, GW_FLOAT32, GW_SUM, 0, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 4, GW_FLOAT32, GW_SUM, 0, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 5, GW_FLOAT32, GW_SUM, 0, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 5, GW_FLOAT64, GW_SUM, 0, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 5, GW_FLOAT64, GW_MAX, 0, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 5, GW_FLOAT64, GW_MAX, 3, GW_ALGO_AUTO},
        {GW_COLL_REDUCE, 5, GW_FLOAT64, GW_MAX, 3, GW_ALGO_TREE},
        {GW_COLL_ALLREDUCE, 4, GW_FLOAT32, GW_SUM, 0, GW_ALGO_AUTO},
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        const call_t *c = &calls[i];
        gw__coll_begin(&comm, c->kind, c->count, c->dtype, c->op, c->root, c->algo);
        cr_assert_eq(comm.tag.sig,
                     gw__sig_coll(c->kind, c->count, c->dtype, c->op, c->root, c->algo), "call %zu",
                     i);
    }
    const struct {
        size_t count;
        gw_dtype_t dtype;
    } msgs[] = {{3, GW_INT8}, {3, GW_INT8}, {4, GW_INT8}, {4, GW_FLOAT16}, {3, GW_INT8}};
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
        cr_assert_eq(gw__comm_sig_p2p(&comm, msgs[i].count, msgs[i].dtype),
                     gw__sig_p2p(msgs[i].count, msgs[i].dtype), "message %zu", i);
}
