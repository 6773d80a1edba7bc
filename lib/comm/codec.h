/*
 * The codec of values that cross between processes (private): float32
 * values sent as fp16, bf16 or int8 (one float scale per chunk of
 * SN_CODEC_CHUNK values), dense or, where the value is mostly zeros and
 * that is smaller, sparse (a bitmap or a list of indices, and the values
 * that are not zero).  lib/comm/across.c (the tensor split's collectives
 * between processes), lib/runtime/pipeline_run.c (the layer split's
 * values between processes) and lib/comm/transport.c's
 * sn_transport_bcast_floats (the outputs every process gets of a tensor,
 * layer or data split, a data split's each device's rows) encode and
 * decode through it; the planners (lib/plan/tensor_costs.c,
 * layer_costs.c, and data_costs.c through layer_costs.c's link) price its
 * bytes and its conversion work with sn_codec_wire_ratio() and
 * SN_CODEC_S_PER_BYTE.
 *
 * SN_CODEC_FP32 is no codec: its callers send the floats as they are, as
 * before the codec was written, and never call encode.
 *
 * An encoded message is self-describing: a header of SN_CODEC_HEADER
 * bytes (form, codec, count, values not zero, its own length), then the
 * payload.  The form of each message is the smallest of
 *
 *   dense    every value in the codec;
 *   bitmap   one bit per value (set: not zero), then the values not zero;
 *   index    a uint32 index per value not zero, then those values;
 *   raw      the floats as they are (exact): where nothing else is
 *            smaller, where a finite value would overflow fp16 or bf16,
 *            and, for int8, where a value is NaN or infinite;
 *
 * so a message is never longer than SN_CODEC_HEADER + 4 n bytes.  "Zero"
 * is +0.0 only (its bits all 0), so the sparse forms lose nothing of the
 * zeros, -0.0 included.
 *
 * The error it adds, per value x decoded as x' (zeros are exact):
 *
 *   fp16  round to nearest even: |x - x'| <= 2^-11 |x| for |x| >= 2^-14,
 *         <= 2^-25 below (fp16's subnormals); NaN stays NaN, +-Inf stays;
 *   bf16  round to nearest even: |x - x'| <= 2^-8 |x| (float's range;
 *         subnormals alike, relative to their own spacing: <= 2^-134);
 *   int8  symmetric, scale = max |x| / 127 over its chunk of
 *         SN_CODEC_CHUNK values (of the values sent: the non-zeros in a
 *         sparse form): |x - x'| <= scale / 2 (and float's rounding of
 *         q * scale).
 *
 * Encoding and decoding are pure functions of the bytes: every process
 * decodes a message to the same bits.
 */
#ifndef SN_COMM_CODEC_H
#define SN_COMM_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum sn_codec {
    SN_CODEC_FP32 = 0, /* none: the floats as they are */
    SN_CODEC_FP16,
    SN_CODEC_BF16,
    SN_CODEC_INT8,
    SN_CODEC_COUNT
} sn_codec;

/* Values per int8 scale. */
#define SN_CODEC_CHUNK 256u
/* Bytes of an encoded message's header. */
#define SN_CODEC_HEADER 16u
/* The most values one message may hold (its bytes fit an int32). */
#define SN_CODEC_MAX_N ((size_t)0x1ffffff0u)
/* Seconds of conversion per float32 byte sent (encoding and decoding
 * together, on one core), for the planners: measured on this project's
 * machine at about 4 GB/s each way for fp16 and int8. */
#define SN_CODEC_S_PER_BYTE 0.5e-9

/* The forms of a message (its header's). */
typedef enum sn_codec_form {
    SN_CODEC_DENSE = 1,
    SN_CODEC_BITMAP,
    SN_CODEC_INDEX,
    SN_CODEC_RAW
} sn_codec_form;

/* "fp32", "fp16", "bf16", "int8"; "?" for no codec. */
const char *sn_codec_name(sn_codec c);

/* Bytes per float32 byte of a dense message of many values (fp32 1, fp16
 * and bf16 0.5, int8 about 0.254): what the planners count. */
double sn_codec_wire_ratio(sn_codec c);

/* The most bytes n values may encode to: SN_CODEC_HEADER + 4 n. */
size_t sn_codec_bound(size_t n);

/*
 * Encode x[0 .. n) (n <= SN_CODEC_MAX_N) in codec c (not SN_CODEC_FP32)
 * into out, which has sn_codec_bound(n) bytes; returns the bytes written
 * (0 for a codec or count it does not take).  *form, when not NULL, gets
 * the form chosen.
 */
size_t sn_codec_encode(sn_codec c, const float *x, size_t n, void *out,
                       sn_codec_form *form);

/*
 * Decode the message at in (at most `bytes` bytes: its header says how
 * many it has) into x[0 .. n): its count must be n.  *used, when not
 * NULL, gets the message's bytes (a message's end, where several lie back
 * to back).  SHARDNET_INTERNAL, naming what is wrong, for a message that
 * is not one (short, a count or form or codec it cannot have, a bitmap or
 * an index list that disagrees with its count, an index out of order).
 */
shardnet_status sn_codec_decode(const void *in, size_t bytes, float *x,
                                size_t n, size_t *used);

#endif /* SN_COMM_CODEC_H */
