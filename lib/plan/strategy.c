/*
 * Strategies in MindSpore's notation (see strategy.h): parsed from a plan
 * file's text and written back.
 */
#include <config.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
