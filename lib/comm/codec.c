/*
 * The codec of values between processes (see codec.h): fp16, bf16 and
 * int8 with a scale per chunk, dense or sparse, and the raw floats where
 * nothing else is smaller or a value would not survive.
 */
#include <config.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "comm/codec.h"
#include "core/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#endif

#define MAGIC 0x5a

/* The header, as it lies at the start of a message (native byte order:
 * the processes of a job share their machines' architecture, as the
 * floats they send already assume). */
typedef struct header {
    uint8_t magic, codec, form, zero;
    uint32_t n;     /* values of the message */
    uint32_t nnz;   /* values in its payload: n for dense and raw */
    uint32_t bytes; /* the message's, header included */
} header;

_Static_assert(sizeof(header) == SN_CODEC_HEADER, "codec header");

const char *sn_codec_name(sn_codec c)
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "int8"};
    return (unsigned)c < SN_CODEC_COUNT ? names[c] : "?";
}

double sn_codec_wire_ratio(sn_codec c)
{
    switch (c) {
    case SN_CODEC_FP16:
    case SN_CODEC_BF16:
        return 0.5;
    case SN_CODEC_INT8:
        return (1.0 + 4.0 / SN_CODEC_CHUNK) / 4.0;
    default:
        return 1.0;
    }
}

size_t sn_codec_bound(size_t n)
{
    return SN_CODEC_HEADER + 4 * n;
}

/* Bytes of k values in codec c: 2 each (fp16, bf16), or one each and a
 * float scale per chunk (int8). */
static size_t values_bytes(sn_codec c, size_t k)
{
    if (c == SN_CODEC_INT8)
        return 4 * ((k + SN_CODEC_CHUNK - 1) / SN_CODEC_CHUNK) + k;
    return 2 * k;
}

/* --- fp16 and bf16, in runs ------------------------------------------------ */

#ifdef HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static void to_half_f16c(
    const float *x, size_t k, uint8_t *out)
{
    size_t i = 0;
    for (; i + 8 <= k; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                    _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), h);
    }
    for (; i < k; i++) {
        uint16_t h = sn_float_to_half(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

__attribute__((target("avx,f16c"))) static void from_half_f16c(
    const uint8_t *in, size_t k, float *x)
{
    size_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                    (const __m128i *)(const void *)(in + 2 * i))));
    for (; i < k; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        x[i] = sn_half_to_float(h);
    }
}

static int have_f16c(void)
{
    static int have = -1;
    if (have < 0)
        have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    return have;
}
#endif

/* The hardware's conversion agrees with sn_float_to_half but for a NaN's
 * payload (both keep a NaN a quiet NaN of its sign). */
static void to_half(const float *x, size_t k, uint8_t *out)
{
#ifdef HAVE_F16C_PATH
    if (have_f16c()) {
        to_half_f16c(x, k, out);
        return;
    }
#endif
    for (size_t i = 0; i < k; i++) {
        uint16_t h = sn_float_to_half(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void from_half(const uint8_t *in, size_t k, float *x)
{
#ifdef HAVE_F16C_PATH
    if (have_f16c()) {
        from_half_f16c(in, k, x);
        return;
    }
#endif
    for (size_t i = 0; i < k; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        x[i] = sn_half_to_float(h);
    }
}

static void to_bf16(const float *x, size_t k, uint8_t *out)
{
    for (size_t i = 0; i < k; i++) {
        uint16_t h = sn_float_to_bf16(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void from_bf16(const uint8_t *in, size_t k, float *x)
{
    for (size_t i = 0; i < k; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        x[i] = sn_bf16_to_float(h);
    }
}

/* --- int8, a chunk at a time ------------------------------------------------ */

/* One chunk of k <= SN_CODEC_CHUNK finite values: its scale, then its
 * codes.  The scale never underflows to 0 for a chunk that is not all
 * zeros (the smallest subnormal at least). */
static void int8_chunk(const float *x, size_t k, uint8_t *scale_at,
                       int8_t *q)
{
    float amax = 0, scale;
    for (size_t i = 0; i < k; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    scale = amax / 127.0f;
    if (amax > 0 && scale < 0x1p-149f)
        scale = 0x1p-149f;
    if (isinf(127.0f * scale)) /* near FLT_MAX: 127 codes stay finite */
        scale = nextafterf(scale, 0);
    memcpy(scale_at, &scale, 4);
    if (!(scale > 0)) {
        memset(q, 0, k);
        return;
    }
    /* x times the inverse, rounded to nearest even by adding and taking
     * away 1.5 * 2^23 (|x / scale| <= 127.5: exact, and vectorised where
     * nearbyintf is a call); where the inverse overflows, divided. */
    float inv = 1.0f / scale;
    if (isinf(inv)) {
        for (size_t i = 0; i < k; i++) {
            float r = nearbyintf(x[i] / scale);
            q[i] = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
        }
        return;
    }
    for (size_t i = 0; i < k; i++) {
        float r = (x[i] * inv + 0x1.8p23f) - 0x1.8p23f;
        r = r > 127.0f ? 127.0f : r;
        r = r < -127.0f ? -127.0f : r;
        q[i] = (int8_t)(int)r;
    }
}

static void int8_unchunk(const uint8_t *scale_at, const int8_t *q, size_t k,
                         float *x)
{
    float scale;
    memcpy(&scale, scale_at, 4);
    for (size_t i = 0; i < k; i++)
        x[i] = (float)q[i] * scale;
}

/* --- values: the payload's values, in runs of at most a chunk ---------------- */

/* Where the values of a payload holding k values go: int8's scales first
 * (one per chunk), then the codes; fp16 and bf16 two bytes each. */
typedef struct values {
    sn_codec c;
    uint8_t *at;  /* the values' first byte */
    size_t k;     /* values in all */
    size_t done;  /* written (read) so far; a multiple of the chunk but at
                     the end */
} values;

/* Write the next run v[0 .. m) (m <= SN_CODEC_CHUNK, and a whole chunk
 * unless it is the last). */
static void put(values *w, const float *v, size_t m)
{
    if (w->c == SN_CODEC_INT8) {
        size_t nch = (w->k + SN_CODEC_CHUNK - 1) / SN_CODEC_CHUNK;
        int8_chunk(v, m, w->at + 4 * (w->done / SN_CODEC_CHUNK),
                   (int8_t *)(w->at + 4 * nch + w->done));
    } else if (w->c == SN_CODEC_FP16) {
        to_half(v, m, w->at + 2 * w->done);
    } else {
        to_bf16(v, m, w->at + 2 * w->done);
    }
    w->done += m;
}

static void get(values *r, float *v, size_t m)
{
    if (r->c == SN_CODEC_INT8) {
        size_t nch = (r->k + SN_CODEC_CHUNK - 1) / SN_CODEC_CHUNK;
        int8_unchunk(r->at + 4 * (r->done / SN_CODEC_CHUNK),
                     (const int8_t *)(r->at + 4 * nch + r->done), m, v);
    } else if (r->c == SN_CODEC_FP16) {
        from_half(r->at + 2 * r->done, m, v);
    } else {
        from_bf16(r->at + 2 * r->done, m, v);
    }
    r->done += m;
}

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* --- encoding ---------------------------------------------------------------- */

/* What a message of x[0 .. n) is: its values not zero, whether one is
 * NaN or infinite, and the largest finite magnitude. */
static void scan(const float *x, size_t n, size_t *nnz, int *nonfinite,
                 float *amax)
{
    size_t nz = 0;
    int bad = 0;
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        nz += bits_of(x[i]) != 0;
        if (a <= FLT_MAX)
            m = a > m ? a : m;
        else
            bad = 1;
    }
    *nnz = nz;
    *nonfinite = bad;
    *amax = m;
}

/* Would a finite magnitude a become infinite in codec c?  fp16's largest
 * is 65504, and 65520 rounds (to even) beyond it; bf16's halfway point
 * past its largest, 0x7f7f8000, does too. */
static int overflows(sn_codec c, float a)
{
    if (c == SN_CODEC_FP16)
        return a >= 65520.0f;
    if (c == SN_CODEC_BF16)
        return bits_of(a) >= 0x7f7f8000u;
    return 0;
}

size_t sn_codec_encode(sn_codec c, const float *x, size_t n, void *out,
                       sn_codec_form *form_out)
{
    uint8_t *o = out, *p = o + SN_CODEC_HEADER;
    header h = {.magic = MAGIC, .codec = (uint8_t)c, .n = (uint32_t)n};
    size_t nnz, dense, bitmap, index, raw = 4 * n, best;
    sn_codec_form form = SN_CODEC_DENSE;
    int nonfinite;
    float amax;
    if (c <= SN_CODEC_FP32 || c >= SN_CODEC_COUNT || n > SN_CODEC_MAX_N)
        return 0;
    scan(x, n, &nnz, &nonfinite, &amax);
    dense = values_bytes(c, n);
    bitmap = (n + 7) / 8 + values_bytes(c, nnz);
    index = 4 * nnz + values_bytes(c, nnz);
    best = dense;
    if (bitmap < best)
        best = bitmap, form = SN_CODEC_BITMAP;
    if (index < best)
        best = index, form = SN_CODEC_INDEX;
    if (raw <= best || overflows(c, amax) ||
        (c == SN_CODEC_INT8 && nonfinite))
        best = raw, form = SN_CODEC_RAW;
    h.form = (uint8_t)form;
    h.nnz = (uint32_t)(form == SN_CODEC_DENSE || form == SN_CODEC_RAW ? n
                                                                      : nnz);
    h.bytes = (uint32_t)(SN_CODEC_HEADER + best);
    memcpy(o, &h, sizeof h);
    if (form_out)
        *form_out = form;
    if (form == SN_CODEC_RAW) {
        memcpy(p, x, raw);
        return h.bytes;
    }
    values w = {.c = c, .k = h.nnz};
    if (form == SN_CODEC_DENSE) {
        w.at = p;
        for (size_t i = 0; i < n; i += SN_CODEC_CHUNK)
            put(&w, x + i, n - i < SN_CODEC_CHUNK ? n - i : SN_CODEC_CHUNK);
        return h.bytes;
    }
    /* Sparse: where the values not zero are, then those values, gathered a
     * chunk at a time. */
    float run[SN_CODEC_CHUNK];
    size_t m = 0;
    uint8_t *map = p;
    w.at = p + (form == SN_CODEC_BITMAP ? (n + 7) / 8 : 4 * nnz);
    if (form == SN_CODEC_BITMAP)
        memset(map, 0, (n + 7) / 8);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (!bits_of(x[i]))
            continue;
        if (form == SN_CODEC_BITMAP) {
            map[i / 8] |= (uint8_t)(1u << (i % 8));
        } else {
            uint32_t at = (uint32_t)i;
            memcpy(map + 4 * j++, &at, 4);
        }
        run[m++] = x[i];
        if (m == SN_CODEC_CHUNK) {
            put(&w, run, m);
            m = 0;
        }
    }
    if (m)
        put(&w, run, m);
    return h.bytes;
}

/* --- decoding ---------------------------------------------------------------- */

static shardnet_status bad(const char *why)
{
    return sn_error(SHARDNET_INTERNAL, "a malformed message between "
                                       "processes: %s", why);
}

shardnet_status sn_codec_decode(const void *in, size_t bytes, float *x,
                                size_t n, size_t *used)
{
    const uint8_t *i8 = in, *p;
    header h;
    size_t want;
    if (bytes < SN_CODEC_HEADER)
        return bad("shorter than its header");
    memcpy(&h, i8, sizeof h);
    p = i8 + SN_CODEC_HEADER;
    if (h.magic != MAGIC || h.zero)
        return bad("not an encoded value");
    if (h.codec <= SN_CODEC_FP32 || h.codec >= SN_CODEC_COUNT)
        return bad("an unknown codec");
    if (h.n != n)
        return bad("a count other than the one expected");
    if (h.nnz > h.n)
        return bad("more values than its count");
    sn_codec c = (sn_codec)h.codec;
    switch (h.form) {
    case SN_CODEC_DENSE:
    case SN_CODEC_RAW:
        if (h.nnz != h.n)
            return bad("a dense form with values missing");
        want = h.form == SN_CODEC_RAW ? 4 * (size_t)n : values_bytes(c, n);
        break;
    case SN_CODEC_BITMAP:
        want = (n + 7) / 8 + values_bytes(c, h.nnz);
        break;
    case SN_CODEC_INDEX:
        want = 4 * (size_t)h.nnz + values_bytes(c, h.nnz);
        break;
    default:
        return bad("an unknown form");
    }
    if (h.bytes != SN_CODEC_HEADER + want || h.bytes > bytes)
        return bad("a length that disagrees with its form, or beyond the "
                   "bytes received");
    if (used)
        *used = h.bytes;
    if (h.form == SN_CODEC_RAW) {
        memcpy(x, p, 4 * (size_t)n);
        return SHARDNET_OK;
    }
    values r = {.c = c, .k = h.nnz};
    if (h.form == SN_CODEC_DENSE) {
        r.at = (uint8_t *)(uintptr_t)p;
        for (size_t i = 0; i < n; i += SN_CODEC_CHUNK)
            get(&r, x + i, n - i < SN_CODEC_CHUNK ? n - i : SN_CODEC_CHUNK);
        return SHARDNET_OK;
    }
    /* Sparse: check where the values go before writing any. */
    const uint8_t *map = p;
    size_t count = 0;
    if (h.form == SN_CODEC_BITMAP) {
        for (size_t b = 0; b < (n + 7) / 8; b++)
            count += (size_t)__builtin_popcount(map[b]);
        if (n % 8 && map[n / 8] >> (n % 8))
            return bad("a bitmap with bits past its count");
        if (count != h.nnz)
            return bad("a bitmap that disagrees with its count");
        r.at = (uint8_t *)(uintptr_t)(p + (n + 7) / 8);
    } else {
        uint32_t prev = 0, at;
        for (size_t j = 0; j < h.nnz; j++) {
            memcpy(&at, map + 4 * j, 4);
            if (at >= n || (j && at <= prev))
                return bad("an index out of order or past its count");
            prev = at;
        }
        r.at = (uint8_t *)(uintptr_t)(p + 4 * (size_t)h.nnz);
    }
    float run[SN_CODEC_CHUNK];
    size_t m = 0, have = 0, left = h.nnz, j = 0;
    memset(x, 0, 4 * (size_t)n);
    /* The values a chunk at a time, each laid where the map says. */
    for (size_t i = 0; left; i++) {
        size_t pos;
        if (h.form == SN_CODEC_BITMAP) {
            if (!(map[i / 8] >> (i % 8) & 1))
                continue;
            pos = i;
        } else {
            uint32_t at;
            memcpy(&at, map + 4 * j++, 4);
            pos = at;
        }
        if (m == have) {
            have = left < SN_CODEC_CHUNK ? left : SN_CODEC_CHUNK;
            get(&r, run, have);
            m = 0;
        }
        x[pos] = run[m++];
        left--;
    }
    return SHARDNET_OK;
}
