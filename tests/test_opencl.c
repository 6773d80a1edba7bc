/* OpenCL specifics: kernel build errors and the program binary cache. */
#include <config.h>

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "shardnet.h"

/* The first OpenCL device of a fresh context with these options, or
 * skip. */
static sn_device *first_cl(const shardnet_context_options *o,
                           shardnet_context_t **ctx)
{
    cr_assert_eq(shardnet_context_create_with(o, ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    for (size_t i = 0; i < shardnet_device_count(*ctx); i++) {
        sn_device *d = sn_context_device(*ctx, i);
        if (d->info.kind == SHARDNET_DEVICE_OPENCL)
            return d;
    }
    shardnet_context_free(*ctx);
    cr_skip_test("no OpenCL device on this machine");
    return NULL;
}

/* relu over 4 values on dev; returns the status of the kernel launch. */
static shardnet_status relu4(sn_device *dev, float *out)
{
    const float x[4] = {-1, 2, -3, 4};
    sn_buffer *b = NULL;
    shardnet_status st;
    cr_assert_eq(sn_buffer_alloc(dev, sizeof x, &b), SHARDNET_OK);
    cr_assert_eq(sn_buffer_write(b, 0, x, sizeof x), SHARDNET_OK);
    sn_unary_desc u = {.op = SN_UNARY_RELU, .n = 4, .x = {b, 0}, .y = {b, 0}};
    st = sn_unary(dev, &u);
    if (st == SHARDNET_OK) {
        cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
        cr_assert_eq(sn_buffer_read(b, 0, out, sizeof x), SHARDNET_OK);
    }
    sn_buffer_free(b);
    return st;
}

Test(opencl, kernel_that_fails_to_build_reports_its_build_log)
{
    char dir[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    shardnet_context_options o = {.size = sizeof o, .kernel_dir = dir};
    shardnet_context_t *ctx;
    float out[4];
    snprintf(dir, sizeof dir, "%s/tests/broken_cl", src ? src : ".");
    sn_device *dev = first_cl(&o, &ctx);
    cr_assert_eq(relu4(dev, out), SHARDNET_BUILD_ERROR, "%s",
                 shardnet_last_error());
    const char *msg = shardnet_last_error();
    cr_assert(strstr(msg, dev->info.name), "no device in: %s", msg);
    cr_assert(strstr(msg, "elementwise.cl"), "no file in: %s", msg);
    cr_assert(strstr(msg, "undeclared_identifier"), "no build log in: %s",
              msg);
    /* The device is still usable for what does not need that program. */
    float a[1] = {2}, b[1] = {3}, c[1] = {0};
    size_t idx;
    for (idx = 0; sn_context_device(ctx, idx) != dev; idx++)
        ;
    cr_assert_eq(shardnet_matmul(ctx, idx, 1, 1, 1, a, b, c), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_float_eq(c[0], 6.0f, 0);
    shardnet_context_free(ctx);
}

Test(opencl, missing_kernel_source_in_cl_dir_is_an_io_error)
{
    shardnet_context_t *ctx;
    float out[4];
    setenv("SHARDNET_CL_DIR", "/nonexistent/shardnet-cl", 1);
    sn_device *dev = first_cl(NULL, &ctx);
    cr_assert_eq(relu4(dev, out), SHARDNET_IO_ERROR);
    cr_assert(strstr(shardnet_last_error(), "SHARDNET_CL_DIR"), "%s",
              shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), "/nonexistent/shardnet-cl"), "%s",
              shardnet_last_error());
    shardnet_context_free(ctx);
    unsetenv("SHARDNET_CL_DIR");
}

/* Number of regular files in dir; the smallest one's size in *smallest. */
static int count_files(const char *dir, long *smallest)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    *smallest = -1;
    cr_assert_not_null(d, "cannot open %s", dir);
    while ((e = readdir(d))) {
        char p[4096];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            n++;
            if (*smallest < 0 || (long)st.st_size < *smallest)
                *smallest = (long)st.st_size;
        }
    }
    closedir(d);
    return n;
}

/* Overwrite every file in dir with a few bytes of garbage. */
static void corrupt_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.')
            continue;
        FILE *f = fopen(p, "wb");
        cr_assert_not_null(f);
        fputs("garbage", f);
        fclose(f);
    }
    closedir(d);
}

Test(opencl, program_binaries_are_cached_and_corrupt_entries_rebuilt)
{
    char dir[] = "/tmp/shardnet-cache-XXXXXX";
    shardnet_context_options o = {.size = sizeof o, .cache_dir = dir};
    shardnet_context_t *ctx;
    float out[4];
    long bytes, bytes2; /* the smallest cache file */
    cr_assert_not_null(mkdtemp(dir));

    sn_device *dev = first_cl(&o, &ctx);
    cr_assert_eq(relu4(dev, out), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_float_eq(out[0], 0.0f, 0);
    cr_assert_float_eq(out[3], 4.0f, 0);
    shardnet_context_free(ctx);
    int n = count_files(dir, &bytes);
    cr_assert_geq(n, 1, "no binary cached in %s", dir);
    cr_assert_gt(bytes, 100, "a cached binary of %ld bytes", bytes);

    /* A second process-level start reuses the entry: no new file. */
    dev = first_cl(&o, &ctx);
    cr_assert_eq(relu4(dev, out), SHARDNET_OK, "%s", shardnet_last_error());
    shardnet_context_free(ctx);
    cr_assert_eq(count_files(dir, &bytes2), n);

    /* Corrupt entries are ignored, rebuilt and rewritten: each file is a
     * binary again, not the 7 bytes of garbage.  (Not necessarily of the
     * first size: PoCL's binary carries what its own cache held, which
     * differs between a first build and later ones.) */
    corrupt_files(dir);
    dev = first_cl(&o, &ctx);
    cr_assert_eq(relu4(dev, out), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_float_eq(out[3], 4.0f, 0);
    shardnet_context_free(ctx);
    cr_assert_eq(count_files(dir, &bytes2), n);
    cr_assert_gt(bytes2, 100, "cache entries were not rewritten (a file of "
                              "%ld bytes)", bytes2);

    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
