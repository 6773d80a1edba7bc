/*
 * ONNX conformance: every case of the ONNX backend test data (Debian
 * package libonnx-testdata, data/node/) whose operators are all among those
 * this version promises, run on a CPU device and on an OpenCL device, each
 * output compared with the expected one.
 *
 *   conformance [--data DIR] [--devices cpu:0,cl:0] [--verbose] [CASE...]
 *
 * Prints every failure with its reason and one line per device,
 * "cpu:0: N passed, N failed"; exits 1 when fewer than 95% pass on a
 * device, or when no case ran.
 */
#include <config.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph.h"
#include "shardnet.h"

#define DEFAULT_DATA "/usr/share/libonnx-testdata/data/node"
#define MAX_TENSORS 16

/* The operators of the models milestone. */
static const char *const promised[] = {
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log",
    "Erf", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Gelu",
    "Clip", "Softmax", "LogSoftmax", "LayerNormalization",
    "BatchNormalization", "Conv", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Flatten", "Reshape", "Transpose", "Concat", "Split",
    "Slice", "Gather", "Squeeze", "Unsqueeze", "Shape", "Cast", "Constant",
    "ConstantOfShape", "Expand", "Where", "Identity", "Dropout", "ReduceMean",
    "ReduceSum", "ReduceMax"};

static int is_promised(const char *op)
{
    for (size_t i = 0; i < sizeof promised / sizeof promised[0]; i++)
        if (!strcmp(promised[i], op))
            return 1;
    return 0;
}

/* Do all the case's nodes use promised operators?  (Read from the raw
 * graph: the loader's passes may have folded some away.) */
static int case_applies(const char *model_path, char *why, size_t cap)
{
    sn_graph *g = NULL;
    int ok = 1;
    if (sn_onnx_load(model_path, &g) != SHARDNET_OK) {
        snprintf(why, cap, "load: %s", shardnet_last_error());
        return -1;
    }
    for (size_t i = 0; i < g->nnodes && ok; i++)
        if ((g->nodes[i].domain[0] && strcmp(g->nodes[i].domain, "ai.onnx")) ||
            !is_promised(g->nodes[i].op_type))
            ok = 0;
    sn_graph_free(g);
    return ok;
}

static int compare(const shardnet_tensor *want, const shardnet_tensor_info *gi,
                   const void *got, char *why, size_t cap)
{
    const shardnet_tensor_info *wi = &want->info;
    size_t count = 1;
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
        count *= (size_t)wi->dims[i];
    }
    if (wi->dtype != gi->dtype &&
        !(wi->dtype == SHARDNET_DTYPE_UINT16 &&
          (gi->dtype == SHARDNET_DTYPE_BFLOAT16 ||
           gi->dtype == SHARDNET_DTYPE_FLOAT16))) {
        snprintf(why, cap, "type %d, expected %d", gi->dtype, wi->dtype);
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        double w, g;
        switch (wi->dtype) {
        case SHARDNET_DTYPE_FLOAT32:
            w = ((const float *)want->data)[i];
            g = ((const float *)got)[i];
            break;
        case SHARDNET_DTYPE_FLOAT64:
            w = ((const double *)want->data)[i];
            g = ((const double *)got)[i];
            break;
        case SHARDNET_DTYPE_INT64:
            w = (double)((const int64_t *)want->data)[i];
            g = (double)((const int64_t *)got)[i];
            break;
        case SHARDNET_DTYPE_INT32:
            w = ((const int32_t *)want->data)[i];
            g = ((const int32_t *)got)[i];
            break;
        case SHARDNET_DTYPE_FLOAT16:
        case SHARDNET_DTYPE_BFLOAT16:
        case SHARDNET_DTYPE_UINT16:
        case SHARDNET_DTYPE_INT16: /* conversions must be bit-exact */
            w = ((const uint16_t *)want->data)[i];
            g = ((const uint16_t *)got)[i];
            break;
        default:
            w = ((const unsigned char *)want->data)[i];
            g = ((const unsigned char *)got)[i];
        }
        if ((isnan(w) && isnan(g)) || w == g)
            continue;
        /* The ONNX backend tests' own tolerance: rtol 1e-3, atol 1e-7;
         * atol raised to 1e-5 for float32 sums in another order. */
        if (!(fabs(w - g) <= 1e-5 + 1e-3 * fabs(w))) {
            snprintf(why, cap, "element %zu is %.9g, expected %.9g", i, g, w);
            return 0;
        }
    }
    return 1;
}

/* Run one case on one device; 1 pass, 0 fail (reason in why). */
static int run_case(shardnet_context_t *ctx, const char *dir,
                    const char *device, char *why, size_t cap)
{
    char path[4400];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor in[MAX_TENSORS], out[MAX_TENSORS];
    size_t nin, nout;
    int ok = 0;
    shardnet_status st;

    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if ((st = shardnet_model_load(path, &m)) != SHARDNET_OK) {
        snprintf(why, cap, "load: %s", shardnet_last_error());
        goto done;
    }
    nin = shardnet_model_input_count(m);
    nout = shardnet_model_output_count(m);
    if (nin > MAX_TENSORS || nout > MAX_TENSORS) {
        snprintf(why, cap, "too many inputs or outputs");
        goto done;
    }
    if ((st = shardnet_session_create(ctx, m, device, &s)) != SHARDNET_OK) {
        snprintf(why, cap, "session: %s", shardnet_last_error());
        goto done;
    }
    for (size_t i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
        if ((st = shardnet_tensor_load(path, &in[i])) != SHARDNET_OK ||
            (st = shardnet_session_set_input(s, i, in[i].info.dtype,
                                             in[i].info.rank, in[i].info.dims,
                                             in[i].data)) != SHARDNET_OK) {
            snprintf(why, cap, "input %zu: %s", i, shardnet_last_error());
            goto done;
        }
    }
    if ((st = shardnet_session_run(s)) != SHARDNET_OK) {
        snprintf(why, cap, "run: %s", shardnet_last_error());
        goto done;
    }
    for (size_t i = 0; i < nout; i++) {
        shardnet_tensor_info gi;
        const void *got;
        char detail[512];
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%zu.pb", dir, i);
        if ((st = shardnet_tensor_load(path, &out[i])) != SHARDNET_OK) {
            snprintf(why, cap, "expected output %zu: %s", i,
                     shardnet_last_error());
            goto done;
        }
        shardnet_session_output(s, i, &gi, &got);
        if (!compare(&out[i], &gi, got, detail, sizeof detail)) {
            snprintf(why, cap, "output %zu: %s", i, detail);
            goto done;
        }
    }
    ok = 1;
done:
    for (size_t i = 0; i < MAX_TENSORS; i++) {
        shardnet_tensor_release(&in[i]);
        shardnet_tensor_release(&out[i]);
    }
    shardnet_session_free(s);
    shardnet_model_free(m);
    return ok;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *data = DEFAULT_DATA, *devspec = NULL;
    char **cases = NULL, *only[256];
    size_t ncases = 0, nonly = 0;
    int verbose = 0, rc = 0;
    shardnet_context_t *ctx;
    DIR *d;
    struct dirent *e;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--devices") && i + 1 < argc)
            devspec = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (nonly < 256)
            only[nonly++] = argv[i];
    }
    d = opendir(data);
    if (!d) {
        printf("conformance: no ONNX test data at %s (Debian package "
               "libonnx-testdata)\n",
               data);
        return 1;
    }
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5))
            continue;
        if (nonly) {
            size_t k;
            for (k = 0; k < nonly && strcmp(only[k], e->d_name); k++)
                ;
            if (k == nonly)
                continue;
        }
        cases = realloc(cases, (ncases + 1) * sizeof *cases);
        cases[ncases++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(cases, ncases, sizeof *cases, by_name);

    if (shardnet_context_create(&ctx) != SHARDNET_OK) {
        printf("conformance: %s\n", shardnet_last_error());
        return 1;
    }
    /* One device of each kind present, unless told. */
    const char *devs[8];
    size_t ndev = 0;
    char spec_copy[256];
    if (devspec) {
        snprintf(spec_copy, sizeof spec_copy, "%s", devspec);
        for (char *t = strtok(spec_copy, ","); t && ndev < 8;
             t = strtok(NULL, ","))
            devs[ndev++] = t;
    } else {
        size_t idx;
        devs[ndev++] = "cpu:0";
        if (shardnet_devices_select(ctx, "cl:0", &idx, 1, &idx) == SHARDNET_OK)
            devs[ndev++] = "cl:0";
    }

    size_t applicable = 0, passed[8] = {0}, failed[8] = {0}, skipped = 0;
    size_t unloadable = 0;
    for (size_t c = 0; c < ncases; c++) {
        char dir[4096], model[4200], why[1024];
        struct stat stt;
        snprintf(dir, sizeof dir, "%s/%s", data, cases[c]);
        snprintf(model, sizeof model, "%s/model.onnx", dir);
        if (stat(model, &stt) != 0)
            continue;
        int ap = case_applies(model, why, sizeof why);
        if (ap < 0) { /* opset < 7, training domains, ...: out of scope */
            unloadable++;
            if (verbose)
                printf("skip %s: %s\n", cases[c], why);
            continue;
        }
        if (ap == 0) {
            skipped++;
            continue;
        }
        applicable++;
        for (size_t k = 0; k < ndev; k++) {
            if (!run_case(ctx, dir, devs[k], why, sizeof why)) {
                failed[k]++;
                printf("FAIL %s %s: %s\n", devs[k], cases[c], why);
            } else {
                passed[k]++;
                if (verbose)
                    printf("ok   %s %s\n", devs[k], cases[c]);
            }
            fflush(stdout);
        }
    }
    printf("conformance: %zu cases use only the promised operators; %zu use "
           "others and %zu cannot be imported (opset below 7, training "
           "domains, sequence types; --verbose lists them): not run\n",
           applicable, skipped, unloadable);
    for (size_t k = 0; k < ndev; k++) {
        double rate = passed[k] + failed[k]
                          ? 100.0 * (double)passed[k] /
                                (double)(passed[k] + failed[k])
                          : 0.0;
        printf("%s: %zu passed, %zu failed (%.1f%%)\n", devs[k], passed[k],
               failed[k], rate);
        if (passed[k] == 0 || rate < 95.0)
            rc = 1;
    }
    for (size_t c = 0; c < ncases; c++)
        free(cases[c]);
    free(cases);
    shardnet_context_free(ctx);
    return rc;
}
