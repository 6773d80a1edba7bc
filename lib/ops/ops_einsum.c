/*
 * Einsum (opset 12 on): any equation of letters and one ellipsis per
 * operand, explicit ("bij,bjk->bik") or implicit ("ij,jk": the letters
 * seen once, in ASCII order, after the ellipsis axes), over any number
 * of float operands.
 *
 * Each operand is a strided view of its labels (a repeated label, a
 * diagonal, adds its strides; an axis of 1 broadcasts with stride 0).
 * Operands are contracted left to right, two at a time, as one batched
 * GEMM: the labels both keep (needed by the output or a later operand)
 * are the batch, those only one keeps its free rows or columns, and every
 * label no one keeps is summed by the product (the operand that lacks it
 * repeats along it).  Each side is laid out for the GEMM by a strided
 * copy, skipped when it already is.  What is left is copied into the
 * output's order, the labels it lacks summed by a reduce step.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define NLETTERS 52               /* a-z, A-Z */
#define NLABELS (NLETTERS + SN_MAX_DIMS) /* and the ellipsis axes */
#define MAX_EQUATION 512

/* An operand or an intermediate: its labels, as a strided view. */
typedef struct term {
    sn_view v;
    int n;
    int lab[NLABELS];
    int64_t dim[NLABELS], str[NLABELS];
} term;

/* The parsed equation and every label's size. */
typedef struct eq {
    int nops, nell;               /* operands; axes the ellipsis stands for */
    int nout, out[NLABELS];       /* the output's labels */
    int64_t size[NLABELS];        /* -1 until seen */
} eq;

static int letter_label(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + (c - 'A');
    return -1;
}

static int term_find(const term *t, int l)
{
    for (int i = 0; i < t->n; i++)
        if (t->lab[i] == l)
            return i;
    return -1;
}

/* Operand k's labels from its part of the equation (s, len chars) into t,
 * its view vx of dims (rank r); sizes checked against e's. */
static shardnet_status parse_operand(const sn_node *n, const char *s,
                                     size_t len, const sn_rt *x, sn_view vx,
                                     eq *e, term *t)
{
    int letters = 0, ell = -1, pos = 0;
    int64_t str[SN_MAX_DIMS];
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (ell >= 0 || i + 2 >= len || s[i + 1] != '.' ||
                s[i + 2] != '.')
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "bad ellipsis in the equation");
            ell = letters;
            i += 2;
        } else if (letter_label(s[i]) < 0) {
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "'%c' in the equation is not a letter",
                                 s[i]);
        } else {
            letters++;
        }
    }
    if ((ell < 0 && letters != x->rank) || letters > x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "an operand of rank %d has %d labels", x->rank,
                             letters);
    int nell = ell < 0 ? 0 : x->rank - letters;
    if (nell > e->nell)
        e->nell = nell; /* (checked against the other operands later) */
    sn_strides(x->rank, x->dims, str);
    t->v = vx;
    t->n = 0;
    for (size_t i = 0; i < len; i++) {
        int ls[SN_MAX_DIMS], cnt = 1;
        if (s[i] == '.') {
            /* the ellipsis axes, right-aligned: the last is label
             * NLETTERS + SN_MAX_DIMS - 1 */
            for (int j = 0; j < nell; j++)
                ls[j] = NLABELS - nell + j;
            cnt = nell;
            i += 2;
        } else {
            ls[0] = letter_label(s[i]);
        }
        for (int j = 0; j < cnt; j++, pos++) {
            int l = ls[j], at = term_find(t, l);
            int64_t d = x->dims[pos];
            /* sizes must agree, but for 1s, which broadcast */
            if (e->size[l] < 0 || e->size[l] == 1)
                e->size[l] = d;
            else if (d != 1 && d != e->size[l])
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "label '%c' has sizes %lld and %lld",
                                     l < NLETTERS ? s[i] : '.',
                                     (long long)e->size[l], (long long)d);
            if (at >= 0) { /* repeated: the diagonal */
                if (t->dim[at] != d)
                    return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                         "a repeated label has sizes %lld "
                                         "and %lld",
                                         (long long)t->dim[at], (long long)d);
                t->str[at] += str[pos];
                continue;
            }
            t->lab[t->n] = l;
            t->dim[t->n] = d;
            t->str[t->n] = str[pos];
            t->n++;
        }
    }
    return SHARDNET_OK;
}

/* The output's labels: after "->" (rhs, len chars), or the implicit
 * ones. */
static shardnet_status parse_output(const sn_node *n, const char *rhs,
                                    size_t len, eq *e, const int *count)
{
    e->nout = 0;
    if (!rhs) {
        for (int j = 0; j < e->nell; j++)
            e->out[e->nout++] = NLABELS - e->nell + j;
        for (int c = 'A'; c <= 'z'; c++) {
            int l = letter_label((char)c);
            if (l >= 0 && count[l] == 1)
                e->out[e->nout++] = l;
        }
        return SHARDNET_OK;
    }
    for (size_t i = 0; i < len; i++) {
        int l = letter_label(rhs[i]);
        if (rhs[i] == '.' && i + 2 < len && rhs[i + 1] == '.' &&
            rhs[i + 2] == '.') {
            for (int j = 0; j < e->nell; j++)
                e->out[e->nout++] = NLABELS - e->nell + j;
            i += 2;
            continue;
        }
        if (l < 0 || !count[l])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "output label '%c' is not an operand's",
                                 rhs[i]);
        for (int j = 0; j < e->nout; j++)
            if (e->out[j] == l)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "output label '%c' repeated", rhs[i]);
        e->out[e->nout++] = l;
    }
    return SHARDNET_OK;
}

/* Is t laid out contiguously with labels ord (no axis broadcast)? */
static int is_laid_out(const term *t, const eq *e, int cnt, const int *ord)
{
    int64_t want = 1;
    if (t->n != cnt)
        return 0;
    for (int i = cnt - 1; i >= 0; i--) {
        if (t->lab[i] != ord[i] || t->dim[i] != e->size[ord[i]])
            return 0;
        if (t->dim[i] != 1 && t->str[i] != want)
            return 0;
        want *= t->dim[i];
    }
    return 1;
}

/* Copy t into dst laid out with labels ord (a label t lacks repeats). */
static shardnet_status emit_layout(sn_lower *L, const sn_node *n,
                                   const term *t, const eq *e, int cnt,
                                   const int *ord, sn_view dst)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t dims[NLABELS] = {0}, str[NLABELS];
    if (cnt > SN_MAX_DIMS)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an intermediate of %d distinct axes (at most "
                             "%d)",
                             cnt, SN_MAX_DIMS);
    for (int i = 0; i < cnt; i++)
        dims[i] = e->size[ord[i]];
    sn_strides(cnt, dims, str);
    s.u.copy.rank = (size_t)cnt;
    s.u.copy.src = t->v;
    s.u.copy.dst = dst;
    for (int i = 0; i < cnt; i++) {
        int at = term_find(t, ord[i]);
        s.u.copy.shape[i] = (size_t)dims[i];
        s.u.copy.dst_stride[i] = (ptrdiff_t)str[i];
        s.u.copy.src_stride[i] =
            at < 0 || t->dim[at] == 1 ? 0 : (ptrdiff_t)t->str[at];
    }
    return sn_emit(L, n, &s);
}

/* t laid out with labels ord: its own view when it already is, else a
 * copy in scratch. */
static shardnet_status laid_out(sn_lower *L, const sn_node *n, const term *t,
                                const eq *e, int cnt, const int *ord,
                                sn_view *v)
{
    size_t count = 1;
    shardnet_status st;
    if (is_laid_out(t, e, cnt, ord)) {
        *v = t->v;
        return SHARDNET_OK;
    }
    for (int i = 0; i < cnt; i++)
        count *= (size_t)e->size[ord[i]];
    if ((st = sn_scratch(L, count ? count : 1, v)) != SHARDNET_OK)
        return st;
    return emit_layout(L, n, t, e, cnt, ord, *v);
}

static int has(const int *ls, int cnt, int l)
{
    for (int i = 0; i < cnt; i++)
        if (ls[i] == l)
            return 1;
    return 0;
}

/* Product of the sizes of labels ls; past SN_MAX_ELEMENTS, a value
 * above it. */
static size_t sizes(const eq *e, const int *ls, int cnt)
{
    size_t p = 1;
    for (int i = 0; i < cnt; i++)
        if (__builtin_mul_overflow(p, (size_t)e->size[ls[i]], &p) ||
            p > (size_t)SN_MAX_ELEMENTS)
            return (size_t)SN_MAX_ELEMENTS + 1;
    return p;
}

/* r = a contracted with b, keeping the labels keep (nkeep); into dst
 * when given (dst.buf set) and the result's labels are the output's. */
static shardnet_status contract(sn_lower *L, const sn_node *n, const eq *e,
                                const term *a, const term *b,
                                const int *keep, int nkeep, sn_view dst,
                                term *r)
{
    int bat[NLABELS], fa[NLABELS], fb[NLABELS], con[NLABELS];
    int nb = 0, nfa = 0, nfb = 0, nc = 0, ao[NLABELS], bo[NLABELS];
    sn_view va, vb, vr;
    sn_step s = {.kind = SN_KERNEL_GEMM};
    int64_t want = 1;
    size_t total;
    shardnet_status st;
    for (int i = 0; i < a->n + b->n; i++) {
        int l = i < a->n ? a->lab[i] : b->lab[i - a->n];
        int ina = term_find(a, l) >= 0, inb = term_find(b, l) >= 0;
        if (i >= a->n && ina)
            continue; /* counted with a */
        if (!has(keep, nkeep, l))
            con[nc++] = l;
        else if (ina && inb)
            bat[nb++] = l;
        else if (ina)
            fa[nfa++] = l;
        else
            fb[nfb++] = l;
    }
    memcpy(ao, bat, (size_t)nb * sizeof *ao);
    memcpy(ao + nb, fa, (size_t)nfa * sizeof *ao);
    memcpy(ao + nb + nfa, con, (size_t)nc * sizeof *ao);
    memcpy(bo, bat, (size_t)nb * sizeof *bo);
    memcpy(bo + nb, con, (size_t)nc * sizeof *bo);
    memcpy(bo + nb + nc, fb, (size_t)nfb * sizeof *bo);
    size_t bt = sizes(e, bat, nb), m = sizes(e, fa, nfa);
    size_t k = sizes(e, con, nc), nn = sizes(e, fb, nfb);
    r->n = nb + nfa + nfb;
    memcpy(r->lab, ao, (size_t)(nb + nfa) * sizeof *ao);
    memcpy(r->lab + nb + nfa, fb, (size_t)nfb * sizeof *fb);
    if (sizes(e, ao, nb + nfa + nc) > (size_t)SN_MAX_ELEMENTS ||
        sizes(e, bo, nb + nc + nfb) > (size_t)SN_MAX_ELEMENTS ||
        sizes(e, r->lab, r->n) > (size_t)SN_MAX_ELEMENTS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "an intermediate would be too large");
    total = bt * m * nn;
    if (k == 0 && total != 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a sum over an empty axis");
    if ((st = laid_out(L, n, a, e, nb + nfa + nc, ao, &va)) ||
        (st = laid_out(L, n, b, e, nb + nc + nfb, bo, &vb)))
        return st;
    if (dst.buf && r->n == e->nout &&
        !memcmp(r->lab, e->out, (size_t)r->n * sizeof *r->lab))
        vr = dst;
    else if ((st = sn_scratch(L, total ? total : 1, &vr)))
        return st;
    r->v = vr;
    for (int i = r->n - 1; i >= 0; i--) {
        r->dim[i] = e->size[r->lab[i]];
        r->str[i] = want;
        want *= r->dim[i];
    }
    if (total == 0)
        return SHARDNET_OK;
    s.u.gemm = (sn_gemm_desc){.m = m, .n = nn, .k = k, .alpha = 1.0f,
                              .a = va, .b = vb, .c = vr, .lda = k, .ldb = nn,
                              .ldc = nn, .batch = bt, .stride_a = m * k,
                              .stride_b = k * nn, .stride_c = m * nn};
    return sn_emit(L, n, &s);
}

/* The output from the last term: copied into the output's order, the
 * labels it lacks summed. */
static shardnet_status finish(sn_lower *L, const sn_node *n, const eq *e,
                              const term *t, sn_view out)
{
    int ord[NLABELS], cnt = e->nout, nsum = 0;
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    sn_view v;
    shardnet_status st;
    if (t->v.buf == out.buf && t->v.offset == out.offset)
        return SHARDNET_OK; /* the product landed there */
    memcpy(ord, e->out, (size_t)cnt * sizeof *ord);
    for (int i = 0; i < t->n; i++)
        if (!has(e->out, e->nout, t->lab[i]))
            ord[cnt + nsum++] = t->lab[i];
    if (!nsum)
        return emit_layout(L, n, t, e, cnt, ord, out);
    if ((st = laid_out(L, n, t, e, cnt + nsum, ord, &v)) != SHARDNET_OK)
        return st;
    s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_SUM,
                                  .outer = sizes(e, ord, cnt),
                                  .len = sizes(e, ord + cnt, nsum),
                                  .inner = 1, .x = v, .y = out};
    return sn_emit(L, n, &s);
}

/* The equation split into operands and output, spaces dropped, each
 * operand parsed. */
static shardnet_status parse(sn_lower *L, const sn_node *n, eq *e, term *t)
{
    const char *src = sn_attr_string(n, "equation", NULL);
    char buf[MAX_EQUATION], *rhs, *p;
    size_t len = 0;
    int count[NLABELS] = {0};
    shardnet_status st;
    if (!src)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "no equation");
    for (; *src; src++) {
        if (*src == ' ')
            continue;
        if (len + 1 >= sizeof buf)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "an equation longer than %d characters",
                                 MAX_EQUATION - 1);
        buf[len++] = *src;
    }
    buf[len] = '\0';
    if ((rhs = strstr(buf, "->")) != NULL) {
        *rhs = '\0';
        rhs += 2;
    }
    p = buf;
    e->nops = 0;
    for (;;) {
        char *end = strchr(p, ',');
        size_t plen = end ? (size_t)(end - p) : strlen(p);
        sn_rt *x = sn_in(L, n, (size_t)e->nops);
        sn_view vx;
        if (e->nops >= (int)n->ninputs || !x)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the equation has more operands than the "
                                 "node's %zu inputs",
                                 n->ninputs);
        if ((st = sn_dev_view(L, n, x, &vx)) ||
            (st = parse_operand(n, p, plen, x, vx, e, &t[e->nops])))
            return st;
        for (int i = 0; i < t[e->nops].n; i++)
            count[t[e->nops].lab[i]] += 1;
        for (size_t i = 0; i < plen; i++) /* a letter repeated counts twice */
            if (letter_label(p[i]) >= 0 &&
                memchr(p, p[i], i) != NULL)
                count[letter_label(p[i])] += 1;
        e->nops++;
        if (!end)
            break;
        p = end + 1;
    }
    if (e->nops != (int)n->ninputs)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the equation has %d operands for %zu inputs",
                             e->nops, n->ninputs);
    return parse_output(n, rhs, rhs ? strlen(rhs) : 0, e, count);
}

SN_LOWER(sn_lower_einsum)
{
    eq *ep;
    term *tp, acc;
    sn_rt *out;
    int64_t od[SN_MAX_DIMS];
    sn_dtype ty;
    shardnet_status st = SHARDNET_OK;
    for (size_t i = 0; i < n->ninputs; i++) {
        if (!sn_in(L, n, i))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "operand %zu omitted", i);
        if ((st = sn_float_type(n, sn_in(L, n, i), &ty)) != SHARDNET_OK)
            return st;
    }
    if (n->ninputs > 64)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%zu operands (at most 64)", n->ninputs);
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    ep = calloc(1, sizeof *ep);
    tp = calloc(n->ninputs, sizeof *tp);
    if (!ep || !tp) {
        free(ep);
        free(tp);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "einsum");
    }
    for (int l = 0; l < NLABELS; l++)
        ep->size[l] = -1;
    if ((st = parse(L, n, ep, tp)) != SHARDNET_OK)
        goto done;
    if (ep->nout > SN_MAX_DIMS) {
        st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                           "an output of rank %d", ep->nout);
        goto done;
    }
    for (int i = 0; i < ep->nout; i++)
        od[i] = ep->size[ep->out[i]];
    if ((st = sn_out_device(L, n, 0, ep->nout, od, &out)) != SHARDNET_OK)
        goto done;
    out->dtype = sn_in(L, n, 0)->dtype;
    acc = tp[0];
    for (int k = 1; k < ep->nops && sn_rt_elements(out); k++) {
        /* keep what the output or a later operand uses */
        int keep[NLABELS], nkeep = 0;
        term r;
        for (int l = 0; l < NLABELS; l++) {
            int later = has(ep->out, ep->nout, l);
            for (int j = k + 1; j < ep->nops && !later; j++)
                later = term_find(&tp[j], l) >= 0;
            if (later)
                keep[nkeep++] = l;
        }
        if ((st = contract(L, n, ep, &acc, &tp[k], keep, nkeep,
                           k == ep->nops - 1 ? out->view : (sn_view){0},
                           &r)) != SHARDNET_OK)
            goto done;
        acc = r;
    }
    if (sn_rt_elements(out))
        st = finish(L, n, ep, &acc, out->view);
done:
    free(ep);
    free(tp);
    return st;
}
