/*
 * How the tensor split's walk uses strategies (lib/plan/strategy.h): the
 * one a plan file forces on a node, found and read as a mode of a
 * product's cut, and the strategies of the products the split chose to
 * cut, written and recorded for the plan file.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/shard_build.h"

void sn_shard_strategy_text(const bld *b, char *buf, size_t cap,
                          const size_t *ra, int sa, size_t rb, int sb)
{
    /* ra: ranks of the two operands; sa, sb: split axis of each (-1). */
    sn_strategy s = {.ntuples = rb ? 2 : 1};
    s.len[0] = ra[0];
    s.len[1] = rb;
    for (size_t i = 0; i < ra[0]; i++)
        s.v[0][i] = (int)i == sa ? (unsigned)b->n : 1;
    for (size_t i = 0; i < rb; i++)
        s.v[1][i] = (int)i == sb ? (unsigned)b->n : 1;
    sn_strategy_format(&s, buf, cap);
}

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

/*
 * Read a forced strategy for an operand pair of ranks ra (data) and rb
 * (weight): which mode and, for M_DATA, which axis of the data.
 */
shardnet_status sn_shard_strategy_mode(const bld *b, const sn_node *n,
                                     const sn_strategy *s, int ra, int rb,
                                     int k_axis_w, int n_axis_w, int *mode,
                                     int *axis)
{
    int sa = -1, sw = -1, bad = s->ntuples != 2 || (int)s->len[0] != ra ||
                                (int)s->len[1] != rb;
    for (int i = 0; !bad && i < ra; i++)
        if (s->v[0][i] != 1) {
            bad |= s->v[0][i] != b->n || sa >= 0;
            sa = i;
        }
    for (int i = 0; !bad && i < rb; i++)
        if (s->v[1][i] != 1) {
            bad |= s->v[1][i] != b->n || sw >= 0;
            sw = i;
        }
    if (!bad) {
        int k_axis_a = rule_of(n) == SN_SHARD_CONV ? 1 : ra - 1;
        if (sa < 0 && sw < 0)
            *mode = M_REP;
        else if (sa == k_axis_a && sw == k_axis_w)
            *mode = M_ROW;
        else if (sa < 0 && sw == n_axis_w)
            *mode = M_COL;
        else if (sa >= 0 && sa != k_axis_a && sw < 0) {
            *mode = M_DATA;
            *axis = sa;
        } else
            bad = 1;
    }
    if (bad) {
        char t[256];
        sn_strategy_format(s, t, sizeof t);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "strategy %s for node '%s' (%s): this version cuts "
                        "one dimension over all %zu devices (the inputs' "
                        "reduced dimension together, the weight's output "
                        "dimension, or a dimension of the data alone)",
                        t, n->name, n->op_type, b->n);
    }
    return SHARDNET_OK;
}
