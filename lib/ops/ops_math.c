/*
 * The element-wise ops evaluated on the host, one value at a time: what
 * folding a known tensor computes (ops_elementwise.c, ops_logic.c).  Float
 * types in double, integer and bool types in int64 (uint64 as unsigned
 * where the sign matters), each as backend.h's sn_binary_op and
 * sn_unary_op define the op on the device, plus the integer-only ops
 * (bit shifts) that have no device kernel.  Division and remainder by
 * zero and out-of-range shifts give 0 rather than trap.
 */
#include <config.h>

#include <math.h>
#include <stdint.h>

#include "ops/ops.h"

/* numpy's remainder of integers: the divisor's sign. */
static int64_t int_mod(int64_t a, int64_t b, int uns)
{
    int64_t r;
    if (b == 0)
        return 0;
    if (uns)
        return (int64_t)((uint64_t)a % (uint64_t)b);
    if (b == -1)
        return 0; /* and INT64_MIN % -1 would trap */
    r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static int64_t int_pow(int64_t a, int64_t b)
{
    uint64_t r = 1;
    if (b < 0)
        return 0;
    for (int64_t i = 0; i < b && i < 64; i++)
        r *= (uint64_t)a;
    return (int64_t)r;
}

int64_t sn_fold_int(int op, int64_t a, int64_t b, int uns)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case SN_BINARY_ADD:
        return (int64_t)(ua + ub);
    case SN_BINARY_SUB:
        return (int64_t)(ua - ub);
    case SN_BINARY_MUL:
        return (int64_t)(ua * ub);
    case SN_BINARY_DIV:
        if (b == 0)
            return 0;
        if (uns)
            return (int64_t)(ua / ub);
        return a == INT64_MIN && b == -1 ? 0 : a / b;
    case SN_BINARY_MAX:
        return (uns ? ua > ub : a > b) ? a : b;
    case SN_BINARY_MIN:
        return (uns ? ua < ub : a < b) ? a : b;
    case SN_BINARY_POW:
        return int_pow(a, b);
    case SN_BINARY_MOD:
        return int_mod(a, b, uns);
    case SN_BINARY_FMOD: /* C's %: the dividend's sign */
        if (b == 0 || (!uns && b == -1))
            return 0;
        return uns ? (int64_t)(ua % ub) : a % b;
    case SN_BINARY_EQUAL:
        return a == b;
    case SN_BINARY_GREATER:
        return uns ? ua > ub : a > b;
    case SN_BINARY_GREATER_EQUAL:
        return uns ? ua >= ub : a >= b;
    case SN_BINARY_AND:
        return a != 0 && b != 0;
    case SN_BINARY_OR:
        return a != 0 || b != 0;
    case SN_BINARY_XOR:
        return (a != 0) != (b != 0);
    case SN_BINARY_PRELU:
        return a < 0 ? (int64_t)(ua * ub) : a;
    case SN_FOLD_SHIFT_LEFT:
        return ub >= 64 ? 0 : (int64_t)(ua << ub);
    case SN_FOLD_SHIFT_RIGHT:
        return ub >= 64 ? 0 : (int64_t)(ua >> ub);
    default:
        return 0;
    }
}

double sn_fold_double(int op, double a, double b)
{
    double r;
    switch (op) {
    case SN_BINARY_ADD:
        return a + b;
    case SN_BINARY_SUB:
        return a - b;
    case SN_BINARY_MUL:
        return a * b;
    case SN_BINARY_DIV:
        return a / b;
    case SN_BINARY_MAX:
        return fmax(a, b);
    case SN_BINARY_MIN:
        return fmin(a, b);
    case SN_BINARY_POW:
        return pow(a, b);
    case SN_BINARY_MOD:
        r = fmod(a, b);
        return r != 0.0 && (r < 0.0) != (b < 0.0) ? r + b : r;
    case SN_BINARY_FMOD:
        return fmod(a, b);
    case SN_BINARY_EQUAL:
        return a == b;
    case SN_BINARY_GREATER:
        return a > b;
    case SN_BINARY_GREATER_EQUAL:
        return a >= b;
    case SN_BINARY_AND:
        return a != 0.0 && b != 0.0;
    case SN_BINARY_OR:
        return a != 0.0 || b != 0.0;
    case SN_BINARY_XOR:
        return (a != 0.0) != (b != 0.0);
    case SN_BINARY_PRELU:
        return a < 0.0 ? b * a : a;
    default:
        return NAN;
    }
}

/* log(1 + exp(x)) without overflow. */
static double softplus(double x)
{
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/* The ops of sn_unary_desc's first list. */
static double unary_basic(sn_unary_op op, double x, double alpha,
                          double beta)
{
    double t;
    switch (op) {
    case SN_UNARY_RELU:
        return x < 0.0 ? 0.0 : x;
    case SN_UNARY_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case SN_UNARY_TANH:
        return tanh(x);
    case SN_UNARY_ERF:
        return erf(x);
    case SN_UNARY_EXP:
        return exp(x);
    case SN_UNARY_LOG:
        return log(x);
    case SN_UNARY_SQRT:
        return sqrt(x);
    case SN_UNARY_NEG:
        return -x;
    case SN_UNARY_ABS:
        return fabs(x);
    case SN_UNARY_LEAKY_RELU:
        return x < 0.0 ? alpha * x : x;
    case SN_UNARY_HARD_SIGMOID:
        t = alpha * x + beta;
        t = t > 1.0 ? 1.0 : t;
        return t < 0.0 ? 0.0 : t;
    case SN_UNARY_CLIP:
        t = x < alpha ? alpha : x;
        return t > beta ? beta : t;
    case SN_UNARY_CLIP_GATE: { /* in float, as the device computes it */
        const float v = (float)x, a = (float)alpha, b = (float)beta;
        float c = v + a;
        c = c < 0.0f ? 0.0f : c;
        c = c > b ? b : c;
        c = v * c;
        return c / b;
    }
    case SN_UNARY_GELU:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case SN_UNARY_GELU_TANH:
        return 0.5 * x *
               (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default:
        return NAN;
    }
}

double sn_fold_unary(sn_unary_op op, double x, double alpha, double beta)
{
    double t;
    switch (op) {
    case SN_UNARY_SIN:
        return sin(x);
    case SN_UNARY_COS:
        return cos(x);
    case SN_UNARY_TAN:
        return tan(x);
    case SN_UNARY_ASIN:
        return asin(x);
    case SN_UNARY_ACOS:
        return acos(x);
    case SN_UNARY_ATAN:
        return atan(x);
    case SN_UNARY_SINH:
        return sinh(x);
    case SN_UNARY_COSH:
        return cosh(x);
    case SN_UNARY_ASINH:
        return asinh(x);
    case SN_UNARY_ACOSH:
        return acosh(x);
    case SN_UNARY_ATANH:
        return atanh(x);
    case SN_UNARY_CEIL:
        return ceil(x);
    case SN_UNARY_FLOOR:
        return floor(x);
    case SN_UNARY_ROUND:
        return nearbyint(x); /* the default rounding: halves to even */
    case SN_UNARY_SIGN:
        return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x;
    case SN_UNARY_ELU:
        return x < 0.0 ? alpha * expm1(x) : x;
    case SN_UNARY_SELU:
        return x <= 0.0 ? beta * (alpha * expm1(x)) : beta * x;
    case SN_UNARY_CELU: /* the exponential term has x's sign */
        return x > 0.0 ? x : alpha * expm1(x / alpha);
    case SN_UNARY_SOFTPLUS:
        return softplus(x);
    case SN_UNARY_SOFTSIGN:
        return x / (1.0 + fabs(x));
    case SN_UNARY_THRESHOLDED_RELU:
        return x > alpha ? x : 0.0;
    case SN_UNARY_SHRINK:
        return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0;
    case SN_UNARY_HARD_SWISH:
        t = x / 6.0 + 0.5;
        t = t > 1.0 ? 1.0 : t;
        return x * (t < 0.0 ? 0.0 : t);
    case SN_UNARY_MISH:
        return x * tanh(softplus(x));
    case SN_UNARY_ISNAN:
        return isnan(x) ? 1.0 : 0.0;
    case SN_UNARY_ISINF:
        return isinf(x) && ((x > 0.0 && alpha != 0.0) ||
                            (x < 0.0 && beta != 0.0));
    default:
        return unary_basic(op, x, alpha, beta);
    }
}

int sn_fold_unary_int(sn_unary_op op, int64_t x, double alpha, double beta,
                      int64_t *out)
{
    switch (op) {
    case SN_UNARY_NEG:
        *out = (int64_t)(0 - (uint64_t)x);
        return 1;
    case SN_UNARY_ABS:
        *out = x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
        return 1;
    case SN_UNARY_SIGN:
        *out = (x > 0) - (x < 0);
        return 1;
    case SN_UNARY_RELU:
        *out = x < 0 ? 0 : x;
        return 1;
    case SN_UNARY_CLIP:
        *out = (double)x < alpha ? (int64_t)alpha : x;
        *out = (double)*out > beta ? (int64_t)beta : *out;
        return 1;
    default:
        return 0;
    }
}
