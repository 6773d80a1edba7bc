/*
 * The seed experiment: classify the 10,000 Fashion-MNIST test images with
 * the 784-512-512-10 perceptron (tests/fixtures/fashion_mlp.onnx, trained by
 * tools/train_fashion_mnist.py) on every device the machine has (or those
 * chosen), with the plan the planner picks from measured device speeds;
 * print the plan and why it was chosen, the accuracy and the images per
 * second.
 *
 *   fashion_mnist [--devices all] [--split auto] [--model PATH] [--data DIR]
 *                 [--batch B]
 *
 * The images are read from Debian's dataset-fashion-mnist
 * (/usr/share/datasets/fashion-mnist/t10k-*-idx*-ubyte.gz), decompressed
 * through gzip.  Build against an installed shardnet with
 *     cc fashion_mnist.c $(pkg-config --cflags --libs shardnet)
 */
#include <shardnet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* Read a gzip-compressed IDX file: header of 4-byte big-endian words
 * (magic, then one size per dimension), then unsigned bytes. */
static unsigned char *read_idx(const char *path, int want_dims, uint32_t *dims)
{
    char cmd[4200];
    unsigned char head[16];
    unsigned char *data = NULL;
    size_t count = 1;
    FILE *f;
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    f = popen(cmd, "r");
    if (!f)
        return NULL;
    if (fread(head, 4, 1, f) != 1 || be32(head) != (uint32_t)(0x800 + want_dims) ||
        fread(head + 4, 4, (size_t)want_dims, f) != (size_t)want_dims)
        goto out;
    for (int i = 0; i < want_dims; i++) {
        dims[i] = be32(head + 4 + 4 * i);
        count *= dims[i];
    }
    if (count == 0 || count > (1u << 30) || !(data = malloc(count)))
        goto out;
    if (fread(data, 1, count, f) != count) {
        free(data);
        data = NULL;
    }
out:
    pclose(f);
    return data;
}

/* The planner's view after the first batch: each alternative with its
 * estimate, the choice and why, and what runs. */
static void print_plan(shardnet_session_t *s)
{
    size_t len = shardnet_session_describe(s, NULL, 0);
    char *text = malloc(len + 1);
    if (!text)
        return;
    shardnet_session_describe(s, text, len + 1);
    printf("plan:\n");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        printf("  %s\n", line);
    free(text);
}

int main(int argc, char **argv)
{
    const char *devices = "all", *split = NULL, *model_path = "tests/fixtures/fashion_mlp.onnx";
    const char *dir = "/usr/share/datasets/fashion-mnist";
    long batch = 1000;
    char path[4096];
    uint32_t idims[3], ldims[1];
    shardnet_context_t *ctx = NULL;
    shardnet_model_t *model = NULL;
    shardnet_session_t *s = NULL;
    shardnet_status st;
    int rc = 1;

    /* OpenBLAS may have taken slower kernels than this CPU deserves; the
     * choice is made at load time, so start again with the right ones. */
    const char *hint = shardnet_blas_coretype_hint();
    if (hint && !getenv("SHARDNET_NO_REEXEC")) {
        setenv("OPENBLAS_CORETYPE", hint, 1);
        execv("/proc/self/exe", argv);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--devices") && i + 1 < argc)
            devices = argv[++i];
        else if (!strcmp(argv[i], "--split") && i + 1 < argc)
            split = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_path = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: %s [--devices LIST] [--split none|layer|tensor|"
                    "hybrid|auto] [--model PATH] [--data DIR] [--batch B]\n"
                    "  --devices  default all: every device of the machine\n"
                    "  --split    default auto with several devices: the "
                    "planner chooses\n",
                    argv[0]);
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (batch < 1 || batch > 10000) {
        fprintf(stderr, "batch must be 1..10000\n");
        return 2;
    }

    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    unsigned char *images = read_idx(path, 3, idims);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    unsigned char *labels = read_idx(path, 1, ldims);
    if (!images || !labels || idims[1] * idims[2] != 784 ||
        idims[0] != ldims[0]) {
        fprintf(stderr, "cannot read the Fashion-MNIST test set from %s "
                        "(Debian package dataset-fashion-mnist)\n", dir);
        goto out;
    }
    size_t n = idims[0];
    float *x = malloc(n * 784 * sizeof *x);
    if (!x)
        goto out;
    for (size_t i = 0; i < n * 784; i++)
        x[i] = (float)images[i] / 255.0f; /* as in training */

    shardnet_session_options opt = {.split = split};
    if ((st = shardnet_context_create(&ctx)) != SHARDNET_OK ||
        (st = shardnet_model_load(model_path, &model)) != SHARDNET_OK ||
        (st = shardnet_session_create_with(ctx, model, devices, &opt, &s)) !=
            SHARDNET_OK) {
        fprintf(stderr, "shardnet: %s: %s\n", shardnet_status_str(st),
                shardnet_last_error());
        free(x);
        goto out;
    }

    size_t correct = 0;
    double t0 = 0;
    /* The first batch plans the model and uploads the weights: untimed. */
    for (int pass = 0; pass < 2; pass++) {
        correct = 0;
        t0 = now_s();
        for (size_t at = 0; at < n; at += (size_t)batch) {
            int64_t rows = (int64_t)(n - at < (size_t)batch ? n - at : (size_t)batch);
            int64_t dims[2] = {rows, 784};
            const void *out;
            shardnet_tensor_info info;
            if ((st = shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                                 dims, x + at * 784)) ||
                (st = shardnet_session_run(s)) ||
                (st = shardnet_session_output(s, 0, &info, &out))) {
                fprintf(stderr, "shardnet: %s\n", shardnet_last_error());
                free(x);
                goto out;
            }
            const float *logits = out;
            for (int64_t r = 0; r < rows; r++) {
                int best = 0;
                for (int c = 1; c < 10; c++)
                    if (logits[r * 10 + c] > logits[r * 10 + best])
                        best = c;
                correct += best == labels[at + (size_t)r];
            }
            if (pass == 0)
                break;
        }
        if (pass == 0)
            print_plan(s);
    }
    double dt = now_s() - t0;
    printf("batch %ld: accuracy %.2f%% (%zu of %zu), %.0f images/s\n", batch,
           100.0 * (double)correct / (double)n, correct, n, (double)n / dt);
    free(x);
    rc = 0;
out:
    free(images);
    free(labels);
    shardnet_session_free(s);
    shardnet_model_free(model);
    shardnet_context_free(ctx);
    return rc;
}
