/*
 * Strategies in MindSpore's notation (see strategy.h): parsed from a plan
 * file's text and written back, read as the cut they force on a product,
 * and written for the cut a product was given.
 */
#include <config.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "plan/strategy.h"

shardnet_status sn_strategy_parse(const char *text, sn_strategy *out)
{
    const char *p = text;
    out->ntuples = 0;
    memset(out->len, 0, sizeof out->len);
#define SKIP()                                                                \
    while (isspace((unsigned char)*p))                                        \
    p++
    SKIP();
    if (*p++ != '(')
        goto bad;
    for (;;) {
        SKIP();
        if (*p == ')' && out->ntuples) {
            p++;
            break;
        }
        if (*p++ != '(' || out->ntuples == SN_STRATEGY_TUPLES)
            goto bad;
        size_t k = out->ntuples++;
        for (;;) {
            SKIP();
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            if (end == p || v < 1 || v > SN_COLL_MAX ||
                out->len[k] == SN_MAX_DIMS)
                goto bad;
            out->v[k][out->len[k]++] = (unsigned)v;
            p = end;
            SKIP();
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p++ != ')')
                goto bad;
            break;
        }
        SKIP();
        if (*p == ',')
            p++;
    }
    SKIP();
    if (*p)
        goto bad;
    return SHARDNET_OK;
bad:
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "strategy '%s': expected tuples of numbers from 1 to %d "
                    "such as ((1,2),(2,1))",
                    text, SN_COLL_MAX);
#undef SKIP
}

void sn_strategy_format(const sn_strategy *s, char *buf, size_t cap)
{
    size_t len = 0;
#define PUT(...)                                                              \
    do {                                                                      \
        if (len < cap)                                                        \
            len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__);       \
    } while (0)
    if (cap)
        buf[0] = '\0';
    PUT("(");
    for (size_t k = 0; k < s->ntuples; k++) {
        PUT("%s(", k ? "," : "");
        for (size_t i = 0; i < s->len[k]; i++)
            PUT("%s%u", i ? "," : "", s->v[k][i]);
        PUT(")");
    }
    PUT(")");
#undef PUT
}

shardnet_status sn_strategy_cut(const sn_strategy *s, size_t ndev,
                                const sn_product_axes *ax, const char *node,
                                const char *op_type, int *cut, int *axis)
{
    int sa = -1, sw = -1, bad = s->ntuples != 2 ||
                                (int)s->len[0] != ax->ra ||
                                (int)s->len[1] != ax->rb;
    for (int i = 0; !bad && i < ax->ra; i++)
        if (s->v[0][i] != 1) {
            bad |= s->v[0][i] != ndev || sa >= 0;
            sa = i;
        }
    for (int i = 0; !bad && i < ax->rb; i++)
        if (s->v[1][i] != 1) {
            bad |= s->v[1][i] != ndev || sw >= 0;
            sw = i;
        }
    if (!bad) {
        if (sa < 0 && sw < 0)
            *cut = SN_CUT_NONE;
        else if (sa == ax->k_axis_a && sw == ax->k_axis_w)
            *cut = SN_CUT_ROWS;
        else if (sa == ax->k_axis_a && sw == ax->n_axis_w &&
                 !strcmp(op_type, "Conv"))
            *cut = SN_CUT_ROWS; /* a grouped convolution's input and output
                                   channels cut together: each device its
                                   own groups, as the split writes it */
        else if (sa < 0 && sw == ax->n_axis_w)
            *cut = SN_CUT_COLUMNS;
        else if (sa >= 0 && sa != ax->k_axis_a && sw < 0) {
            *cut = SN_CUT_DATA;
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
                        t, node, op_type, ndev);
    }
    return SHARDNET_OK;
}

void sn_strategy_of_cut(size_t ndev, size_t ra, int sa, size_t rb, int sb,
                        char *buf, size_t cap)
{
    sn_strategy s = {.ntuples = rb ? 2 : 1};
    s.len[0] = ra;
    s.len[1] = rb;
    for (size_t i = 0; i < ra; i++)
        s.v[0][i] = (int)i == sa ? (unsigned)ndev : 1;
    for (size_t i = 0; i < rb; i++)
        s.v[1][i] = (int)i == sb ? (unsigned)ndev : 1;
    sn_strategy_format(&s, buf, cap);
}
