/*
 * The strategies of the tensor split's walk (lib/plan/strategy.h reads
 * and writes them): the one a plan file forces on a node, found and
 * marked used, and those of the products the split chose to cut, recorded
 * for the plan file.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/shard_build.h"

void sn_shard_record_choice(bld *b, const sn_node *n, const char *text)
{
    if (b->nchosen == b->cap_chosen) {
        size_t cap = b->cap_chosen ? 2 * b->cap_chosen : 16;
        sn_strategy *c = realloc(b->chosen, cap * sizeof *c);
        if (!c)
            return;
        b->chosen = c;
        b->cap_chosen = cap;
    }
    sn_strategy *s = &b->chosen[b->nchosen];
    if (sn_strategy_parse(text, s) != SHARDNET_OK) {
        sn_error_clear();
        return;
    }
    snprintf(s->node, sizeof s->node, "%s", n->name);
    b->nchosen++;
}

const sn_strategy *sn_shard_find_strategy(bld *b, const sn_node *n)
{
    for (size_t i = 0; i < b->nstrat; i++)
        if (!strcmp(b->strat[i].node, n->name)) {
            b->strat_used[i] = 1;
            return &b->strat[i];
        }
    return NULL;
}
