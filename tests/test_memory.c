/*
 * Memory a big model really takes (issue 16): the process's peak resident
 * memory (VmHWM, reset between cases through /proc/self/clear_refs) while
 * one session loads, plans and runs a model, against the model's weights.
 *
 *   test_memory MODEL.onnx DEVICES SPLIT MAX_RATIO [BATCH [REF_BYTES
 *               [HELD_RATIO]]]
 *
 * loads MODEL, creates a session on DEVICES (a device list; SPLIT none,
 * layer, tensor or auto), runs it twice at batch BATCH (default 1) on
 * inputs of zeros and reports, one "key value" per line: the weights'
 * bytes as fp32 (REF_BYTES, or 4 per parameter of the file: a quantized
 * model's fp32 form is the reference its ratio is taken against), the peak resident memory the load, the first run and the second
 * run added to what the process held before, their ratio to the weights,
 * the first and second run's seconds, and what the session's description
 * says each device holds.  It fails (exit 1) when the peak exceeds
 * MAX_RATIO times the weights plus the activations' bound (64 MB: inputs,
 * outputs, arenas and the runtime's own buffers), or where the devices'
 * weights, as the session describes them, are over HELD_RATIO (default
 * 1.1) times the weights or more than 15% away from the peak.  tests/test_memory.sh
 * makes the model (tools/make_big_model) and states the bounds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <unistd.h>

#include "shardnet.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Under AddressSanitizer the process's resident memory is mostly the
 * sanitizer's (shadow memory, the quarantine of freed blocks): the peaks
 * are reported, not checked. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Slack for what is not weights: activations, arenas, thread stacks,
 * OpenBLAS's and PoCL's own buffers. */
#define ACTIVATIONS (64.0 * 1024 * 1024)

/* A field of /proc/self/status in bytes ("VmHWM:", "VmRSS:"); -1. */
static double status_kb(const char *key)
{
    char line[256];
    double v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0) {
            v = atof(line + strlen(key)) * 1024;
            break;
        }
    fclose(f);
    return v;
}

/* Drops path's pages from the page cache (the next read comes from the
 * disk) and, with timed, reads it whole first: the seconds that took. */
static double cold_read(const char *path, int timed)
{
    static char buf[1 << 22];
    double t0 = now(), took = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (timed) {
        t0 = now();
        while (read(fd, buf, sizeof buf) > 0)
            ;
        took = now() - t0;
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    close(fd);
    return took;
}

/* The sum of the "weights X MB" a session's description gives its
 * devices, in bytes; -1 when it names none. */
static double described_weights(const char *desc)
{
    double sum = -1;
    for (const char *p = desc; (p = strstr(p, ": weights ")); p++) {
        double mb = atof(p + 10);
        sum = (sum < 0 ? 0 : sum) + mb * 1e6;
    }
    return sum;
}

/* Resets VmHWM to the current resident size (Linux 4.0 and later). */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}


static int fail(const char *what, shardnet_status st)
{
    fprintf(stderr, "test_memory: %s: %s: %s\n", what,
            shardnet_status_str(st), shardnet_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 8) {
        fprintf(stderr, "Usage: test_memory MODEL DEVICES SPLIT MAX_RATIO "
                        "[BATCH [REF_BYTES [HELD_RATIO]]]\n");
        return 2;
    }
    const char *path = argv[1], *devices = argv[2], *split = argv[3];
    double max_ratio = atof(argv[4]);
    int64_t batch = argc > 5 ? atoll(argv[5]) : 1;
    shardnet_context_t *ctx = NULL;
    shardnet_model_t *model = NULL;
    shardnet_session_t *s = NULL;
    shardnet_status st;

    if (!reset_peak()) {
        printf("skip /proc/self/clear_refs cannot reset the peak\n");
        return 77;
    }
    /* TEST_MEMORY_COLD=1: the model's files (MODEL, MODEL.data) read
     * from the disk, not the page cache: their read timed, then dropped
     * again before the load (for tools/bench-first-run.sh). */
    double read_s = -1;
    if (getenv("TEST_MEMORY_COLD") && atoi(getenv("TEST_MEMORY_COLD"))) {
        char data[4096];
        snprintf(data, sizeof data, "%s.data", path);
        cold_read(path, 0);
        cold_read(data, 0);
        read_s = cold_read(path, 1) + cold_read(data, 1);
    }
    if ((st = shardnet_context_create(&ctx)) != SHARDNET_OK)
        return fail("context", st);
    /* The first run's clock starts at the load: the context (finding the
     * devices, about 30 ms with PoCL) is the program's, whatever model. */
    double t_load = now();
    double base = status_kb("VmRSS:");

    if ((st = shardnet_model_load(path, &model)) != SHARDNET_OK)
        return fail(path, st);
    double weights = argc > 6 && atof(argv[6]) > 0
                         ? atof(argv[6])
                         : 4.0 * (double)shardnet_model_parameter_count(model);
    double load = status_kb("VmHWM:") - base;

    shardnet_session_options o = {.size = sizeof o, .split = split};
    if ((st = shardnet_session_create_with(ctx, model, devices, &o, &s)) !=
        SHARDNET_OK)
        return fail("session", st);
    shardnet_tensor_info in;
    if ((st = shardnet_model_input(model, 0, &in)) != SHARDNET_OK)
        return fail("input", st);
    int64_t dims[SHARDNET_MAX_DIMS];
    size_t count = 1;
    for (int d = 0; d < in.rank; d++) {
        dims[d] = in.dims[d] < 0 ? batch : in.dims[d];
        count *= (size_t)dims[d];
    }
    float *x = calloc(count ? count : 1, sizeof *x);
    if (!x)
        return 1;
    if ((st = shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, in.rank,
                                         dims, x)) != SHARDNET_OK)
        return fail("input", st);
    double t0 = now();
    if ((st = shardnet_session_run(s)) != SHARDNET_OK)
        return fail("first run", st);
    double t1 = now();
    if ((st = shardnet_session_run(s)) != SHARDNET_OK)
        return fail("second run", st);
    double t2 = now();
    double peak = status_kb("VmHWM:") - base;

    static char desc[1 << 16];
    shardnet_session_describe(s, desc, sizeof desc);
    double held = described_weights(desc);
    for (char *line = strtok(desc, "\n"); line; line = strtok(NULL, "\n"))
        printf("plan %s\n", line);
    printf("weights_mb %.1f\n", weights / 1e6);
    printf("load_mb %.1f\n", load / 1e6);
    printf("peak_mb %.1f\n", peak / 1e6);
    printf("peak_ratio %.3f\n", peak / weights);
    printf("first_run_s %.3f\n", t1 - t0);
    /* The load, the session (its plan, its uploads) and the first run. */
    printf("first_total_s %.3f\n", t1 - t_load);
    printf("second_run_s %.3f\n", t2 - t1);
    if (read_s >= 0)
        printf("cold_read_s %.3f\n", read_s);
    if (held >= 0)
        printf("device_weights_mb %.1f\n", held / 1e6);
    shardnet_session_free(s);
    shardnet_model_free(model);
    shardnet_context_free(ctx);
    free(x);
    /* What the devices are said to hold is what the process holds: the
     * weights of every device at most 1.1 times the model's (each holds
     * its shard only), and the peak within 15% of them (plus the
     * activations' bound) either way. */
    double held_ratio = argc > 7 ? atof(argv[7]) : 1.1;
    if (held >= 0 && !(held <= held_ratio * weights)) {
        printf("FAIL the devices hold %.1f MB of weights, over %.2f x the "
               "model's %.1f MB\n", held / 1e6, held_ratio, weights / 1e6);
        return 1;
    }
    if (UNDER_ASAN) {
        printf("ok (AddressSanitizer: its memory is in the peak, which is "
               "not checked)\n");
        return 0;
    }
    if (held >= 0 && !(peak <= 1.15 * held + ACTIVATIONS &&
                       held <= 1.15 * peak + ACTIVATIONS)) {
        printf("FAIL the devices are said to hold %.1f MB of weights, the "
               "process's peak is %.1f MB\n", held / 1e6, peak / 1e6);
        return 1;
    }
    if (!(peak <= max_ratio * weights + ACTIVATIONS)) {
        printf("FAIL peak %.1f MB is over %.2f x the weights (%.1f MB) plus "
               "%.0f MB\n", peak / 1e6, max_ratio, weights / 1e6,
               ACTIVATIONS / 1e6);
        return 1;
    }
    printf("ok peak %.1f MB is within %.2f x the weights plus %.0f MB\n",
           peak / 1e6, max_ratio, ACTIVATIONS / 1e6);
    return 0;
}
