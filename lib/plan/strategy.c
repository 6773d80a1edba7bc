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

/* A mixed cut of s (whose tuples have the product's ranks): its data
 * axis and mesh into *out; 0 where s is none (parts not multiplying to
 * ndev, the reduced dimension cut unlike in the two tuples, more than one
 * data axis or a cut of the weight elsewhere, fewer than two cuts). */
static int mixed_cut(const sn_strategy *s, size_t ndev,
                     const sn_product_axes *ax, sn_cut *out)
{
    int axis = -1;
    unsigned p = 1, q = s->v[0][ax->k_axis_a], r = s->v[1][ax->n_axis_w];
    for (int i = 0; i < ax->ra; i++)
        if (i != ax->k_axis_a && s->v[0][i] != 1) {
            if (axis >= 0)
                return 0;
            axis = i;
            p = s->v[0][i];
        }
    for (int i = 0; i < ax->rb; i++)
        if (i != ax->k_axis_w && i != ax->n_axis_w && s->v[1][i] != 1)
            return 0;
    if (s->v[1][ax->k_axis_w] != q || (size_t)p * q * r != ndev ||
        (p > 1) + (q > 1) + (r > 1) < 2)
        return 0;
    *out = (sn_cut){SN_CUT_MIXED, axis, {p, q, r}};
    return 1;
}

shardnet_status sn_strategy_cut(const sn_strategy *s, size_t ndev,
                                const sn_product_axes *ax, int mixed,
                                const char *node, const char *op_type,
                                sn_cut *out)
{
    int sa = -1, sw = -1, two = 0,
        bad = s->ntuples != 2 || (int)s->len[0] != ax->ra ||
              (int)s->len[1] != ax->rb;
    *out = (sn_cut){SN_CUT_NONE, -1, {1, 1, 1}};
    for (int i = 0; !bad && i < ax->ra; i++)
        if (s->v[0][i] != 1) {
            two |= s->v[0][i] != ndev || sa >= 0;
            sa = i;
        }
    for (int i = 0; !bad && i < ax->rb; i++)
        if (s->v[1][i] != 1) {
            two |= s->v[1][i] != ndev || sw >= 0;
            sw = i;
        }
    if (!bad && two) {
        bad = !mixed || !mixed_cut(s, ndev, ax, out);
    } else if (!bad) {
        if (sa < 0 && sw < 0)
            out->kind = SN_CUT_NONE;
        else if (sa == ax->k_axis_a && sw == ax->k_axis_w)
            out->kind = SN_CUT_ROWS;
        else if (sa == ax->k_axis_a && sw == ax->n_axis_w &&
                 !strcmp(op_type, "Conv"))
            out->kind = SN_CUT_ROWS; /* a grouped convolution's input and
                                        output channels cut together: each
                                        device its own groups, as the split
                                        writes it */
        else if (sa < 0 && sw == ax->n_axis_w)
            out->kind = SN_CUT_COLUMNS;
        else if (sa >= 0 && sa != ax->k_axis_a && sw < 0) {
            out->kind = SN_CUT_DATA;
            out->axis = sa;
        } else
            bad = 1;
    }
    if (bad) {
        char t[256];
        sn_strategy_format(s, t, sizeof t);
        return sn_error(
            SHARDNET_INVALID_ARGUMENT,
            "strategy %s for node '%s' (%s): this version cuts one dimension "
            "over all %zu devices (the inputs' reduced dimension together, "
            "the weight's output dimension, or a dimension of the data "
            "alone)%s",
            t, node, op_type, ndev,
            mixed ? ", or, for a product by a 2-D weight, two or three of "
                    "those at once (one dimension of the data, the reduced "
                    "dimension alike in both, the weight's output "
                    "dimension) into parts whose product is the device "
                    "count, such as ((2,1),(1,2)) over 4"
                  : "");
    }
    return SHARDNET_OK;
}

size_t sn_strategy_meshes(size_t ndev, unsigned (*mesh)[3], size_t max)
{
    size_t n = 0;
    for (unsigned p = 1; p <= ndev; p++)
        for (unsigned q = 1; p * q <= ndev; q++) {
            if (ndev % (p * q))
                continue;
            unsigned r = (unsigned)(ndev / (p * q));
            if ((p > 1) + (q > 1) + (r > 1) < 2)
                continue;
            if (n < max) {
                mesh[n][0] = p;
                mesh[n][1] = q;
                mesh[n][2] = r;
            }
            n++;
        }
    return n;
}

void sn_strategy_of_mixed(const sn_product_axes *ax, int axis,
                          const unsigned parts[3], char *buf, size_t cap)
{
    sn_strategy s = {.ntuples = 2};
    s.len[0] = (size_t)ax->ra;
    s.len[1] = (size_t)ax->rb;
    for (int i = 0; i < ax->ra; i++)
        s.v[0][i] = i == axis ? parts[0] : i == ax->k_axis_a ? parts[1] : 1;
    for (int i = 0; i < ax->rb; i++)
        s.v[1][i] = i == ax->k_axis_w   ? parts[1]
                    : i == ax->n_axis_w ? parts[2]
                                        : 1;
    sn_strategy_format(&s, buf, cap);
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
