/* Comparing two tensor files: see compare.h. */
#include <config.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compare.h"
#include "exec/exec.h"
#include "shardnet.h"

/* Element i of a floating-point tensor as a double; 0 when the type is
 * not floating point (*is_float tells). */
static double float_at(const shardnet_tensor *t, size_t i, int *is_float)
{
    const unsigned char *p = t->data;
    *is_float = 1;
    switch (t->info.dtype) {
    case SHARDNET_DTYPE_FLOAT32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case SHARDNET_DTYPE_FLOAT64: {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    case SHARDNET_DTYPE_FLOAT16:
    case SHARDNET_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return t->info.dtype == SHARDNET_DTYPE_FLOAT16 ? sn_half_to_float(h)
                                                       : sn_bf16_to_float(h);
    }
    default:
        *is_float = 0;
        return 0;
    }
}

static void shape_text(const shardnet_tensor *t, char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->info.rank && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "",
                               (long long)t->info.dims[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
}

int sn_test_compare(const char *want, const char *got, double tol,
                    FILE *report)
{
    shardnet_tensor x, y;
    if (shardnet_tensor_load(want, &x) != SHARDNET_OK) {
        fprintf(report, "CANNOT READ the reference: %s\n",
                shardnet_last_error());
        return 2;
    }
    if (shardnet_tensor_load(got, &y) != SHARDNET_OK) {
        fprintf(report, "CANNOT READ the answer: %s\n", shardnet_last_error());
        shardnet_tensor_free(&x);
        return 2;
    }
    int rc = 0;
    char sx[256], sy[256];
    shape_text(&x, sx, sizeof sx);
    shape_text(&y, sy, sizeof sy);
    if (x.info.dtype != y.info.dtype || strcmp(sx, sy) != 0 ||
        x.nbytes != y.nbytes) {
        fprintf(report,
                "DIFFERENT: %s has type %d and shape %s, %s type %d and "
                "shape %s\n",
                want, (int)x.info.dtype, sx, got, (int)y.info.dtype, sy);
        rc = 1;
        goto done;
    }
    size_t esize = shardnet_dtype_size(x.info.dtype);
    if (!esize) {
        fprintf(report, "CANNOT COMPARE elements of type %d\n",
                (int)x.info.dtype);
        rc = 2;
        goto done;
    }
    size_t n = x.nbytes / esize;
    double worst = 0;
    int is_float;
    float_at(&x, 0, &is_float);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *a = (const unsigned char *)x.data + i * esize;
        const unsigned char *b = (const unsigned char *)y.data + i * esize;
        int same;
        double p = 0, q = 0, rel = 0;
        if (!is_float || tol == 0) {
            same = memcmp(a, b, esize) == 0;
            if (is_float) {
                p = float_at(&x, i, &is_float);
                q = float_at(&y, i, &is_float);
                rel = fabs(p - q) / (1.0 + fabs(p));
            }
        } else {
            p = float_at(&x, i, &is_float);
            q = float_at(&y, i, &is_float);
            if (isnan(p) || isnan(q)) {
                same = isnan(p) && isnan(q);
            } else if (isinf(p) || isinf(q)) {
                same = p == q;
            } else {
                rel = fabs(p - q) / (1.0 + fabs(p));
                same = rel <= tol;
            }
        }
        if (!isnan(rel) && rel > worst)
            worst = rel;
        if (!same) {
            if (is_float)
                fprintf(report,
                        "DIFFERENT: element %zu of %zu is %.9g, the "
                        "reference %.9g (tolerance %g)\n",
                        i, n, q, p, tol);
            else
                fprintf(report,
                        "DIFFERENT: element %zu of %zu differs (type %d, "
                        "compared exactly)\n",
                        i, n, (int)x.info.dtype);
            rc = 1;
            goto done;
        }
    }
    fprintf(report, "%s (%zu elements, largest relative difference %.2e)\n",
            tol == 0 || !is_float ? "identical" : "within tolerance", n,
            worst);
done:
    shardnet_tensor_free(&x);
    shardnet_tensor_free(&y);
    return rc;
}
