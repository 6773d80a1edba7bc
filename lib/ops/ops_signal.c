/*
 * Signal processing (opset 17): the window functions HannWindow,
 * HammingWindow and BlackmanWindow and MelWeightMatrix, made on the host
 * from their sizes (known when the plan is built), and DFT and STFT on
 * the device: the transform is one GEMM against a matrix of cosines and
 * sines built on the host (frames gathered by a strided copy for STFT),
 * which suits the transform lengths models use.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Transform lengths above this are refused: the matrix has 4 * m * n
 * floats. */
#define MAX_DFT ((int64_t)1 << 14)

/* The scalar integer input i of node n, known on the host. */
static shardnet_status host_scalar(sn_lower *L, const sn_node *n, size_t i,
                                   const char *what, int64_t *v)
{
    sn_rt *rt = sn_in(L, n, i);
    size_t c = 0;
    if (!rt)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "no %s", what);
    if (sn_rt_elements(rt) != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s must be one value, not %zu", what,
                             sn_rt_elements(rt));
    return sn_host_ints(n, rt, what, v, 1, &c);
}

/* A float scalar input known on the host. */
static shardnet_status host_real(sn_lower *L, const sn_node *n, size_t i,
                                 const char *what, double *v)
{
    sn_rt *rt = sn_in(L, n, i);
    if (!rt || sn_rt_elements(rt) != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s must be one value", what);
    if (!rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s must be known when the model is planned",
                             what);
    *v = sn_dtype_is_integer(rt->dtype) ? (double)sn_rt_get_int(rt, 0)
                                        : sn_rt_get_double(rt, 0);
    return SHARDNET_OK;
}

/* The output_datatype attribute: a number type (default float). */
static shardnet_status output_type(const sn_node *n, sn_dtype *t)
{
    int64_t v = sn_attr_int(n, "output_datatype", SN_DT_FLOAT);
    switch (v) {
    case SN_DT_FLOAT:
    case SN_DT_DOUBLE:
    case SN_DT_FLOAT16:
    case SN_DT_BFLOAT16:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_INT16:
    case SN_DT_UINT16:
    case SN_DT_INT32:
    case SN_DT_UINT32:
    case SN_DT_INT64:
    case SN_DT_UINT64:
        *t = (sn_dtype)v;
        return SHARDNET_OK;
    default:
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "output_datatype %lld is not supported",
                             (long long)v);
    }
}

/* Store a double as element i of type t (integer types truncate). */
static void store(sn_dtype t, void *p, size_t i, double v)
{
    if (sn_dtype_is_integer(t))
        sn_store_value(t, p, i, v, (int64_t)v, 1);
    else
        sn_store_value(t, p, i, v, 0, 0);
}

/*
 * HannWindow, HammingWindow, BlackmanWindow: w[k] = a0 - a1 cos(2 pi k / N)
 * + a2 cos(4 pi k / N) for k in [0, size), N = size when periodic (the
 * default), size - 1 when symmetric.
 */
SN_LOWER(sn_lower_window)
{
    int64_t size;
    double a0, a1, a2 = 0.0, den;
    sn_dtype t;
    void *d;
    size_t es;
    shardnet_status st;

    if ((st = host_scalar(L, n, 0, "size", &size)) != SHARDNET_OK ||
        (st = output_type(n, &t)) != SHARDNET_OK ||
        (st = sn_host_elem_size(n, t, &es)) != SHARDNET_OK)
        return st;
    if (size < 0 || size > SN_MAX_ELEMENTS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "size %lld out of range", (long long)size);
    if (!strcmp(n->op_type, "HannWindow")) {
        a0 = 0.5;
        a1 = 0.5;
    } else if (!strcmp(n->op_type, "HammingWindow")) {
        a0 = 25.0 / 46.0;
        a1 = 1.0 - a0;
    } else {
        a0 = 0.42;
        a1 = 0.5;
        a2 = 0.08;
    }
    den = (double)(sn_attr_int(n, "periodic", 1) ? size : size - 1);
    if (!(d = sn_host_alloc((size_t)size, es)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "a window of %lld values is too large",
                             (long long)size);
    for (int64_t k = 0; k < size; k++) {
        double x = den > 0 ? 2.0 * M_PI * (double)k / den : 0.0;
        store(t, d, (size_t)k, a0 - a1 * cos(x) + a2 * cos(2.0 * x));
    }
    return sn_out_host(L, n, 0, t, 1, &size, d);
}

/* The spectrogram bin of each of the nmel + 2 filter edges: evenly spaced
 * on the mel scale (mel = 2595 log10(1 + hz / 700)) from lo to hi, then
 * floor((dft_length + 1) hz / sample_rate). */
static void mel_edges(int64_t nmel, int64_t dftlen, int64_t rate, double lo,
                      double hi, int64_t *edge)
{
    double mlo = 2595.0 * log10(1.0 + lo / 700.0);
    double mhi = 2595.0 * log10(1.0 + hi / 700.0);
    double step = (mhi - mlo) / (double)(nmel + 2);
    for (int64_t i = 0; i < nmel + 2; i++) {
        double hz = 700.0 * (pow(10.0, ((double)i * step + mlo) / 2595.0) - 1);
        edge[i] = (int64_t)floor((double)(dftlen + 1) * hz / (double)rate);
    }
}

/*
 * MelWeightMatrix: (dft_length / 2 + 1, num_mel_bins) triangular filters;
 * filter m rises from 0 at edge m to 1 at edge m + 1 and falls to 0 at
 * edge m + 2 (mel_edges).
 */
SN_LOWER(sn_lower_mel_weight_matrix)
{
    int64_t nmel, dftlen, rate, dims[2], *edge;
    double lo, hi;
    sn_dtype t;
    size_t es, count;
    void *d;
    shardnet_status st;

    if ((st = host_scalar(L, n, 0, "num_mel_bins", &nmel)) ||
        (st = host_scalar(L, n, 1, "dft_length", &dftlen)) ||
        (st = host_scalar(L, n, 2, "sample_rate", &rate)) ||
        (st = host_real(L, n, 3, "lower_edge_hertz", &lo)) ||
        (st = host_real(L, n, 4, "upper_edge_hertz", &hi)) ||
        (st = output_type(n, &t)) || (st = sn_host_elem_size(n, t, &es)))
        return st;
    if (nmel < 1 || nmel > MAX_DFT || dftlen < 1 || dftlen > MAX_DFT ||
        rate < 1 || !(lo >= 0.0) || !(hi >= lo) || !(hi < 1e12))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "bad parameters: %lld mel bins, DFT length "
                             "%lld, sample rate %lld, edges %g to %g Hz",
                             (long long)nmel, (long long)dftlen,
                             (long long)rate, lo, hi);
    dims[0] = dftlen / 2 + 1;
    dims[1] = nmel;
    count = (size_t)(dims[0] * dims[1]);
    d = sn_host_alloc(count, es);
    edge = malloc((size_t)(nmel + 2) * sizeof *edge);
    if (!d || !edge) {
        free(d);
        free(edge);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "mel weight matrix");
    }
    mel_edges(nmel, dftlen, rate, lo, hi, edge);
    for (size_t i = 0; i < count; i++)
        store(t, d, i, 0.0);
    for (int64_t m = 0; m < nmel; m++) {
        int64_t l = edge[m], c = edge[m + 1], h = edge[m + 2];
        /* a filter's points outside the spectrogram are dropped */
        for (int64_t j = l < 0 ? 0 : l; j <= h && j < dims[0]; j++) {
            double w;
            if (j < c)
                w = (double)(j - l) / (double)(c - l);
            else if (j == c)
                w = 1.0;
            else if (j < h)
                w = (double)(h - j) / (double)(h - c);
            else
                break;
            store(t, d, (size_t)(j * nmel + m), w);
        }
    }
    free(edge);
    return sn_out_host(L, n, 0, t, 2, dims, d);
}

/*
 * The transform as a (2m, nin * c) matrix, row (k, re|im), column (j,
 * re|im of the input; c = 1 for a real input): frequency k of a transform
 * of length len of input samples j < min(nin, len) (later ones are cut,
 * missing ones are zeros).  exp(sign 2 pi i k j / len), sign -1 forward,
 * +1 inverse (scaled by 1 / len).
 */
static float *dft_matrix(int64_t m, int64_t nin, int c, int64_t len,
                         int inverse)
{
    size_t cols = (size_t)(nin * c);
    float *a = calloc((size_t)(2 * m) * cols + 1, sizeof *a);
    double scale = inverse ? 1.0 / (double)len : 1.0;
    if (!a)
        return NULL;
    for (int64_t k = 0; k < m; k++)
        for (int64_t j = 0; j < nin && j < len; j++) {
            /* k j mod len keeps the angle exact for long transforms */
            double th = 2.0 * M_PI * (double)((k * j) % len) / (double)len;
            double co = cos(th) * scale;
            double si = (inverse ? 1 : -1) * sin(th) * scale;
            float *re = a + (size_t)(2 * k) * cols + (size_t)(j * c);
            float *im = re + cols;
            re[0] = (float)co;
            im[0] = (float)si;
            if (c == 2) {
                re[1] = (float)-si;
                im[1] = (float)co;
            }
        }
    return a;
}

/* out (rows, 2m) = x (rows, nin * c) times the transform's matrix,
 * transposed. */
static shardnet_status emit_dft(sn_lower *L, const sn_node *n, size_t rows,
                                int64_t m, int64_t nin, int c, int64_t len,
                                int inverse, sn_view x, sn_view out)
{
    sn_step s = {.kind = SN_KERNEL_GEMM};
    float *a = dft_matrix(m, nin, c, len, inverse);
    size_t k = (size_t)(nin * c);
    sn_view va;
    shardnet_status st;
    if (!a)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "DFT matrix");
    if ((st = sn_dev_upload(L, n, a, (size_t)(2 * m) * k + 1, &va)))
        return st;
    if (rows == 0 || k == 0)
        return SHARDNET_OK; /* k = 0 never happens: lengths are >= 1 */
    s.u.gemm = (sn_gemm_desc){.trans_b = 1, .m = rows, .n = (size_t)(2 * m),
                              .k = k, .alpha = 1.0f, .a = x, .b = va,
                              .c = out, .lda = k, .ldb = k,
                              .ldc = (size_t)(2 * m), .batch = 1};
    return sn_emit(L, n, &s);
}

/* The real (1) or complex (2) last axis of a signal. */
static shardnet_status complex_axis(const sn_node *n, const sn_rt *x,
                                    int min_rank, int *c)
{
    if (x->rank < min_rank ||
        (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the signal must have rank %d or more and a "
                             "last axis of 1 (real) or 2 (complex)",
                             min_rank);
    *c = (int)x->dims[x->rank - 1];
    return SHARDNET_OK;
}

/* (outer, inner, nin, c) moved from x (outer, nin, inner, c), transformed
 * into res (outer, inner, m, 2) and moved to out (outer, m, inner, 2). */
static shardnet_status dft_inner(sn_lower *L, const sn_node *n, size_t outer,
                                 size_t inner, size_t nin, size_t c,
                                 int64_t m, int64_t len, int inverse,
                                 sn_view x, sn_view out)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    size_t mm = (size_t)m;
    sn_view moved, res;
    shardnet_status st;
    if ((st = sn_scratch(L, outer * inner * nin * c, &moved)) ||
        (st = sn_scratch(L, outer * inner * mm * 2, &res)))
        return st;
    s.u.copy = (sn_copy_desc){
        .rank = 4, .shape = {outer, inner, nin, c},
        .src_stride = {(ptrdiff_t)(nin * inner * c), (ptrdiff_t)c,
                       (ptrdiff_t)(inner * c), 1},
        .dst_stride = {(ptrdiff_t)(inner * nin * c), (ptrdiff_t)(nin * c),
                       (ptrdiff_t)c, 1},
        .src = x, .dst = moved};
    if ((st = sn_emit(L, n, &s)) ||
        (st = emit_dft(L, n, outer * inner, m, (int64_t)nin, (int)c, len,
                       inverse, moved, res)))
        return st;
    s.u.copy = (sn_copy_desc){
        .rank = 4, .shape = {outer, inner, mm, 2},
        .src_stride = {(ptrdiff_t)(inner * mm * 2), (ptrdiff_t)(mm * 2), 2,
                       1},
        .dst_stride = {(ptrdiff_t)(mm * inner * 2), 2, (ptrdiff_t)(inner * 2),
                       1},
        .src = res, .dst = out};
    return sn_emit(L, n, &s);
}

/*
 * DFT: along `axis` of x (..., n, ..., c) (an attribute, default 1, in
 * opset 17; input 2, default -2, from 20), of length dft_length (input 1;
 * default n), inverse or not; onesided keeps the first len / 2 + 1
 * frequencies.
 */
SN_LOWER(sn_lower_dft)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axis = sn_attr_int(n, "axis", 1), len, m, od[SN_MAX_DIMS];
    int inverse = sn_attr_int(n, "inverse", 0) != 0;
    int onesided = sn_attr_int(n, "onesided", 0) != 0, c = 1, ax;
    size_t outer, inner, nin;
    sn_view vx;
    sn_dtype t;
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) || (st = complex_axis(n, x, 2, &c)))
        return st;
    if (L->g->opset >= 20) /* axis became input 2, default -2 */
        axis = -2;
    if (sn_in(L, n, 2) &&
        (st = host_scalar(L, n, 2, "axis", &axis)) != SHARDNET_OK)
        return st;
    ax = sn_axis(axis, x->rank);
    if (ax < 0 || ax >= x->rank - 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for a signal of rank "
                             "%d",
                             (long long)axis, x->rank);
    nin = (size_t)x->dims[ax];
    len = (int64_t)nin;
    if (sn_in(L, n, 1) &&
        (st = host_scalar(L, n, 1, "dft_length", &len)) != SHARDNET_OK)
        return st;
    if (len < 1 || len > MAX_DFT || (int64_t)nin > MAX_DFT)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "DFT length %lld (of %zu samples) out of range "
                             "[1, %lld]",
                             (long long)len, nin, (long long)MAX_DFT);
    if (onesided && (inverse || c == 2))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a one-sided transform of a complex signal or "
                             "an inverse one is not supported");
    m = onesided ? len / 2 + 1 : len;
    outer = sn_dims_product(0, ax, x->dims);
    inner = sn_dims_product(ax + 1, x->rank - 1, x->dims);
    memcpy(od, x->dims, sizeof od);
    od[ax] = m;
    od[x->rank - 1] = 2;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device(L, n, 0, x->rank, od, &out)))
        return st;
    out->dtype = t;
    if (nin == 0 || outer * inner == 0)
        return SHARDNET_OK;
    if (inner == 1)
        return emit_dft(L, n, outer, m, (int64_t)nin, c, len, inverse, vx,
                        out->view);
    return dft_inner(L, n, outer, inner, nin, (size_t)c, m, len, inverse, vx,
                     out->view);
}

/*
 * STFT (opset 17): signal (batch, length, c), frame_step, window
 * (frame_length values, optional), frame_length (optional when the window
 * gives it) into (batch, frames, bins, 2): frames of frame_length samples
 * every frame_step, each multiplied by the window and transformed;
 * onesided (the default) keeps frame_length / 2 + 1 bins.
 */
SN_LOWER(sn_lower_stft)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 2), *out;
    int onesided = sn_attr_int(n, "onesided", 1) != 0, c = 1;
    int64_t step, flen = -1, frames, m, od[4];
    size_t batch, slen;
    sn_view vx, vw, fr;
    sn_dtype t;
    sn_step s = {.kind = SN_KERNEL_COPY};
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) || (st = complex_axis(n, x, 3, &c)) ||
        (st = host_scalar(L, n, 1, "frame_step", &step)))
        return st;
    if (x->rank != 3)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the signal must be (batch, length, 1 or 2), "
                             "not of rank %d",
                             x->rank);
    if (sn_in(L, n, 3) &&
        (st = host_scalar(L, n, 3, "frame_length", &flen)) != SHARDNET_OK)
        return st;
    if (w && w->rank != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the window must have rank 1");
    if (flen < 0 && w)
        flen = w->dims[0];
    batch = (size_t)x->dims[0];
    slen = (size_t)x->dims[1];
    if (flen < 1 || flen > MAX_DFT || (int64_t)slen < flen || step < 1 ||
        (w && w->dims[0] != flen))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "frame length %lld, step %lld and window (%lld "
                             "values) do not fit a signal of %zu samples",
                             (long long)flen, (long long)step,
                             (long long)(w ? w->dims[0] : -1), slen);
    if (onesided && c == 2)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a one-sided transform of a complex signal is "
                             "not defined");
    frames = ((int64_t)slen - flen) / step + 1;
    m = onesided ? flen / 2 + 1 : flen;
    od[0] = (int64_t)batch;
    od[1] = frames;
    od[2] = m;
    od[3] = 2;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device(L, n, 0, 4, od, &out)) ||
        (st = sn_scratch(L, batch * (size_t)(frames * flen * c), &fr)))
        return st;
    out->dtype = t;
    if (batch == 0)
        return SHARDNET_OK;
    /* frames (batch, frames, flen, c): overlapping reads of the signal */
    s.u.copy = (sn_copy_desc){
        .rank = 4, .shape = {batch, (size_t)frames, (size_t)flen, (size_t)c},
        .src_stride = {(ptrdiff_t)(slen * (size_t)c), (ptrdiff_t)(step * c),
                       c, 1},
        .dst_stride = {(ptrdiff_t)(frames * flen * c), (ptrdiff_t)(flen * c),
                       c, 1},
        .src = vx, .dst = fr};
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    if (w) {
        int64_t fd[4] = {(int64_t)batch, frames, flen, c}, wd[2] = {flen, 1};
        if ((st = sn_dev_view(L, n, w, &vw)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_MUL, 4, fd, fr, 2, wd, vw,
                                 fr)))
            return st;
    }
    return emit_dft(L, n, batch * (size_t)frames, m, flen, c, flen, 0, fr,
                    out->view);
}
