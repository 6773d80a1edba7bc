/* Element types on the host: the 16-bit float conversions, reading any
 * element of a host value as an integer or a double and storing one (as
 * the lowerings that compute on the host do), and the conversions to and
 * from the float32 that devices compute in.  Lowering converts host data
 * on its way to a device (lower.c); running converts a float result back
 * to the output's type (run.c). */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"

size_t sn_rt_elements(const sn_rt *rt)
{
    size_t n = 1;
    for (int i = 0; i < rt->rank; i++)
        n *= (size_t)rt->dims[i];
    return n;
}

int sn_rt_is_host(const sn_rt *rt)
{
    return rt && rt->host != NULL;
}

/*
 * Element i of host data, whatever its alignment: initializers point into
 * the mapped model file, where raw_data need not be aligned.
 */
#define LOAD(type, p, i)                                                      \
    ({                                                                        \
        type v_;                                                              \
        memcpy(&v_, (const char *)(p) + (i) * sizeof(type), sizeof v_);       \
        v_;                                                                   \
    })

int64_t sn_rt_get_int(const sn_rt *rt, size_t i)
{
    const void *p = rt->host;
    switch (rt->dtype) {
    case SN_DT_INT64:
        return LOAD(int64_t, p, i);
    case SN_DT_INT32:
        return LOAD(int32_t, p, i);
    case SN_DT_INT16:
        return LOAD(int16_t, p, i);
    case SN_DT_INT8:
        return LOAD(int8_t, p, i);
    case SN_DT_UINT8:
    case SN_DT_BOOL:
        return LOAD(uint8_t, p, i);
    case SN_DT_UINT16:
        return LOAD(uint16_t, p, i);
    case SN_DT_UINT32:
        return LOAD(uint32_t, p, i);
    case SN_DT_UINT64:
        return (int64_t)LOAD(uint64_t, p, i);
    case SN_DT_FLOAT:
        return (int64_t)LOAD(float, p, i);
    case SN_DT_DOUBLE:
        return (int64_t)LOAD(double, p, i);
    case SN_DT_FLOAT16:
        return (int64_t)sn_half_to_float(LOAD(uint16_t, p, i));
    case SN_DT_BFLOAT16:
        return (int64_t)sn_bf16_to_float(LOAD(uint16_t, p, i));
    default:
        return 0;
    }
}

double sn_rt_get_double(const sn_rt *rt, size_t i)
{
    switch (rt->dtype) {
    case SN_DT_FLOAT:
        return LOAD(float, rt->host, i);
    case SN_DT_DOUBLE:
        return LOAD(double, rt->host, i);
    case SN_DT_FLOAT16:
        return sn_half_to_float(LOAD(uint16_t, rt->host, i));
    case SN_DT_BFLOAT16:
        return sn_bf16_to_float(LOAD(uint16_t, rt->host, i));
    default:
        return (double)sn_rt_get_int(rt, i);
    }
}

/* Host data of n elements of type t converted to float32 (malloc'ed). */
float *sn_to_float(sn_dtype t, const void *data, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    sn_rt tmp = {.dtype = t, .host = data};
    if (!f)
        return NULL;
    if (t == SN_DT_FLOAT) {
        memcpy(f, data, n * sizeof *f);
        return f;
    }
    for (size_t i = 0; i < n; i++)
        f[i] = (float)sn_rt_get_double(&tmp, i);
    return f;
}

int sn_dtype_is_integer(sn_dtype t)
{
    switch (t) {
    case SN_DT_INT64:
    case SN_DT_INT32:
    case SN_DT_INT16:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_UINT16:
    case SN_DT_UINT32:
    case SN_DT_UINT64:
    case SN_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

int sn_dtype_on_device(sn_dtype t)
{
    return t == SN_DT_FLOAT || t == SN_DT_DOUBLE || t == SN_DT_FLOAT16 ||
           t == SN_DT_BFLOAT16 || sn_dtype_is_integer(t);
}



void sn_store_value(sn_dtype t, void *p, size_t i, double dv, int64_t iv,
                    int is_int)
{
    switch (t) {
    case SN_DT_FLOAT:
        ((float *)p)[i] = is_int ? (float)iv : (float)dv;
        break;
    case SN_DT_DOUBLE:
        ((double *)p)[i] = is_int ? (double)iv : dv;
        break;
    case SN_DT_INT64:
        ((int64_t *)p)[i] = is_int ? iv : (int64_t)dv;
        break;
    case SN_DT_INT32:
        ((int32_t *)p)[i] = (int32_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_INT16:
        ((int16_t *)p)[i] = (int16_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_INT8:
        ((int8_t *)p)[i] = (int8_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT8:
        ((uint8_t *)p)[i] = (uint8_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT16:
        ((uint16_t *)p)[i] = (uint16_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT32:
        ((uint32_t *)p)[i] = (uint32_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT64:
        ((uint64_t *)p)[i] = (uint64_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_BOOL:
        ((uint8_t *)p)[i] = is_int ? iv != 0 : dv != 0.0;
        break;
    case SN_DT_FLOAT16:
        ((uint16_t *)p)[i] = sn_float_to_half(is_int ? (float)iv : (float)dv);
        break;
    case SN_DT_BFLOAT16:
        ((uint16_t *)p)[i] = sn_float_to_bf16(is_int ? (float)iv : (float)dv);
        break;
    default:
        break;
    }
}

/* Convert count floats into dtype t at dst. */
void sn_from_float(sn_dtype t, const float *src, void *dst, size_t count)
{
    for (size_t i = 0; i < count; i++)
        sn_store_value(t, dst, i, src[i], 0, 0);
}
