/*
 * binomial_tree.c - the binomial tree that the broadcast (broadcast_tree.c)
 * and the reduce (reduce_tree.c) run over, described in coll.h.
 *
 * With ranks numbered from the root in the tree order of coll.h (the root,
 * its host, then the other hosts: gw__tree_index), clearing the lowest set
 * bit of v walks up towards the root, so every rank's parent is closer to it
 * and the tree has depth ceil(log2 n). The broadcast serves its children
 * largest subtree first (the data has the farthest to go there); the reduce
 * folds them smallest first, which is increasing relative rank: its fixed
 * reduction order.
 */
#include "collectives/coll.h"

int gw__binomial_node(int n, int v, int largest_first, int kids[GW__BINOMIAL_MAX_KIDS], int *parent)
{
    int limit = 1; /* children are v + m for m < the lowest set bit of v */
    *parent = -1;
    if (v > 0) {
        *parent = v & (v - 1);
        limit = v & -v;
    } else {
        while (limit < n)
            limit <<= 1;
    }
    int nkids = 0;
    for (int m = 1; m < limit && v + m < n; m <<= 1)
        kids[nkids++] = v + m;
    for (int i = 0; largest_first && i < nkids / 2; i++) {
        int t = kids[i];
        kids[i] = kids[nkids - 1 - i];
        kids[nkids - 1 - i] = t;
    }
    return nkids;
}
