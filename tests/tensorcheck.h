/*
 * The layout half of comparing an answer with a node case's expected
 * tensor, shared by tests/conformance.c and tests/split_cases.c: the same
 * rank and dimensions, and the same element type, where the ONNX test data
 * may store float16 and bfloat16 results as their uint16 bit patterns.
 */
#ifndef SN_TENSORCHECK_H
#define SN_TENSORCHECK_H

#include <shardnet.h>
#include <stdio.h>

/* 1 when gi has wi's shape and type: *count its elements, *type the type
 * both are read as; else 0, why says what differs. */
static inline int same_layout(const shardnet_tensor_info *wi,
                              const shardnet_tensor_info *gi, size_t *count,
                              shardnet_dtype *type, char *why, size_t cap)
{
    shardnet_dtype wt = wi->dtype;
    *count = 1;
    if (wi->rank != gi->rank) {
        snprintf(why, cap, "rank %d, expected %d", gi->rank, wi->rank);
        return 0;
    }
    for (int i = 0; i < wi->rank; i++) {
        if (wi->dims[i] != gi->dims[i]) {
            snprintf(why, cap, "dimension %d is %lld, expected %lld", i,
                     (long long)gi->dims[i], (long long)wi->dims[i]);
            return 0;
        }
        *count *= (size_t)wi->dims[i];
    }
    if (wt == SHARDNET_DTYPE_UINT16 && (gi->dtype == SHARDNET_DTYPE_BFLOAT16 ||
                                        gi->dtype == SHARDNET_DTYPE_FLOAT16))
        wt = gi->dtype;
    if (wt != gi->dtype) {
        snprintf(why, cap, "type %d, expected %d", gi->dtype, wi->dtype);
        return 0;
    }
    *type = wt;
    return 1;
}

#endif
