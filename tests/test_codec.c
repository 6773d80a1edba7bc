/* The codec of values between processes (lib/comm/codec.h): each codec's
 * round trip within the error codec.h states, the values it must keep
 * (NaN, infinities, subnormals, zeros of both signs), the sparse forms
 * chosen where they are smaller, and messages it must refuse. */
#include <config.h>

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"

static const sn_codec lossy[] = {SN_CODEC_FP16, SN_CODEC_BF16,
                                 SN_CODEC_INT8};

static uint32_t rng = 12345;
static float uniform(void) /* in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

/* Encode and decode x[0 .. n) in c; out gets the result; returns the
 * message's bytes. */
static size_t round_trip(sn_codec c, const float *x, size_t n, float *out,
                         sn_codec_form *form)
{
    unsigned char *buf = malloc(sn_codec_bound(n));
    cr_assert(buf);
    size_t bytes = sn_codec_encode(c, x, n, buf, form);
    size_t used = 0;
    cr_assert(bytes > 0 && bytes <= sn_codec_bound(n), "%zu bytes", bytes);
    cr_assert_eq(sn_codec_decode(buf, bytes, out, n, &used), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(used, bytes);
    free(buf);
    return bytes;
}

/* |x - y| within codec.h's bound for x (the int8 scale of its chunk). */
static void assert_within(sn_codec c, float x, float y, float scale, size_t i)
{
    double err = fabs((double)x - (double)y), ax = fabs((double)x), tol;
    if (c == SN_CODEC_FP16)
        tol = ax >= 0x1p-14 ? ax * 0x1p-11 : 0x1p-25;
    else if (c == SN_CODEC_BF16)
        tol = ax >= FLT_MIN ? ax * 0x1p-8 : 0x1p-134;
    else
        tol = scale * (0.5 + 0x1p-15) + ax * 0x1p-23;
    cr_assert(err <= tol, "%s: value %zu: %.9g came back %.9g (error %g, "
              "bound %g)", sn_codec_name(c), i, x, y, err, tol);
}

/* The int8 scale of the chunk holding value i of the values sent. */
static float chunk_scale(const float *v, size_t k, size_t i)
{
    size_t a = i / SN_CODEC_CHUNK * SN_CODEC_CHUNK;
    float m = 0;
    for (size_t j = a; j < k && j < a + SN_CODEC_CHUNK; j++)
        m = fabsf(v[j]) > m ? fabsf(v[j]) : m;
    return m / 127.0f;
}

Test(codec, dense_round_trip_within_the_stated_error)
{
    size_t n = 10 * SN_CODEC_CHUNK + 17; /* a last chunk of its own */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) /* magnitudes 1e-3 .. 1e3 */
        x[i] = uniform() * powf(10.0f, 3.0f * uniform());
    for (size_t k = 0; k < 3; k++) {
        sn_codec_form form;
        size_t bytes = round_trip(lossy[k], x, n, y, &form);
        cr_assert_eq(form, SN_CODEC_DENSE);
        cr_assert_eq(bytes, SN_CODEC_HEADER +
                                (lossy[k] == SN_CODEC_INT8
                                     ? n + 4 * ((n + SN_CODEC_CHUNK - 1) /
                                                SN_CODEC_CHUNK)
                                     : 2 * n));
        for (size_t i = 0; i < n; i++)
            assert_within(lossy[k], x[i], y[i], chunk_scale(x, n, i), i);
    }
    free(x);
    free(y);
}

Test(codec, fp16_and_bf16_round_to_nearest_even)
{
    /* 1 + 2^-11 lies halfway between 1 and fp16's next; ties go to the
     * even one (1), and 1 + 3 * 2^-11 to 1 + 2^-9 (even). */
    float x[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f,
                  1.0f + 3 * 0x1p-8f};
    float y[4];
    round_trip(SN_CODEC_FP16, x, 2, y, NULL);
    cr_assert_eq(y[0], 1.0f);
    cr_assert_eq(y[1], 1.0f + 0x1p-9f);
    round_trip(SN_CODEC_BF16, x + 2, 2, y, NULL);
    cr_assert_eq(y[0], 1.0f);
    cr_assert_eq(y[1], 1.0f + 0x1p-6f);
}

Test(codec, nan_infinity_and_subnormals_survive)
{
    float x[8] = {NAN, -NAN, INFINITY, -INFINITY, 0x1p-20f, -0x1p-24f,
                  1e-40f, 3.0f};
    float y[8];
    sn_codec_form form;
    for (size_t k = 0; k < 2; k++) {
        round_trip(lossy[k], x, 8, y, &form);
        cr_assert(isnan(y[0]) && isnan(y[1]));
        cr_assert(signbit(y[1]));
        cr_assert_eq(y[2], INFINITY);
        cr_assert_eq(y[3], -INFINITY);
        for (size_t i = 4; i < 8; i++)
            assert_within(lossy[k], x[i], y[i], 0, i);
    }
    /* fp16's subnormals: 2^-20 and 2^-24 are exact there. */
    round_trip(SN_CODEC_FP16, x, 8, y, NULL);
    cr_assert_eq(y[4], 0x1p-20f);
    cr_assert_eq(y[5], -0x1p-24f);
    /* int8 has no NaN: the message goes raw, exact. */
    round_trip(SN_CODEC_INT8, x, 8, y, &form);
    cr_assert_eq(form, SN_CODEC_RAW);
    cr_assert(isnan(y[0]) && y[2] == INFINITY && y[6] == 1e-40f);
}

Test(codec, a_finite_value_never_becomes_infinite)
{
    float x[300], y[300];
    for (size_t i = 0; i < 300; i++)
        x[i] = uniform();
    x[7] = 70000.0f; /* past fp16's largest */
    sn_codec_form form;
    round_trip(SN_CODEC_FP16, x, 300, y, &form);
    cr_assert_eq(form, SN_CODEC_RAW);
    cr_assert_eq(memcmp(x, y, sizeof x), 0);
    x[7] = 65504.0f; /* fp16's largest: dense, exact */
    round_trip(SN_CODEC_FP16, x, 300, y, &form);
    cr_assert_eq(form, SN_CODEC_DENSE);
    cr_assert_eq(y[7], 65504.0f);
    x[7] = FLT_MAX; /* rounds past bf16's largest */
    round_trip(SN_CODEC_BF16, x, 300, y, &form);
    cr_assert_eq(form, SN_CODEC_RAW);
    round_trip(SN_CODEC_INT8, x, 300, y, &form); /* int8 scales it */
    cr_assert_eq(form, SN_CODEC_DENSE);
    assert_within(SN_CODEC_INT8, x[7], y[7], FLT_MAX / 127.0f, 7);
}

Test(codec, int8_tiny_chunks_keep_a_scale)
{
    /* A chunk of subnormals: the scale is clamped to the smallest
     * subnormal, not to 0, and the values come back within it. */
    float x[SN_CODEC_CHUNK], y[SN_CODEC_CHUNK];
    for (size_t i = 0; i < SN_CODEC_CHUNK; i++)
        x[i] = (float)(int)(uniform() * 60) * 0x1p-149f;
    x[0] = 0x1p-149f; /* one not zero at least */
    round_trip(SN_CODEC_INT8, x, SN_CODEC_CHUNK, y, NULL);
    for (size_t i = 0; i < SN_CODEC_CHUNK; i++)
        cr_assert_eq(y[i], x[i], "value %zu", i);
}

Test(codec, all_zero_and_mostly_zero_go_sparse)
{
    size_t n = 4096;
    float *x = calloc(n, sizeof *x), *y = malloc(n * sizeof *y);
    sn_codec_form form;
    for (size_t k = 0; k < 3; k++) {
        /* All zeros: an index list of none, the header alone. */
        size_t bytes = round_trip(lossy[k], x, n, y, &form);
        cr_assert_eq(form, SN_CODEC_INDEX);
        cr_assert_eq(bytes, SN_CODEC_HEADER);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(y[i], 0.0f);
    }
    /* 1% not zero: indices; 30%: a bitmap; 90%: dense. */
    static const struct {
        unsigned every;
        sn_codec_form form;
    } cases[] = {{100, SN_CODEC_INDEX}, {3, SN_CODEC_BITMAP},
                 {1, SN_CODEC_DENSE}};
    for (size_t c = 0; c < 3; c++) {
        for (size_t i = 0; i < n; i++) {
            /* every 1: all but one in 50 */
            int set = cases[c].every == 1 ? i % 50 != 0
                                          : i % cases[c].every == 0;
            x[i] = set ? 1.0f + uniform() * 0.5f : 0.0f;
        }
        x[5] = -0.0f; /* not "zero": its sign is kept */
        for (size_t k = 0; k < 3; k++) {
            round_trip(lossy[k], x, n, y, &form);
            cr_assert_eq(form, cases[c].form, "%s, 1 in %u: form %d",
                         sn_codec_name(lossy[k]), cases[c].every, form);
            /* (int8 has no -0: it comes back +0.0.) */
            cr_assert(y[5] == 0 &&
                      (signbit(y[5]) || lossy[k] == SN_CODEC_INT8));
            /* Sent values: the non-zeros, for the int8 scales. */
            float *sent = malloc(n * sizeof *sent);
            size_t m = 0, *rank = malloc(n * sizeof *rank);
            for (size_t i = 0; i < n; i++) {
                rank[i] = m;
                if (form == SN_CODEC_DENSE || x[i] != 0 || signbit(x[i]))
                    sent[m++] = x[i];
            }
            for (size_t i = 0; i < n; i++) {
                if (x[i] == 0 && !signbit(x[i])) {
                    cr_assert_eq(y[i], 0.0f);
                    continue;
                }
                assert_within(lossy[k], x[i], y[i],
                              chunk_scale(sent, m, rank[i]), i);
            }
            free(sent);
            free(rank);
        }
    }
    free(x);
    free(y);
}

Test(codec, empty_and_one_value)
{
    float x = 2.5f, y = 0;
    for (size_t k = 0; k < 3; k++) {
        cr_assert_eq(round_trip(lossy[k], &x, 0, &y, NULL), SN_CODEC_HEADER);
        round_trip(lossy[k], &x, 1, &y, NULL);
        cr_assert_eq(y, 2.5f);
    }
}

Test(codec, encoding_is_the_same_bits_every_time)
{
    size_t n = 3000;
    float *x = malloc(n * sizeof *x);
    unsigned char *a = malloc(sn_codec_bound(n)), *b = malloc(sn_codec_bound(n));
    for (size_t i = 0; i < n; i++)
        x[i] = i % 4 ? uniform() * 100 : 0;
    for (size_t k = 0; k < 3; k++) {
        size_t la = sn_codec_encode(lossy[k], x, n, a, NULL);
        size_t lb = sn_codec_encode(lossy[k], x, n, b, NULL);
        cr_assert_eq(la, lb);
        cr_assert_eq(memcmp(a, b, la), 0);
    }
    free(x);
    free(a);
    free(b);
}

Test(codec, refuses_what_it_does_not_take)
{
    float x[4] = {1, 2, 3, 4};
    unsigned char buf[64];
    cr_assert_eq(sn_codec_encode(SN_CODEC_FP32, x, 4, buf, NULL), 0);
    cr_assert_eq(sn_codec_encode(SN_CODEC_COUNT, x, 4, buf, NULL), 0);
    cr_assert_eq(sn_codec_encode(SN_CODEC_FP16, x, SN_CODEC_MAX_N + 1, buf,
                                 NULL),
                 0);
}

/* A good message of n values, then one thing changed. */
static size_t message(sn_codec c, float *x, size_t n, unsigned char *buf)
{
    return sn_codec_encode(c, x, n, buf, NULL);
}

Test(codec, hostile_messages_are_refused)
{
    float x[512], y[512];
    unsigned char buf[SN_CODEC_HEADER + 4 * 512 + 64];
    uint32_t u;
    for (size_t i = 0; i < 512; i++)
        x[i] = i % 50 ? 0.0f : 1.0f + (float)i; /* sparse: indices */
    size_t len = message(SN_CODEC_FP16, x, 512, buf);
    cr_assert_eq(sn_codec_decode(buf, len, y, 512, NULL), SHARDNET_OK);
    /* Every length short of the whole. */
    for (size_t l = 0; l < len; l++)
        cr_assert_eq(sn_codec_decode(buf, l, y, 512, NULL), SHARDNET_INTERNAL,
                     "%zu bytes of %zu", l, len);
    /* A count other than the one expected. */
    cr_assert_eq(sn_codec_decode(buf, len, y, 511, NULL), SHARDNET_INTERNAL);
    /* Each header byte changed. */
    for (size_t b = 0; b < SN_CODEC_HEADER; b++) {
        unsigned char save = buf[b];
        buf[b] ^= 0x40;
        cr_assert_eq(sn_codec_decode(buf, sizeof buf, y, 512, NULL),
                     SHARDNET_INTERNAL, "header byte %zu", b);
        buf[b] = save;
    }
    /* An index past the count, and indices out of order. */
    memcpy(&u, buf + SN_CODEC_HEADER + 4, 4);
    uint32_t past = 512;
    memcpy(buf + SN_CODEC_HEADER + 4, &past, 4);
    cr_assert_eq(sn_codec_decode(buf, len, y, 512, NULL), SHARDNET_INTERNAL);
    past = 0;
    memcpy(buf + SN_CODEC_HEADER + 4, &past, 4);
    cr_assert_eq(sn_codec_decode(buf, len, y, 512, NULL), SHARDNET_INTERNAL);
    memcpy(buf + SN_CODEC_HEADER + 4, &u, 4);
    cr_assert_eq(sn_codec_decode(buf, len, y, 512, NULL), SHARDNET_OK);

    /* A bitmap whose bits disagree with its count, or run past it. */
    for (size_t i = 0; i < 512; i++)
        x[i] = i % 3 ? 0.0f : 1.0f;
    len = message(SN_CODEC_INT8, x, 509, buf);
    cr_assert_eq(sn_codec_decode(buf, len, y, 509, NULL), SHARDNET_OK);
    buf[SN_CODEC_HEADER] ^= 0x02; /* value 1: a bit more */
    cr_assert_eq(sn_codec_decode(buf, len, y, 509, NULL), SHARDNET_INTERNAL);
    buf[SN_CODEC_HEADER] ^= 0x02;
    buf[SN_CODEC_HEADER + 63] |= 0x80; /* bit 511, past 509 */
    cr_assert_eq(sn_codec_decode(buf, len, y, 509, NULL), SHARDNET_INTERNAL);
}

Test(codec, wire_ratios_for_the_planner)
{
    cr_assert_eq(sn_codec_wire_ratio(SN_CODEC_FP32), 1.0);
    cr_assert_eq(sn_codec_wire_ratio(SN_CODEC_FP16), 0.5);
    cr_assert_eq(sn_codec_wire_ratio(SN_CODEC_BF16), 0.5);
    cr_assert_float_eq(sn_codec_wire_ratio(SN_CODEC_INT8), 0.25390625, 1e-12);
    cr_assert_str_eq(sn_codec_name(SN_CODEC_INT8), "int8");
}
