/*
 * Every ONNX node case (Debian package libonnx-testdata, data/node/) that
 * one device runs, run again split over two devices: under the tensor
 * split (every case) and under the layer split (cases whose graph has two
 * nodes or more), each output compared with the one device's.
 *
 *   split_cases [--data DIR]... [--pairs DEV+DEV,...] [--verbose] [CASE...]
 *
 * The cases: those of the ONNX test data and of tests/split_models (under
 * $SHARDNET_SRCDIR), or of each --data folder.  The pairs: cpu:0+cpu:1,
 * cpu:0+cl:0 and cl:0+cpu:0, and in a CUDA build cpu:0+cuda:0 and
 * cuda:0+cpu:0 (a pair this machine lacks is skipped, and counted).
 *
 * The one device is the first of each pair, and a case takes part only
 * when that device alone gives the case's expected outputs (the ONNX
 * tolerance: rtol 1e-3, atol 1e-5); the models of tests/split_models
 * must, and fail the run when they do not.  A split's answer must then
 * match the one device's: integers, booleans and 16-bit floats bit for
 * bit; float32 and float64 within 1e-6 + 1e-5 relative (a cut sum adds in
 * another order; on cpu:0+cpu:1 nearly all are bit-exact, and the count
 * is printed).  Pairs with an OpenCL or CUDA device compare with the
 * ONNX tolerance, and a case whose second device alone fails it is
 * skipped with that reason (the device's own failure, not the split's).
 *
 * Prints every failure and skip with its reason, then per pair and split
 * "N passed, N failed, N skipped", and a closing line "N passed, N failed"
 * (CI reads it); exits 1 when any case failed or none ran.
 */
#include <config.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "ir/graph.h"
#include "import/onnx.h"
#include "shardnet.h"
#include "tensorcheck.h"

#define DEFAULT_DATA "/usr/share/libonnx-testdata/data/node"
#define MAX_TENSORS 16
#define MAX_PAIRS 4

/* A run's outputs, copied out of the session. */
typedef struct result {
    size_t n;
    shardnet_tensor t[MAX_TENSORS];
} result;

static void result_release(result *r)
{
    for (size_t i = 0; i < r->n; i++)
        shardnet_tensor_free(&r->t[i]);
    r->n = 0;
}

/* Tolerances: 0 bit-exact, else |a - b| <= atol + rtol |b| for floats. */
typedef struct tol {
    double atol, rtol;
} tol;

static const tol onnx_tol = {1e-5, 1e-3};
static const tol split_tol = {1e-6, 1e-5};

/* Compare got with want; 1 equal, 0 not (why says where); *exact cleared
 * when they differ in any bit. */
static int compare(const shardnet_tensor *want, const shardnet_tensor *got,
                   tol t, int *exact, char *why, size_t cap)
{
    const shardnet_tensor_info *wi = &want->info, *gi = &got->info;
    size_t count, es;
    shardnet_dtype type;
    if (!same_layout(wi, gi, &count, &type, why, cap))
        return 0;
    es = shardnet_dtype_size(gi->dtype);
    if (!es || want->nbytes < count * es || got->nbytes < count * es) {
        snprintf(why, cap, "type %d: %zu and %zu bytes for %zu elements",
                 gi->dtype, want->nbytes, got->nbytes, count);
        return 0;
    }
    if (!count || !memcmp(want->data, got->data, count * es))
        return 1;
    *exact = 0;
    for (size_t i = 0; i < count; i++) {
        double w, g;
        if (wi->dtype == SHARDNET_DTYPE_FLOAT32) {
            w = ((const float *)want->data)[i];
            g = ((const float *)got->data)[i];
        } else if (wi->dtype == SHARDNET_DTYPE_FLOAT64) {
            w = ((const double *)want->data)[i];
            g = ((const double *)got->data)[i];
        } else {
            if (memcmp((const char *)want->data + i * es,
                       (const char *)got->data + i * es, es)) {
                snprintf(why, cap, "element %zu differs (type %d: compared "
                         "bit for bit)", i, gi->dtype);
                return 0;
            }
            continue;
        }
        if ((isnan(w) && isnan(g)) || w == g)
            continue;
        if (!(fabs(w - g) <= t.atol + t.rtol * fabs(w))) {
            snprintf(why, cap, "element %zu is %.9g, expected %.9g", i, g, w);
            return 0;
        }
    }
    return 1;
}

/*
 * Run case dir on devices (split: NULL for one device), its outputs into
 * *res.  1 ran, 0 failed (reason in why).
 */
static int run_case(shardnet_context_t *ctx, const char *dir,
                    const char *devices, const char *split, result *res,
                    char *why, size_t cap)
{
    char path[4400];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor in[MAX_TENSORS];
    shardnet_session_options opt = {.split = split};
    size_t nin, nout;
    int ok = 0;

    memset(in, 0, sizeof in);
    res->n = 0;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (shardnet_model_load(path, &m) != SHARDNET_OK) {
        snprintf(why, cap, "load: %s", shardnet_last_error());
        goto done;
    }
    nin = shardnet_model_input_count(m);
    nout = shardnet_model_output_count(m);
    if (nin > MAX_TENSORS || nout > MAX_TENSORS) {
        snprintf(why, cap, "%zu inputs and %zu outputs: at most %d each",
                 nin, nout, MAX_TENSORS);
        goto done;
    }
    if (shardnet_session_create_with(ctx, m, devices, split ? &opt : NULL,
                                     &s) != SHARDNET_OK) {
        snprintf(why, cap, "session: %s", shardnet_last_error());
        goto done;
    }
    for (size_t i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
        if (shardnet_tensor_load(path, &in[i]) != SHARDNET_OK ||
            shardnet_session_set_input(s, i, in[i].info.dtype,
                                       in[i].info.rank, in[i].info.dims,
                                       in[i].data) != SHARDNET_OK) {
            snprintf(why, cap, "input %zu: %s", i, shardnet_last_error());
            goto done;
        }
    }
    if (shardnet_session_run(s) != SHARDNET_OK) {
        snprintf(why, cap, "run: %s", shardnet_last_error());
        goto done;
    }
    for (size_t i = 0; i < nout; i++) {
        shardnet_tensor *t = &res->t[i];
        const void *data;
        size_t count = 1;
        if (shardnet_session_output(s, i, &t->info, &data) != SHARDNET_OK) {
            snprintf(why, cap, "output %zu: %s", i, shardnet_last_error());
            goto done;
        }
        res->n = i + 1;
        t->info.name = NULL; /* owned by the session */
        for (int k = 0; k < t->info.rank; k++)
            count *= (size_t)t->info.dims[k];
        t->nbytes = count * shardnet_dtype_size(t->info.dtype);
        if (!(t->data = malloc(t->nbytes ? t->nbytes : 1))) {
            snprintf(why, cap, "output %zu: out of memory", i);
            goto done;
        }
        if (t->nbytes)
            memcpy(t->data, data, t->nbytes);
    }
    ok = 1;
done:
    for (size_t i = 0; i < MAX_TENSORS; i++)
        shardnet_tensor_free(&in[i]);
    if (!ok)
        result_release(res);
    shardnet_session_free(s);
    shardnet_model_free(m);
    return ok;
}

/* Does res match the case's expected outputs? */
static int matches_expected(const char *dir, const result *res, char *why,
                            size_t cap)
{
    char path[4400], detail[512];
    int ok = 1, exact = 1;
    for (size_t i = 0; i < res->n && ok; i++) {
        shardnet_tensor want;
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%zu.pb", dir, i);
        if (shardnet_tensor_load(path, &want) != SHARDNET_OK) {
            snprintf(why, cap, "expected output %zu: %s", i,
                     shardnet_last_error());
            return 0;
        }
        if (!compare(&want, &res->t[i], onnx_tol, &exact, detail,
                     sizeof detail)) {
            snprintf(why, cap, "output %zu: %s", i, detail);
            ok = 0;
        }
        shardnet_tensor_free(&want);
    }
    return ok;
}

static int same_answer(const result *one, const result *split, tol t,
                       int *exact, char *why, size_t cap)
{
    char detail[512];
    if (one->n != split->n) {
        snprintf(why, cap, "%zu outputs, one device gave %zu", split->n,
                 one->n);
        return 0;
    }
    for (size_t i = 0; i < one->n; i++)
        if (!compare(&one->t[i], &split->t[i], t, exact, detail,
                     sizeof detail)) {
            snprintf(why, cap, "output %zu: %s", i, detail);
            return 0;
        }
    return 1;
}

/* Nodes of the case's graph as stored (before the loader's passes), or -1
 * when it cannot be read. */
static long count_nodes(const char *dir)
{
    char path[4400];
    sn_graph *g = NULL;
    long n;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (sn_onnx_load(path, &g) != SHARDNET_OK) {
        sn_error_clear();
        return -1;
    }
    n = (long)g->nnodes;
    sn_graph_free(g);
    return n;
}

typedef struct tally {
    size_t passed, failed, skipped, exact;
} tally;

typedef struct pair {
    char one[64], two[64], both[130];
    int gpu; /* an OpenCL or CUDA device: compared with the ONNX tolerance */
    tally split[2]; /* tensor, layer */
    size_t ref_failed;
} pair;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Micro-batches of the first stage in trace file path (0 when it cannot
 * be read). */
static size_t trace_micro(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t most = 0, n;
    const char *key = "\"micro-batch ";
    if (!f)
        return 0;
    /* Events are short: an event cut by the buffer's end is read whole in
     * the next read, which starts a little before it. */
    while ((n = fread(buf, 1, sizeof buf - 1, f)) > 0) {
        buf[n] = '\0';
        for (char *at = buf; (at = strstr(at, key)); at++) {
            size_t j;
            char stage[32];
            if (sscanf(at + strlen(key), "%zu (stage %31[^)])", &j, stage) ==
                    2 &&
                !strcmp(stage, "0") && j + 1 > most)
                most = j + 1;
        }
        if (n == sizeof buf - 1 && fseek(f, -64, SEEK_CUR) != 0)
            break;
        if (n < sizeof buf - 1)
            break;
    }
    fclose(f);
    return most;
}

/* One split of one case on one pair: counted in *ty.  micro: for the
 * layer split, 1 when the case's batch must run whole, 2 when it must be
 * cut into micro-batches, 0 when either may be. */
static void check_split(shardnet_context_t *ctx, const char *dir,
                        const char *name, pair *p, const char *split,
                        const result *one, tally *ty, int verbose,
                        size_t micro)
{
    result got = {0};
    char why[1024], trace[64] = "";
    int exact = 1, ran;
    if (micro) {
        int fd;
        snprintf(trace, sizeof trace, "/tmp/split_cases_XXXXXX");
        if ((fd = mkstemp(trace)) < 0 || close(fd) ||
            shardnet_trace_start() != SHARDNET_OK) {
            ty->failed++;
            printf("FAIL %s %s %s: cannot trace the run\n", split, p->both,
                   name);
            if (fd >= 0)
                unlink(trace);
            return;
        }
    }
    ran = run_case(ctx, dir, p->both, split, &got, why, sizeof why);
    if (micro) {
        size_t m = 0;
        if (shardnet_trace_stop(trace) == SHARDNET_OK)
            m = trace_micro(trace);
        unlink(trace);
        if (ran && (micro == 1 ? m != 1 : m < 2)) {
            ty->failed++;
            printf("FAIL %s %s %s: %zu micro-batches, expected %s\n", split,
                   p->both, name, m,
                   micro == 1 ? "one (its nodes mix the rows)"
                              : "several (its nodes keep the rows apart)");
            result_release(&got);
            return;
        }
    }
    if (!ran ||
        !same_answer(one, &got, p->gpu ? onnx_tol : split_tol, &exact, why,
                     sizeof why)) {
        /* The second device's own failure is not the split's. */
        result alone = {0};
        char why2[1024];
        if (!run_case(ctx, dir, p->two, NULL, &alone, why2, sizeof why2) ||
            !matches_expected(dir, &alone, why2, sizeof why2)) {
            ty->skipped++;
            printf("skip %s %s %s: %s alone fails the case (%s)\n", split,
                   p->both, name, p->two, why2);
        } else {
            ty->failed++;
            printf("FAIL %s %s %s: %s\n", split, p->both, name, why);
        }
        result_release(&alone);
    } else {
        ty->passed++;
        ty->exact += (size_t)exact;
        if (verbose)
            printf("ok   %s %s %s%s\n", split, p->both, name,
                   exact ? "" : " (within tolerance)");
    }
    result_release(&got);
    fflush(stdout);
}

/* The case folders ("test_*") of data, those named in only[0..nonly) if
 * any, appended to *cases as "data/name".  0 when data cannot be read. */
static int list_cases(const char *data, char *const *only, size_t nonly,
                      char ***cases, size_t *ncases)
{
    DIR *d = opendir(data);
    struct dirent *e;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        char **grown;
        size_t len = strlen(data) + strlen(e->d_name) + 2;
        if (strncmp(e->d_name, "test_", 5))
            continue;
        if (nonly) {
            size_t k;
            for (k = 0; k < nonly && strcmp(only[k], e->d_name); k++)
                ;
            if (k == nonly)
                continue;
        }
        if (!(grown = realloc(*cases, (*ncases + 1) * sizeof **cases)) ||
            !(grown[*ncases] = malloc(len))) {
            if (grown)
                *cases = grown;
            closedir(d);
            return 0;
        }
        snprintf(grown[*ncases], len, "%s/%s", data, e->d_name);
        *cases = grown;
        (*ncases)++;
    }
    closedir(d);
    return 1;
}

/* A case of tests/split_models: made to run, on one device too. */
static int ours(const char *dir)
{
    return strstr(dir, "split_models/") != NULL;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int main(int argc, char **argv)
{
    const char *data[8], *pairspec = NULL, *srcdir = getenv("SHARDNET_SRCDIR");
    char **cases = NULL, *only[256], own[4096], own_cases[4096];
    size_t ncases = 0, nonly = 0, ndata = 0, npairs = 0, unloadable = 0;
    size_t pairs_skipped = 0, own_failed = 0;
    int verbose = 0, rc = 0;
    shardnet_context_t *ctx;
    pair pairs[MAX_PAIRS];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc && ndata < 8)
            data[ndata++] = argv[++i];
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairspec = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (nonly < 256)
            only[nonly++] = argv[i];
    }
    if (!ndata) {
        /* The ONNX node cases, this project's own (old opsets, zero sizes:
         * tests/onnx_cases/node) and its models of the opset forms
         * (tests/split_models). */
        data[ndata++] = DEFAULT_DATA;
        snprintf(own_cases, sizeof own_cases, "%s/tests/onnx_cases/node",
                 srcdir ? srcdir : ".");
        data[ndata++] = own_cases;
        snprintf(own, sizeof own, "%s/tests/split_models",
                 srcdir ? srcdir : ".");
        data[ndata++] = own;
    }
    for (size_t i = 0; i < ndata; i++) {
        size_t from = ncases;
        if (!list_cases(data[i], only, nonly, &cases, &ncases)) {
            printf("split_cases: cannot read the cases of %s (the ONNX "
                   "node cases come with Debian's libonnx-testdata)\n"
                   "0 passed, 1 failed\n",
                   data[i]);
            return 1;
        }
        qsort(cases + from, ncases - from, sizeof *cases, by_name);
    }
    if (!ncases) {
        printf("split_cases: no case\n0 passed, 1 failed\n");
        return 1;
    }
    if (shardnet_context_create(&ctx) != SHARDNET_OK) {
        printf("split_cases: %s\n", shardnet_last_error());
        return 1;
    }

    /* The pairs: as told, else two CPU packages and, with OpenCL, a CPU
     * and an OpenCL device. */
    char spec[512];
    size_t idx[2], nsel;
    snprintf(spec, sizeof spec, "%s",
             pairspec ? pairspec
                      : "cpu:0+cpu:1,cpu:0+cl:0,cl:0+cpu:0"
#ifdef SN_HAVE_CUDA
                        ",cpu:0+cuda:0,cuda:0+cpu:0"
#endif
             );
    for (char *save = NULL, *t = strtok_r(spec, ",", &save);
         t && npairs < MAX_PAIRS; t = strtok_r(NULL, ",", &save)) {
        pair *p = &pairs[npairs];
        char *plus = strchr(t, '+');
        memset(p, 0, sizeof *p);
        if (!plus || (size_t)(plus - t) >= sizeof p->one ||
            strlen(plus + 1) >= sizeof p->two) {
            printf("split_cases: pair '%s': expected DEV+DEV\n", t);
            return 1;
        }
        *plus = '\0';
        snprintf(p->one, sizeof p->one, "%s", t);
        snprintf(p->two, sizeof p->two, "%s", plus + 1);
        snprintf(p->both, sizeof p->both, "%s,%s", t, plus + 1);
        /* Their products sum in other orders than the CPU's (cuBLAS's by
         * shape: 2e-6 apart in 0.06 seen on an H200). */
        p->gpu = strstr(p->both, "cl:") || strstr(p->both, "cuda:");
        if (shardnet_devices_select(ctx, p->both, idx, 2, &nsel) !=
            SHARDNET_OK) {
            /* Counted, never silent: a pair this machine lacks. */
            printf("skip pair %s: %s\n", p->both, shardnet_last_error());
            pairs_skipped++;
            continue;
        }
        npairs++;
    }
    if (!npairs) {
        printf("split_cases: no pair of devices\n0 passed, 1 failed\n");
        shardnet_context_free(ctx);
        return 1;
    }

    for (size_t c = 0; c < ncases; c++) {
        char model[4200], why[1024];
        const char *dir = cases[c], *name = base_name(cases[c]);
        struct stat stt;
        long nodes;
        snprintf(model, sizeof model, "%s/model.onnx", dir);
        if (stat(model, &stt) != 0)
            continue;
        if ((nodes = count_nodes(dir)) < 0) {
            if (ours(dir)) {
                own_failed++;
                printf("FAIL %s: cannot be imported\n", name);
                continue;
            }
            unloadable++;
            if (verbose)
                printf("not run %s: cannot be imported\n", name);
            continue;
        }
        for (size_t k = 0; k < npairs; k++) {
            pair *p = &pairs[k];
            result one = {0};
            if (!run_case(ctx, dir, p->one, NULL, &one, why, sizeof why) ||
                !matches_expected(dir, &one, why, sizeof why)) {
                p->ref_failed++;
                if (ours(dir)) {
                    own_failed++;
                    printf("FAIL %s on %s alone: %s\n", name, p->one, why);
                } else if (verbose)
                    printf("not run %s on %s: fails on one device (%s)\n",
                           name, p->one, why);
                result_release(&one);
                continue;
            }
            check_split(ctx, dir, name, p, "tensor", &one, &p->split[0],
                        verbose, 0);
            /* tests/split_models: a batch whose rows its nodes mix runs
             * whole, the others in micro-batches */
            if (nodes >= 2)
                check_split(ctx, dir, name, p, "layer", &one,
                            &p->split[1], verbose,
                            !ours(dir)                ? 0
                            : strstr(name, "_mixed_") ? 1
                                                      : 2);
            result_release(&one);
        }
    }

    size_t passed = 0, failed = 0, skipped = 0;
    printf("split_cases: %zu cases, %zu cannot be imported\n", ncases,
           unloadable);
    for (size_t k = 0; k < npairs; k++) {
        pair *p = &pairs[k];
        printf("%s: %zu cases fail on %s alone (not run split)\n", p->both,
               p->ref_failed, p->one);
        for (int s = 0; s < 2; s++) {
            tally *ty = &p->split[s];
            printf("%s %s: %zu passed (%zu bit-exact), %zu failed, %zu "
                   "skipped\n",
                   s ? "layer" : "tensor", p->both, ty->passed, ty->exact,
                   ty->failed, ty->skipped);
            passed += ty->passed;
            failed += ty->failed;
            skipped += ty->skipped;
        }
    }
    if (own_failed)
        printf("%zu runs of tests/split_models failed on one device\n",
               own_failed);
    failed += own_failed;
    printf("split_cases: %zu skipped, %zu pairs of devices skipped\n",
           skipped, pairs_skipped);
    printf("%zu passed, %zu failed\n", passed, failed);
    if (failed || !passed)
        rc = 1;
    for (size_t c = 0; c < ncases; c++)
        free(cases[c]);
    free(cases);
    shardnet_context_free(ctx);
    return rc;
}
