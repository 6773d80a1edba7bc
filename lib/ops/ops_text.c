/*
 * Text features: TfIdfVectorizer.  Its input holds token ids, integers,
 * which a plan knows on the host (integer inputs are bound by value), so
 * it is counted there and its float output is a host value like any
 * folded tensor.  A vectoriser over strings (pool_strings) is refused:
 * shardnet has no string tensors.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* The n-gram pool, as the node's attributes give it. */
typedef struct tfidf {
    const sn_attr *pool;     /* pool_int64s */
    const sn_attr *counts;   /* ngram_counts: first pool index of each n */
    const sn_attr *indexes;  /* ngram_indexes: output slot of each n-gram */
    const sn_attr *weights;  /* or NULL: 1 each */
    size_t ngrams;           /* n-grams in the pool (of every length) */
    int64_t min_n, max_n, max_skip, out_len;
    int mode; /* 0 TF, 1 IDF, 2 TFIDF */
} tfidf;

static const sn_attr *ints_attr(const sn_node *n, const char *name)
{
    const sn_attr *a = sn_node_attr(n, name);
    return a && a->type == SN_ATTR_INTS ? a : NULL;
}

static shardnet_status tfidf_read(const sn_node *n, tfidf *t)
{
    const char *mode = sn_attr_string(n, "mode", "");
    memset(t, 0, sizeof *t);
    t->pool = ints_attr(n, "pool_int64s");
    t->counts = ints_attr(n, "ngram_counts");
    t->indexes = ints_attr(n, "ngram_indexes");
    t->weights = sn_node_attr(n, "weights");
    t->min_n = sn_attr_int(n, "min_gram_length", 0);
    t->max_n = sn_attr_int(n, "max_gram_length", 0);
    t->max_skip = sn_attr_int(n, "max_skip_count", 0);
    t->mode = !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1
              : !strcmp(mode, "TFIDF") ? 2 : -1;
    if (sn_node_attr(n, "pool_strings"))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a vectoriser of strings (pool_strings): "
                             "string tensors are not supported");
    if (!t->pool || !t->counts || !t->indexes || t->mode < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs pool_int64s, ngram_counts, "
                             "ngram_indexes and a mode of TF, IDF or TFIDF");
    if (t->min_n < 1 || t->max_n < t->min_n ||
        t->max_n > (int64_t)t->counts->count || t->max_skip < 0 ||
        t->max_skip > 1 << 20)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "gram lengths %lld to %lld with %zu "
                             "ngram_counts, skips %lld: inconsistent",
                             (long long)t->min_n, (long long)t->max_n,
                             t->counts->count, (long long)t->max_skip);
    for (size_t i = 0; i < t->counts->count; i++) {
        int64_t at = t->counts->ints[i];
        int64_t end = i + 1 < t->counts->count ? t->counts->ints[i + 1]
                                               : (int64_t)t->pool->count;
        if (at < 0 || end < at || end > (int64_t)t->pool->count ||
            (end - at) % (int64_t)(i + 1))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "ngram_counts[%zu] = %lld does not start "
                                 "a run of %zu-grams in the pool",
                                 i, (long long)at, i + 1);
        t->ngrams += (size_t)(end - at) / (i + 1);
    }
    if (t->indexes->count != t->ngrams)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu ngram_indexes for the pool's %zu n-grams",
                             t->indexes->count, t->ngrams);
    if (t->weights && (t->weights->type != SN_ATTR_FLOATS ||
                       t->weights->count != t->ngrams))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "weights must be one float per pool n-gram");
    for (size_t i = 0; i < t->indexes->count; i++) {
        int64_t o = t->indexes->ints[i];
        if (o < 0 || o >= SN_MAX_ELEMENTS)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "ngram_indexes[%zu] = %lld is out of range",
                                 i, (long long)o);
        if (o + 1 > t->out_len)
            t->out_len = o + 1;
    }
    return SHARDNET_OK;
}

/* Count the n-grams of one row (len tokens) of x into y (out_len slots):
 * for each length and skip, every start; a unigram is counted once, not
 * once per skip. */
static void tfidf_row(const tfidf *t, const sn_rt *x, size_t from,
                      size_t len, float *y)
{
    size_t first = 0; /* ordinal of the first g-gram of the pool */
    for (int64_t g = 1; g <= t->max_n; g++) {
        int64_t at = t->counts->ints[g - 1];
        int64_t end = g < (int64_t)t->counts->count ? t->counts->ints[g]
                                                    : (int64_t)t->pool->count;
        size_t base = first;
        first += (size_t)(end - at) / (size_t)g;
        if (g < t->min_n)
            continue;
        for (int64_t skip = 0; skip <= (g == 1 ? 0 : t->max_skip); skip++) {
            size_t step = (size_t)skip + 1, span = (size_t)(g - 1) * step;
            for (size_t s = 0; s + span < len; s++) {
                for (int64_t p = at; p < end; p += g) {
                    int64_t k = 0;
                    while (k < g && sn_rt_get_int(x, from + s + (size_t)k *
                                                             step) ==
                                        t->pool->ints[p + k])
                        k++;
                    if (k == g) {
                        y[t->indexes->ints[base + (size_t)(p - at) / g]] +=
                            1.0f;
                        break;
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < t->ngrams; i++) {
        float *v = &y[t->indexes->ints[i]];
        float w = t->weights ? t->weights->floats[i] : 1.0f;
        if (t->mode == 1)
            *v = *v > 0 ? w : 0;
        else if (t->mode == 2)
            *v *= w;
    }
}

SN_LOWER(sn_lower_tfidf)
{
    sn_rt *x = sn_in(L, n, 0);
    tfidf t;
    shardnet_status st;
    if ((st = tfidf_read(n, &t)) != SHARDNET_OK)
        return st;
    if (x->rank < 1 || x->rank > 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d: it must be [C] or [N, C]",
                             x->rank);
    if (!sn_host_known(x) || x->dtype == SN_DT_FLOAT ||
        x->dtype == SN_DT_DOUBLE)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "its token ids must be integers known when the "
                             "model is planned (an integer input or a "
                             "constant)");
    size_t rows = x->rank == 2 ? (size_t)x->dims[0] : 1;
    size_t len = (size_t)x->dims[x->rank - 1];
    size_t count;
    if (__builtin_mul_overflow(rows, (size_t)t.out_len, &count))
        count = SIZE_MAX;
    float *y = sn_host_alloc(count, sizeof(float));
    if (!y)
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY,
                             "an output of %zu x %lld floats", rows,
                             (long long)t.out_len);
    memset(y, 0, count * sizeof(float));
    for (size_t r = 0; r < rows; r++)
        tfidf_row(&t, x, r * len, len, y + r * (size_t)t.out_len);
    int64_t dims[2] = {(int64_t)rows, t.out_len};
    return x->rank == 2 ? sn_out_host(L, n, 0, SN_DT_FLOAT, 2, dims, y)
                        : sn_out_host(L, n, 0, SN_DT_FLOAT, 1, dims + 1, y);
}
