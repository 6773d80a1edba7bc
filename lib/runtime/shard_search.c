/*
 * The tensor split's strategy search: the rule-based layout (first
 * product column-parallel, next row-parallel, ...) is a start, not the
 * answer.  Every product by a constant weight (MatMul, Gemm, Conv) has
 * four candidate strategies over n devices, in MindSpore's notation:
 * columns (the weight's output dimension cut), rows (the reduced
 * dimension of both: partial sums), data (the data's first dimension,
 * the weight whole) and whole (replicated); a MatMul or Gemm has, where
 * the device count is no prime, MindSpore's mixed forms too: two or three
 * of the data's first dimension, the reduced dimension and the weight's
 * output dimension cut at once, the devices a mesh (over four: 2x1x2,
 * 2x2x1 and 1x2x2; shard_products.c's mixed()).  The search changes one
 * product's strategy at a time, builds the split it gives (the
 * redistributions between neighbours, the collectives, each device's
 * shard) and keeps it where the cost model (lib/plan/tensor_costs.h)
 * prices it lower and it fits every device's memory, until a pass over
 * the products changes nothing (coordinate descent from the rules'
 * layout, so the answer is never priced above it).  A strategy a plan
 * file fixes stays fixed, and its neighbours are searched around it.
 * Every candidate is a whole split built on the devices (plans, weights
 * uploaded), so a model with more weight than SEARCH_MAX_BYTES keeps
 * the rules' layout; SHARDNET_TENSOR_RULES=1 keeps it too.  The same
 * search lays out the tensor split of a session (lib/api/split.c) and
 * each group stage of a hybrid split (pipeline_run.c).  The report says,
 * per product, what each strategy was priced at: why it has the one it
 * has.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "plan/node_costs.h"
#include "runtime/tensor_split.h"

#define SEARCH_MAX_BYTES ((double)256e6)
#define SEARCH_PASSES 2
/* A candidate replaces the best only when it is priced this much lower
 * (the estimates' noise is not a reason to move). */
#define SEARCH_GAIN 0.98

/* A product the search may cut: its data's rank and reduced axis, its
 * weight's rank, reduced and output axes; whether it may be cut on a mesh
 * (a product by a 2-D weight: MatMul, Gemm). */
typedef struct product {
    const sn_node *n;
    sn_product_axes ax;
    int mixed;
} product;

/* The candidates per product: the four plain cuts, then the mixed cuts,
 * one per mesh of the devices (sn_strategy_meshes; 3 over four devices),
 * the data's first axis cut where the mesh cuts data. */
#define PLAIN 4
#define MESHES 12
#define CANDIDATES (PLAIN + MESHES)

static int product_of(const sn_graph *g, const sn_plan *shapes,
                      const sn_node *n, product *out)
{
    if (n->dead || n->ninputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
        !(g->values[n->inputs[1]].flags & SN_VALUE_CONST) || !*n->name)
        return 0;
    const sn_rt *a = sn_plan_value(shapes, (size_t)n->inputs[0]),
                *b = sn_plan_value(shapes, (size_t)n->inputs[1]);
    if (!a || !b || !a->known || !b->known)
        return 0;
    int ra = a->rank, rb = b->rank;
    out->n = n;
    out->mixed = strcmp(n->op_type, "Conv") != 0;
    if (!strcmp(n->op_type, "MatMul") && ra >= 2 && rb == 2)
        out->ax = (sn_product_axes){ra, ra - 1, rb, 0, 1};
    else if (!strcmp(n->op_type, "Gemm") && ra == 2 && rb == 2 &&
             !sn_attr_int(n, "transA", 0))
        out->ax = sn_attr_int(n, "transB", 0)
                      ? (sn_product_axes){2, 1, 2, 1, 0}
                      : (sn_product_axes){2, 1, 2, 0, 1};
    else if (!strcmp(n->op_type, "Conv") && ra >= 3 && rb == ra)
        out->ax = (sn_product_axes){ra, 1, rb, 1, 0};
    else
        return 0;
    return 1;
}

/* Strategy k (0 columns, 1 rows, 2 data, 3 whole, PLAIN + m the mixed cut
 * on mesh[m] of nmesh) of product p over ndev devices; 0 where p has no
 * such candidate. */
static int candidate(const product *p, size_t ndev, int k,
                     const unsigned (*mesh)[3], size_t nmesh, sn_strategy *s)
{
    int sa = k == 1 ? p->ax.k_axis_a : k == 2 ? 0 : -1,
        sb = k == 0 ? p->ax.n_axis_w : k == 1 ? p->ax.k_axis_w : -1;
    char text[128];
    if (k >= PLAIN && (!p->mixed || (size_t)(k - PLAIN) >= nmesh))
        return 0;
    if (k >= PLAIN)
        sn_strategy_of_mixed(&p->ax, mesh[k - PLAIN][0] > 1 ? 0 : -1,
                             mesh[k - PLAIN], text, sizeof text);
    else
        sn_strategy_of_cut(ndev, (size_t)p->ax.ra, sa, (size_t)p->ax.rb, sb,
                           text, sizeof text);
    if (sn_strategy_parse(text, s) != SHARDNET_OK) {
        sn_error_clear();
        return 0;
    }
    snprintf(s->node, sizeof s->node, "%s", p->n->name);
    return 1;
}

static int same(const sn_strategy *a, const sn_strategy *b)
{
    if (a->ntuples != b->ntuples)
        return 0;
    for (size_t t = 0; t < a->ntuples; t++)
        if (a->len[t] != b->len[t] ||
            memcmp(a->v[t], b->v[t], a->len[t] * sizeof a->v[t][0]))
            return 0;
    return 1;
}

/* The split's price: its estimate, or huge when it does not fit. */
static double price(const sn_tensor_split *ts)
{
    return sn_tensor_split_overflow(ts) ? 1e300
                                        : sn_tensor_split_estimate(ts);
}

static double weight_bytes(const sn_graph *g)
{
    double b = 0;
    for (size_t v = 0; v < g->nvalues; v++)
        if (g->values[v].flags & SN_VALUE_CONST)
            b += (double)g->values[v].nbytes;
    return b;
}

static const char *const strategy_name[PLAIN] = {"columns", "rows", "data",
                                                 "whole"};

/* Price of a candidate not built (a cut these shapes do not allow). */
#define NOT_BUILT (-1.0)

/* One product's line of the report: every strategy's price (a mixed
 * cut named by its mesh: data x reduced x columns), the pick marked. */
static size_t explain(const product *p, int pick, const double *prices,
                      const unsigned (*mesh)[3], size_t nmesh, char *report,
                      size_t cap, size_t len)
{
#define SAY(...)                                                              \
    do {                                                                      \
        if (len < cap)                                                        \
            len += (size_t)snprintf(report + len, cap - len, __VA_ARGS__);    \
    } while (0)
    SAY("  %s (%s):", p->n->name, p->n->op_type);
    for (int k = 0; k < PLAIN + (p->mixed ? (int)nmesh : 0); k++) {
        if (k < PLAIN)
            SAY("%s %s ", k ? ";" : "", strategy_name[k]);
        else
            SAY("; mixed %ux%ux%u ", mesh[k - PLAIN][0], mesh[k - PLAIN][1],
                mesh[k - PLAIN][2]);
        if (prices[k] == NOT_BUILT)
            SAY("not possible");
        else if (prices[k] >= 1e300)
            SAY("does not fit");
        else
            SAY("%.3f ms", prices[k] * 1e3);
        if (k == pick)
            SAY(" (chosen)");
    }
    SAY("\n");
#undef SAY
    return len;
}

size_t sn_tensor_split_search_room(const sn_graph *g)
{
    return 512 + (256 + 32 * MESHES) * g->nnodes;
}

shardnet_status sn_tensor_split_search(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       const sn_binding *inputs,
                                       const sn_strategy *fixed, size_t nfixed,
                                       sn_device *home, sn_tensor_split **out,
                                       char *report, size_t cap)
{
    size_t n = ndev, np = 0, built = 0, len = 0;
    sn_tensor_split *best = NULL;
    shardnet_status st;
    int converged = 0;
    unsigned mesh[MESHES][3];
    size_t nmesh = sn_strategy_meshes(ndev, mesh, MESHES);
    if (nmesh > MESHES)
        nmesh = MESHES;
    *out = NULL;
    if (report && cap)
        report[0] = '\0';
    if ((st = sn_tensor_split_create(g, devs, ndev, speed, inputs, fixed,
                                     nfixed, home, &best)) != SHARDNET_OK)
        return st;
    double rules = price(best), now = rules;
    const sn_config *cfg = sn_config_or_env(devs[0]->config);
    product *ps = calloc(g->nnodes + 1, sizeof *ps);
    /* The strategies tried: the fixed ones, then one per product. */
    sn_strategy *try = calloc(nfixed + g->nnodes + 1, sizeof *try);
    int *pick = calloc(g->nnodes + 1, sizeof *pick);
    /* [product * CANDIDATES + strategy]: its last price, NOT_BUILT, or
     * 1e300 where it does not fit. */
    double *priced =
        malloc((g->nnodes + 1) * CANDIDATES * sizeof *priced);
    if (!ps || !try || !pick || !priced) {
        free(ps);
        free(try);
        free(pick);
        free(priced);
        *out = best;
        return SHARDNET_OK; /* the rules' layout: no room to search */
    }
    /* The products, their ranks from a plan of the shapes. */
    sn_weights *sw = NULL;
    sn_plan *shapes = NULL;
    if (sn_shape_plan(g, inputs, &sw, &shapes) == SHARDNET_OK)
        for (size_t i = 0; i < g->nnodes; i++) {
            int is_fixed = 0;
            for (size_t f = 0; f < nfixed; f++)
                is_fixed |= !strcmp(fixed[f].node, g->nodes[i].name);
            if (!is_fixed && product_of(g, shapes, &g->nodes[i], &ps[np]))
                np++;
        }
    sn_error_clear();
    sn_shape_plan_free(sw, shapes);
    int search = !cfg->tensor_rules && np && n > 1 &&
                 weight_bytes(g) <= SEARCH_MAX_BYTES;
    /* Where the rules put each product: what the split says it chose
     * (columns, rows, data), else whole. */
    const sn_strategy *chosen;
    size_t nchosen = sn_tensor_split_strategies(best, &chosen);
    for (size_t p = 0; p < np; p++) {
        sn_strategy s;
        pick[p] = 3;
        for (size_t c = 0; c < nchosen; c++)
            if (!strcmp(chosen[c].node, ps[p].n->name))
                for (int k = 0; k < 3; k++)
                    if (candidate(&ps[p], n, k, mesh, nmesh, &s) &&
                        same(&s, &chosen[c]))
                        pick[p] = k;
        for (int k = 0; k < CANDIDATES; k++)
            priced[p * CANDIDATES + (size_t)k] =
                k == pick[p] ? rules : NOT_BUILT;
    }
    if (nfixed)
        memcpy(try, fixed, nfixed * sizeof *fixed);
    for (int pass = 0, moved = 1; search && moved && pass < SEARCH_PASSES;
         pass++) {
        moved = 0;
        for (size_t p = 0; p < np; p++)
            for (int k = 0; k < CANDIDATES; k++) {
                sn_strategy scratch;
                if (k == pick[p] || (k >= PLAIN && !candidate(&ps[p], n, k,
                                                             mesh, nmesh,
                                                             &scratch)))
                    continue;
                /* Every product at its pick, p at k. */
                size_t m = nfixed;
                int ok = 1;
                for (size_t q = 0; q < np && ok; q++)
                    ok = candidate(&ps[q], n, q == p ? k : pick[q], mesh,
                                   nmesh, &try[m++]);
                sn_tensor_split *ts = NULL;
                priced[p * CANDIDATES + (size_t)k] = NOT_BUILT;
                if (!ok)
                    continue;
                built++;
                if (sn_tensor_split_create(g, devs, ndev, speed, inputs, try,
                                           m, home, &ts) != SHARDNET_OK) {
                    sn_error_clear(); /* a cut these shapes do not allow */
                    continue;
                }
                double t = price(ts);
                priced[p * CANDIDATES + (size_t)k] = t;
                if (t < now * SEARCH_GAIN) {
                    sn_tensor_split_free(best);
                    best = ts;
                    now = t;
                    pick[p] = k;
                    moved = 1;
                } else {
                    sn_tensor_split_free(ts);
                }
            }
        converged = !moved;
    }
    /* Every product's pick is priced at the layout found. */
    for (size_t p = 0; p < np; p++)
        priced[p * CANDIDATES + (size_t)pick[p]] = now;
    if (report && cap) {
        if (!search)
            len += (size_t)snprintf(
                report, cap, "tensor strategies: the rules' layout (%s)\n",
                cfg->tensor_rules ? "SHARDNET_TENSOR_RULES=1"
                : !np || n < 2    ? "no product to search"
                                  : "weights over 256 MB: each candidate "
                                    "is a whole split");
        else
            len += (size_t)snprintf(
                report, cap,
                "tensor strategies searched: %zu products, %zu candidates "
                "built; the rules' layout estimated %.3f ms, the search's "
                "%.3f ms (%s); each product's strategies priced, the others "
                "as they were when it was tried:\n",
                np, built, rules >= 1e300 ? -1.0 : rules * 1e3,
                now >= 1e300 ? -1.0 : now * 1e3,
                converged ? "a last pass changed nothing"
                          : "stopped after the passes allowed");
        for (size_t p = 0; search && p < np; p++)
            len = explain(&ps[p], pick[p], &priced[p * CANDIDATES], mesh,
                          nmesh, report, cap, len);
    }
    free(ps);
    free(try);
    free(pick);
    free(priced);
    *out = best;
    return SHARDNET_OK;
}
