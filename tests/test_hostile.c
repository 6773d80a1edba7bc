/*
 * Hostile input from outside the program (issue 13, point 7), at the
 * library's level: a model file changed on disk after it was loaded,
 * external data reached through a symbolic link, FIFOs where files are
 * expected, a Conv group that overflows, indexing operators given
 * indices, axes and sizes out of range, tensor files in formats shardnet
 * cannot read, bad plan files, a full disk, and the memory an OpenCL
 * context cycle keeps.  Each must give a clear error naming the file and
 * expected, a Conv group that overflows, RNN nodes with attributes or
 * sequence lengths out of range, tensor files in formats shardnet cannot
 * read, bad plan files, a full disk, and the memory an OpenCL context
 * cycle keeps.  Each must give a clear error naming the file and
 * why, and nothing may crash or hang.  The command-line cases are in
 * tests/test_hostile.sh; bad environment variables, which are read once
 * per process, in tests/test_config.c (a process each).
 */
#include <config.h>

#include <criterion/criterion.h>
#include "testfiles.h"
#include "pbwriter.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "shardnet.h"

/* --- files ------------------------------------------------------------- */

static const char *srcdir(void)
{
    const char *d = getenv("SHARDNET_SRCDIR");
    if (!d || !*d)
        cr_skip_test("SHARDNET_SRCDIR is not set (make check sets it)");
    return d;
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    cr_assert(d, "%s: %s", dir, strerror(errno));
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void assert_error_has(const char *needle)
{
    cr_assert(strstr(shardnet_last_error(), needle),
              "error '%s' does not mention '%s'", shardnet_last_error(),
              needle);
}

static shardnet_status run_one_input(const char *path, int rank,
                                     const int64_t *dims, const float *in);

/* Graph g (its input x and output y added; all three consumed) as
 * dir/model.onnx of the given opset, run as run_one_input runs it. */
static shardnet_status write_and_run(const char *dir, pb *g, pb *x, pb *y,
                                     int64_t opset, int rank,
                                     const int64_t *dims, const float *in)
{
    char path[512];
    put_msg(g, 11, x);
    put_msg(g, 12, y);
    pb md = model(opset, g);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    spit(path, md.p, md.n);
    free(md.p);
    return run_one_input(path, rank, dims, in);
}

/*
 * The model at path loaded, a session made on cpu:0, its one input bound
 * (float, rank dims, from in) and run: the first status that is not OK,
 * or OK; everything released again.
 */
static shardnet_status run_one_input(const char *path, int rank,
                                     const int64_t *dims, const float *in)
{
    shardnet_context_t *ctx;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_status st = shardnet_model_load(path, &m);
    if (st == SHARDNET_OK) {
        cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
        st = shardnet_session_create(ctx, m, "cpu:0", &s);
        if (st == SHARDNET_OK) {
            cr_assert_eq(shardnet_session_set_input(
                             s, 0, SHARDNET_DTYPE_FLOAT32, rank, dims, in),
                         SHARDNET_OK);
            st = shardnet_session_run(s);
        }
        shardnet_session_free(s);
        shardnet_context_free(ctx);
        shardnet_model_free(m);
    }
    return st;
}

/*
 * y = x + w, x and w float[4]; w's bytes in the external file `loc` (NULL:
 * in the model), written to dir/model.onnx.
 */
static void write_add_model(const char *dir, const char *loc)
{
    static const int64_t d4[] = {4};
    static const float w[4] = {1, 2, 3, 4};
    pb g = {0}, n = {0}, t = {0}, x = value_info("x", d4, 1),
       y = value_info("y", d4, 1), m;
    char path[512];
    put_str(&n, 1, "x");
    put_str(&n, 1, "w");
    put_str(&n, 2, "y");
    put_str(&n, 3, "add");
    put_str(&n, 4, "Add");
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    put_int(&t, 1, 4);
    put_int(&t, 2, 1);
    put_str(&t, 8, "w");
    if (loc) {
        pb e = {0};
        put_str(&e, 1, "location");
        put_str(&e, 2, loc);
        put_msg(&t, 13, &e);
        put_int(&t, 14, 1);
    } else {
        put_bytes(&t, 9, w, sizeof w);
    }
    put_msg(&g, 5, &t);
    put_msg(&g, 11, &x);
    put_msg(&g, 12, &y);
    m = model(13, &g);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    spit(path, m.p, m.n);
    free(m.p);
}

/* Runs the Add model once on cpu:0; y[0] in *y0. */
static shardnet_status run_add(shardnet_model_t *m, float *y0)
{
    static const float x[4] = {10, 20, 30, 40};
    static const int64_t d4[] = {4};
    shardnet_context_t *ctx = NULL;
    shardnet_session_t *s = NULL;
    shardnet_status st;
    const void *out;
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    if ((st = shardnet_session_create(ctx, m, "cpu:0", &s)) == SHARDNET_OK &&
        (st = shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 1, d4,
                                         x)) == SHARDNET_OK &&
        (st = shardnet_session_run(s)) == SHARDNET_OK &&
        (st = shardnet_session_output(s, 0, NULL, &out)) == SHARDNET_OK)
        *y0 = ((const float *)out)[0];
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    return st;
}

/* --- a model changed on disk after it was loaded ------------------------- */

Test(mapped_model, rewritten_in_place_is_refused_at_session_creation)
{
    char dir[64], path[512];
    shardnet_model_t *m;
    float y0 = 0;
    struct timespec old[2] = {{0, 0}, {0, 0}};
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, NULL);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(run_add(m, &y0), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(y0, 11.0f);
    /* Same size, same inode, new bytes: the mapping would see them. */
    write_add_model(dir, NULL);
    old[0].tv_nsec = UTIME_OMIT;
    old[1].tv_sec = 1000000000; /* a time stamp the load did not see */
    cr_assert_eq(utimensat(AT_FDCWD, path, old, 0), 0);
    cr_assert_eq(run_add(m, &y0), SHARDNET_IO_ERROR);
    assert_error_has(path + 4); /* the real path: /tmp may be a link */
    assert_error_has("modified since the model was loaded");
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

Test(mapped_model, truncated_is_refused_not_a_sigbus)
{
    char dir[64], path[512];
    shardnet_model_t *m;
    float y0 = 0;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, NULL);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(truncate(path, 0), 0);
    cr_assert_eq(run_add(m, &y0), SHARDNET_IO_ERROR);
    assert_error_has("changed size since the model was loaded");
    assert_error_has("model.onnx");
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

Test(mapped_model, replaced_by_rename_is_refused)
{
    char dir[64], path[512], other[512];
    shardnet_model_t *m;
    float y0 = 0;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, NULL);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    snprintf(other, sizeof other, "%s/new.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(rename(path, other), 0);
    cr_assert_eq(run_add(m, &y0), SHARDNET_IO_ERROR);
    assert_error_has("is gone since the model was loaded");
    write_add_model(dir, NULL); /* a new file (inode) at the same path */
    cr_assert_eq(run_add(m, &y0), SHARDNET_IO_ERROR);
    assert_error_has("was replaced by another file");
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

/* The check is made at each run too, not only when a session is made. */
Test(mapped_model, changed_under_a_live_session_is_refused_at_the_next_run)
{
    static const float x[4] = {10, 20, 30, 40};
    static const int64_t d4[] = {4};
    char dir[64], path[512];
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, NULL);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s), SHARDNET_OK);
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 1,
                                            d4, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK);
    cr_assert_eq(truncate(path, 10), 0);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_IO_ERROR);
    assert_error_has("changed size since the model was loaded");
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

Test(mapped_model, external_data_changed_is_refused)
{
    static const float w[4] = {1, 2, 3, 4};
    char dir[64], path[512];
    shardnet_model_t *m;
    float y0 = 0;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, "w.bin");
    snprintf(path, sizeof path, "%s/w.bin", dir);
    spit(path, w, sizeof w);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(run_add(m, &y0), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(y0, 11.0f);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(truncate(path, 2), 0);
    cr_assert_eq(run_add(m, &y0), SHARDNET_IO_ERROR);
    assert_error_has("w.bin");
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

Test(mapped_model, read_option_keeps_the_model_whatever_the_file_becomes)
{
    static const float w[4] = {1, 2, 3, 4};
    shardnet_model_options o = {.size = sizeof o,
                                .flags = SHARDNET_MODEL_READ};
    char dir[64], path[512];
    shardnet_model_t *m;
    float y0 = 0;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, "w.bin");
    snprintf(path, sizeof path, "%s/w.bin", dir);
    spit(path, w, sizeof w);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load_with(path, &o, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    /* Both files cut to nothing: a mapping would raise SIGBUS. */
    cr_assert_eq(truncate(path, 0), 0);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(truncate(path, 0), 0);
    cr_assert_eq(run_add(m, &y0), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(y0, 11.0f);
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

Test(mapped_model, bad_options_are_refused)
{
    shardnet_model_options o = {.size = sizeof o, .flags = 0x80};
    shardnet_model_t *m = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             srcdir());
    cr_assert_eq(shardnet_model_load_with(path, &o, &m),
                 SHARDNET_INVALID_ARGUMENT);
    assert_error_has("unknown flags 0x80");
    o.flags = 0;
    o.size = 1;
    cr_assert_eq(shardnet_model_load_with(path, &o, &m),
                 SHARDNET_INVALID_ARGUMENT);
    assert_error_has("too small");
    o.size = sizeof o;
    o.reserved[3] = 1;
    cr_assert_eq(shardnet_model_load_with(path, &o, &m),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_null(m);
}

/* --- external data through a symbolic link ------------------------------ */

Test(external_link, to_a_file_outside_the_folder_is_refused)
{
    char dir[64], path[512];
    shardnet_model_t *m = NULL;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, "w.bin");
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(symlink("/etc/passwd", path), 0, "%s", strerror(errno));
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_neq(shardnet_model_load(path, &m), SHARDNET_OK,
                  "a link to /etc/passwd was read as weights");
    cr_assert_null(m);
    assert_error_has("outside the model's folder");
    assert_error_has("/etc/passwd");
    rm_tmpdir(dir);
}

/* A file of the right size outside: only the real path gives it away. */
Test(external_link, to_a_fitting_file_outside_the_folder_is_refused)
{
    static const float w[4] = {1, 2, 3, 4};
    char dir[64], other[64], path[512], target[512];
    shardnet_model_t *m = NULL;
    make_tmpdir("hostile", dir, sizeof dir);
    make_tmpdir("hostile", other, sizeof other);
    write_add_model(dir, "w.bin");
    snprintf(target, sizeof target, "%s/secret.bin", other);
    spit(target, w, sizeof w);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(symlink(target, path), 0, "%s", strerror(errno));
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_INVALID_ARGUMENT,
                 "a link out of the model's folder was followed");
    cr_assert_null(m);
    assert_error_has("outside the model's folder");
    assert_error_has("secret.bin");
    rm_tmpdir(dir);
    rm_tmpdir(other);
}

Test(external_link, inside_the_folder_is_followed)
{
    static const float w[4] = {1, 2, 3, 4};
    char dir[64], path[512];
    shardnet_model_t *m = NULL;
    float y0 = 0;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, "w.bin");
    snprintf(path, sizeof path, "%s/real.bin", dir);
    spit(path, w, sizeof w);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(symlink("real.bin", path), 0, "%s", strerror(errno));
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(run_add(m, &y0), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(y0, 11.0f);
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

/* --- FIFOs where files are expected --------------------------------------- */

/* Each test has 20 s: a FIFO that is opened for reading blocks forever. */

Test(fifo, as_the_model_is_refused, .timeout = 20)
{
    char dir[64], path[512];
    shardnet_model_t *m = NULL;
    make_tmpdir("hostile", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_IO_ERROR);
    assert_error_has("not a regular file");
    assert_error_has(path);
    rm_tmpdir(dir);
}

Test(fifo, as_external_data_is_refused, .timeout = 20)
{
    char dir[64], path[512];
    shardnet_model_t *m = NULL;
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, "w.bin");
    snprintf(path, sizeof path, "%s/w.bin", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_neq(shardnet_model_load(path, &m), SHARDNET_OK);
    assert_error_has("not a regular file");
    assert_error_has("w.bin");
    rm_tmpdir(dir);
}

Test(fifo, as_a_tensor_file_is_refused, .timeout = 20)
{
    char dir[64], path[512];
    shardnet_tensor t;
    make_tmpdir("hostile", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/x.npy", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(shardnet_tensor_load(path, &t), SHARDNET_IO_ERROR);
    assert_error_has("not a regular file");
    assert_error_has(path);
    rm_tmpdir(dir);
}

Test(fifo, as_a_plan_file_is_refused, .timeout = 20)
{
    char dir[64], path[512];
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s = NULL;
    shardnet_session_options o = {0};
    make_tmpdir("hostile", dir, sizeof dir);
    write_add_model(dir, NULL);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    o.plan_file = path;
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0", &o, &s),
                 SHARDNET_IO_ERROR);
    assert_error_has("not a regular file");
    assert_error_has(path);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    rm_tmpdir(dir);
}

/* --- Conv group ------------------------------------------------------------ */

/*
 * A Conv of group 2^62 over x of shape dx with weights of shape dw (all
 * ones, at most 4): refused at load or at the first run, with the group in
 * the message.
 */
static void expect_group_refused(const int64_t *dx, const int64_t *dw)
{
    static const float w[4] = {1, 1, 1, 1};
    size_t nw = (size_t)(dw[0] * dw[1] * dw[2] * dw[3]);
    pb g = {0}, n = {0}, a = {0}, t = {0}, x = value_info("x", dx, 4),
       y = value_info("y", dx, 4);
    char dir[64];
    float in[36] = {0};
    shardnet_status st;
    make_tmpdir("hostile", dir, sizeof dir);
    put_str(&n, 1, "x");
    put_str(&n, 1, "w");
    put_str(&n, 2, "y");
    put_str(&n, 3, "conv");
    put_str(&n, 4, "Conv");
    put_str(&a, 1, "group");
    put_int(&a, 3, (int64_t)1 << 62);
    put_int(&a, 20, 2); /* INT */
    put_msg(&n, 5, &a);
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    for (int i = 0; i < 4; i++)
        put_int(&t, 1, dw[i]);
    put_int(&t, 2, 1);
    put_str(&t, 8, "w");
    put_bytes(&t, 9, w, nw * sizeof w[0]);
    put_msg(&g, 5, &t);
    /* Refused at load (shapes) or at the first run, never run. */
    st = write_and_run(dir, &g, &x, &y, 13, 4, dx, in);
    cr_assert_eq(st, SHARDNET_INVALID_ARGUMENT, "%s", shardnet_last_error());
    assert_error_has("group 4611686018427387904 does not fit");
    rm_tmpdir(dir);
}

/* 1 channel a group times 2^62 groups overflows (UBSan sees it). */
Test(conv, group_of_two_to_the_62_is_refused)
{
    static const int64_t dx[] = {1, 4, 3, 3}, dw[] = {4, 1, 1, 1};
    expect_group_refused(dx, dw);
}

/* 4 channels a group times 2^62 groups wraps to 0, the input's channels:
 * only an overflow-checked product refuses it. */
Test(conv, group_whose_product_wraps_to_the_channels_is_refused)
{
    static const int64_t dx[] = {1, 0, 3, 3}, dw[] = {0, 4, 1, 1};
    expect_group_refused(dx, dw);
}

/* --- element-wise operators ------------------------------------------------ */

/*
 * One node `op` of opset `opset` over float inputs x (rank rx, dims dx)
 * and w (rw, dw), with a string attribute attr = sval when attr is not
 * NULL: refused with status want (at load, at session creation or at the
 * first run), the error naming `needle`.
 */
static void expect_binary_refused(const char *op, int64_t opset,
                                  const char *attr, const char *sval,
                                  const int64_t *dx, int rx,
                                  const int64_t *dw, int rw,
                                  shardnet_status want, const char *needle)
{
    static const char *const ins[] = {"x", "w", NULL}, *const outs[] = {"y",
                                                                        NULL};
    pb g = {0}, n = node("n", op, ins, outs), a = {0};
    pb x = value_info("x", dx, rx), w = value_info("w", dw, rw),
       y = value_info("y", NULL, -1), md;
    char dir[64], path[512];
    shardnet_context_t *ctx;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    static const float in[64] = {1.0f};
    shardnet_status st;
    make_tmpdir("hostile", dir, sizeof dir);
    if (attr) {
        put_str(&a, 1, attr);
        put_str(&a, 4, sval);
        put_int(&a, 20, 3); /* STRING */
        put_msg(&n, 5, &a);
    }
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    put_msg(&g, 11, &x);
    put_msg(&g, 11, &w);
    put_msg(&g, 12, &y);
    md = model(opset, &g);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    spit(path, md.p, md.n);
    free(md.p);
    st = shardnet_model_load(path, &m);
    if (st == SHARDNET_OK) {
        cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
        st = shardnet_session_create(ctx, m, "cpu:0", &s);
        if (st == SHARDNET_OK &&
            (st = shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, rx,
                                             dx, in)) == SHARDNET_OK &&
            (st = shardnet_session_set_input(s, 1, SHARDNET_DTYPE_FLOAT32, rw,
                                             dw, in)) == SHARDNET_OK)
            st = shardnet_session_run(s);
        shardnet_session_free(s);
        shardnet_context_free(ctx);
        shardnet_model_free(m);
    }
    cr_assert_eq(st, want, "%s: %s", op, shardnet_last_error());
    assert_error_has(needle);
    rm_tmpdir(dir);
}

Test(elementwise, bitshift_of_floats_is_refused)
{
    static const int64_t d[] = {2, 3};
    expect_binary_refused("BitShift", 13, "direction", "LEFT", d, 2, d, 2,
                          SHARDNET_INVALID_ARGUMENT, "integers only");
}

Test(elementwise, bitshift_without_a_direction_is_refused)
{
    static const int64_t d[] = {2, 3};
    expect_binary_refused("BitShift", 13, "direction", "UP", d, 2, d, 2,
                          SHARDNET_INVALID_ARGUMENT, "direction 'UP'");
}

Test(elementwise, prelu_slope_that_does_not_broadcast_is_refused)
{
    static const int64_t dx[] = {2, 3}, dw[] = {5};
    expect_binary_refused("PRelu", 13, NULL, NULL, dx, 2, dw, 1,
                          SHARDNET_INVALID_ARGUMENT, "slope");
    /* nor may the slope grow the output */
    static const int64_t dw2[] = {4, 2, 3};
    expect_binary_refused("PRelu", 13, NULL, NULL, dx, 2, dw2, 3,
                          SHARDNET_INVALID_ARGUMENT, "slope");
}

Test(elementwise, comparison_of_shapes_that_do_not_broadcast_is_refused)
{
    static const int64_t dx[] = {2, 3}, dw[] = {4};
    expect_binary_refused("Greater", 13, NULL, NULL, dx, 2, dw, 1,
                          SHARDNET_INVALID_ARGUMENT, "broadcast");
    expect_binary_refused("Xor", 13, NULL, NULL, dx, 2, dw, 1,
                          SHARDNET_INVALID_ARGUMENT, "broadcast");
}

/* Before opset 7, shapes that differ need broadcast = 1. */
Test(elementwise, legacy_comparison_of_unequal_shapes_is_refused)
{
    static const int64_t dx[] = {2, 3}, dw[] = {3};
    expect_binary_refused("Less", 6, NULL, NULL, dx, 2, dw, 1,
                          SHARDNET_INVALID_ARGUMENT, "same shape");
}

/* --- tensor files shardnet cannot read -------------------------------------- */

/* A .npy file of header h (padded) and len bytes of data. */
static void write_npy(const char *path, const char *h, size_t len)
{
    char buf[4096];
    size_t hl = strlen(h), total = (10 + hl + 1 + 63) / 64 * 64;
    cr_assert(total + len <= sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, h, hl);
    memset(buf + 10 + hl, ' ', total - 10 - hl - 1);
    buf[total - 1] = '\n';
    memset(buf + total, 0, len);
    spit(path, buf, total + len);
}

static void expect_format_error(const char *h, size_t len, const char *needle)
{
    char dir[64], path[512];
    shardnet_tensor t;
    make_tmpdir("hostile", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/x.npy", dir);
    write_npy(path, h, len);
    /* A file problem, not "operation not supported by this device". */
    cr_assert_eq(shardnet_tensor_load(path, &t), SHARDNET_INVALID_ARGUMENT,
                 "%s", shardnet_last_error());
    assert_error_has(path);
    assert_error_has(needle);
    rm_tmpdir(dir);
}

Test(tensor_file, big_endian_npy_is_a_format_error)
{
    expect_format_error("{'descr': '>f4', 'fortran_order': False, "
                        "'shape': (2,), }",
                        8, "little-endian");
}

Test(tensor_file, fortran_order_npy_is_a_format_error)
{
    expect_format_error("{'descr': '<f4', 'fortran_order': True, "
                        "'shape': (2, 2), }",
                        16, "Fortran order");
}

Test(tensor_file, unknown_dtype_npy_is_a_format_error)
{
    expect_format_error("{'descr': '<c8', 'fortran_order': False, "
                        "'shape': (2,), }",
                        16, "'<c8' is not supported: the file cannot be read");
}

Test(tensor_file, string_pb_tensor_is_a_format_error)
{
    pb t = {0};
    char dir[64], path[512];
    shardnet_tensor x;
    make_tmpdir("hostile", dir, sizeof dir);
    put_int(&t, 1, 1);      /* dims [1] */
    put_int(&t, 2, 8);      /* STRING */
    put_str(&t, 6, "text"); /* string_data */
    snprintf(path, sizeof path, "%s/x.pb", dir);
    spit(path, t.p, t.n);
    free(t.p);
    cr_assert_eq(shardnet_tensor_load(path, &x), SHARDNET_INVALID_ARGUMENT,
                 "%s", shardnet_last_error());
    assert_error_has(path);
    assert_error_has("string tensors are not supported");
    rm_tmpdir(dir);
}

/* A full disk (here: a file size limit) leaves no truncated file behind. */
Test(tensor_file, failed_save_leaves_no_file)
{
    static float data[4096];
    shardnet_tensor_info info = {.dtype = SHARDNET_DTYPE_FLOAT32, .rank = 1,
                                 .dims = {4096}};
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    char dir[64], path[512];
    make_tmpdir("hostile", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/y.npy", dir);
    signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG */
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_assert_eq(shardnet_tensor_save(path, &info, data), SHARDNET_IO_ERROR);
    assert_error_has(path);
    assert_error_has("write failed");
    cr_assert_eq(count_entries(dir), 0, "a partial file was left in %s",
                 dir);
    /* A file already there stays as it was. */
    spit(path, "old", 3);
    cr_assert_eq(shardnet_tensor_save(path, &info, data), SHARDNET_IO_ERROR);
    cr_assert_eq(count_entries(dir), 1);
    {
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        cr_assert_eq(sb.st_size, 3);
    }
    rm_tmpdir(dir);
}

/* --- plan files ------------------------------------------------------------------ */

/* Creates a session of the fashion MLP on cpu:0 from plan text. */
static shardnet_status session_from_plan(const char *text)
{
    char dir[64], path[512];
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s = NULL;
    shardnet_session_options o = {0};
    shardnet_status st;
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             srcdir());
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    make_tmpdir("hostile", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    spit(path, text, strlen(text));
    o.plan_file = path;
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    st = shardnet_session_create_with(ctx, m, NULL, &o, &s);
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    rm_tmpdir(dir);
    return st;
}

Test(plan_file, duplicated_strategy_line_names_the_lines)
{
    cr_assert_eq(session_from_plan("split tensor\ndevices cpu:0,cpu:1\n"
                                   "strategy fc1 ((1,1),(1,2))\n"
                                   "strategy fc1 ((1,1),(1,2))\n"),
                 SHARDNET_INVALID_ARGUMENT, "%s", shardnet_last_error());
    assert_error_has("line 4: a second strategy for node 'fc1' (the first "
                     "is line 3)");
}

Test(plan_file, duplicated_split_line_is_refused)
{
    cr_assert_eq(session_from_plan("split none\ndevices cpu:0\nsplit layer\n"),
                 SHARDNET_INVALID_ARGUMENT);
    assert_error_has("line 3: a second 'split' line (the first is line 1)");
}

Test(plan_file, negative_cut_is_not_a_huge_node)
{
    cr_assert_eq(session_from_plan("split layer\ndevices cpu:0,cpu:1\n"
                                   "cuts -1\n"),
                 SHARDNET_INVALID_ARGUMENT);
    assert_error_has("line 3");
    assert_error_has("'-1' is not a whole number");
    cr_assert_null(strstr(shardnet_last_error(), "18446744073709551615"));
}

Test(plan_file, line_over_1023_characters_is_refused_not_split)
{
    char text[2048];
    size_t n = (size_t)snprintf(text, sizeof text, "split none\ndevices ");
    memset(text + n, 'x', 1500);
    snprintf(text + n + 1500, sizeof text - n - 1500, "\n");
    cr_assert_eq(session_from_plan(text), SHARDNET_INVALID_ARGUMENT);
    assert_error_has("line 2: longer than 1023 characters");
}

Test(plan_file, line_of_1023_characters_is_read_whole)
{
    char text[2048];
    text[0] = '#';
    memset(text + 1, 'x', 1022);
    snprintf(text + 1023, sizeof text - 1023,
             "\nsplit none\ndevices cpu:0\n");
    cr_assert_eq(session_from_plan(text), SHARDNET_OK, "%s",
                 shardnet_last_error());
}

/* --- OpenCL: memory kept by context cycles ------------------------------------- */

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    cr_assert(f);
    cr_assert_eq(fscanf(f, "%ld %ld", &pages, &rss), 2);
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One cycle: a context, a session of the fashion MLP on cl:0, one run. */
static void cl_cycle(const char *model, const float *x)
{
    static const int64_t dims[] = {1, 784};
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s;
    cr_assert_eq(shardnet_model_load(model, &m), SHARDNET_OK);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    cr_assert_eq(shardnet_session_create(ctx, m, "cl:0", &s), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
}

/*
 * Not a timing test: the memory kept over 8 cycles, after 2 to warm up
 * (PoCL's and the allocator's own pools), must stay under 6 MB in one of
 * two runs of 8 cycles; CLBlast's uncleared program cache kept about
 * 1.75 MB a cycle (14 MB in each run).  A leak keeps memory in every run;
 * the allocator grows its pools by a few MB once in a while (seen: 2.6 to
 * 6.8 MB at one cycle of 16), which one run of the two may show.  Each
 * cycle rebuilds CLBlast's kernels (about a second on PoCL).
 */
Test(opencl, context_cycles_do_not_keep_memory, .timeout = 300)
{
    char model[512];
    static float x[784];
    shardnet_context_t *ctx;
    size_t n = 0;
    long before, mid, after;
    snprintf(model, sizeof model, "%s/tests/fixtures/fashion_mlp.onnx",
             srcdir());
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    shardnet_devices_select(ctx, "cl", NULL, 0, &n);
    shardnet_context_free(ctx);
    if (n == 0)
        cr_skip_test("no OpenCL device on this machine");
    for (int i = 0; i < 2; i++)
        cl_cycle(model, x);
    before = rss_kb();
    for (int i = 0; i < 8; i++)
        cl_cycle(model, x);
    mid = rss_kb();
    for (int i = 0; i < 8; i++)
        cl_cycle(model, x);
    after = rss_kb();
    cr_log_info("RSS %ld kB -> %ld kB -> %ld kB over 2 x 8 cycles", before,
                mid, after);
    long kept = mid - before < after - mid ? mid - before : after - mid;
    cr_assert_lt(kept, 6 * 1024,
                 "8 OpenCL context cycles kept %ld kB, and 8 more %ld kB",
                 mid - before, after - mid);
}

/* --- indexing operators ------------------------------------------------------ */

/* An int64 constant of a graph: its name, rank (<= 2), dims and values. */
typedef struct index_const {
    const char *name;
    int rank;
    int64_t dims[2];
    const int64_t *values;
} index_const;

/*
 * A model of one node `op` (inputs ins, output "y") over the float graph
 * input "x" of shape dx (rank 2, large enough to stay on the device) and
 * the int64 constants cs (nc), with the INT attribute `attr` = v (none
 * when NULL) and the STRING attribute "reduction" = red (none when NULL).
 * Refused at load (constant folding) or at the first run on cpu:0 with
 * status want and a message holding needle: never run, never a crash.
 */
static void expect_index_refused(const char *op, const char *const *ins,
                                 const int64_t *dx, const index_const *cs,
                                 size_t nc, const char *attr, int64_t v,
                                 const char *red, shardnet_status want,
                                 const char *needle)
{
    static const char *const outs[] = {"y", NULL};
    static float in[1000];
    pb g = {0}, n = node(op, op, ins, outs), x = value_info("x", dx, 2),
       y = value_info("y", NULL, -1);
    char dir[64];
    shardnet_status st;
    cr_assert_leq(dx[0] * dx[1], 1000);
    make_tmpdir("hostile", dir, sizeof dir);
    if (attr) {
        pb a = {0};
        put_str(&a, 1, attr);
        put_int(&a, 3, v);
        put_int(&a, 20, 2); /* INT */
        put_msg(&n, 5, &a);
    }
    if (red) {
        pb a = {0};
        put_str(&a, 1, "reduction");
        put_str(&a, 4, red);
        put_int(&a, 20, 3); /* STRING */
        put_msg(&n, 5, &a);
    }
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    for (size_t i = 0; i < nc; i++) {
        size_t count = 1;
        for (int d = 0; d < cs[i].rank; d++)
            count *= (size_t)cs[i].dims[d];
        pb t = tensor_raw(cs[i].name, 7, cs[i].dims, cs[i].rank,
                          cs[i].values, count * sizeof(int64_t));
        put_msg(&g, 5, &t);
    }
    st = write_and_run(dir, &g, &x, &y, 18, 2, dx, in);
    cr_assert_eq(st, want, "%s", shardnet_last_error());
    assert_error_has(needle);
    assert_error_has(op);
    rm_tmpdir(dir);
}

static const int64_t index_dx[] = {10, 10};
static int64_t index_zeros[1000], index_tens[100];

Test(index, gather_elements_index_past_the_axis_is_refused)
{
    static const char *const ins[] = {"x", "i", NULL};
    index_const c = {"i", 2, {10, 10}, index_tens};
    for (size_t k = 0; k < 100; k++)
        index_tens[k] = 10;
    expect_index_refused("GatherElements", ins, index_dx, &c, 1, "axis", 1,
                         NULL, SHARDNET_INVALID_ARGUMENT,
                         "index 10 (at 0) is out of range for an axis of 10");
}

Test(index, gather_elements_axis_of_two_to_the_40_is_refused)
{
    static const char *const ins[] = {"x", "i", NULL};
    index_const c = {"i", 2, {10, 10}, index_zeros};
    expect_index_refused("GatherElements", ins, index_dx, &c, 1, "axis",
                         (int64_t)1 << 40, NULL, SHARDNET_INVALID_ARGUMENT,
                         "axis 1099511627776 out of range");
}

Test(index, gather_nd_batch_dims_past_the_rank_is_refused)
{
    static const char *const ins[] = {"x", "i", NULL};
    index_const c = {"i", 2, {10, 1}, index_zeros};
    expect_index_refused("GatherND", ins, index_dx, &c, 1, "batch_dims",
                         INT64_MAX, NULL, SHARDNET_INVALID_ARGUMENT,
                         "batch_dims 9223372036854775807");
}

/* 100 updates added to one element: more rounds than the device path
 * takes, refused rather than run for as long. */
Test(index, scatter_reduction_of_100_updates_on_one_element_is_refused)
{
    static const char *const ins[] = {"x", "i", "x", NULL};
    static const int64_t dx[] = {1, 100};
    index_const c = {"i", 2, {1, 100}, index_zeros};
    expect_index_refused("ScatterElements", ins, dx, &c, 1, "axis", 1, "add",
                         SHARDNET_UNSUPPORTED,
                         "100 updates land on one element");
}

Test(index, scatter_unknown_reduction_is_refused)
{
    static const char *const ins[] = {"x", "i", "x", NULL};
    index_const c = {"i", 2, {10, 10}, index_zeros};
    expect_index_refused("ScatterND", ins, index_dx, &c, 1, NULL, 0, "sum",
                         SHARDNET_INVALID_ARGUMENT, "unknown reduction 'sum'");
}

Test(index, onehot_depth_of_two_to_the_40_is_refused)
{
    static const char *const ins[] = {"i", "d", "v", NULL};
    static const int64_t depth = (int64_t)1 << 40, values[2] = {0, 1};
    index_const c[] = {{"i", 2, {10, 10}, index_zeros},
                       {"d", 0, {0}, &depth},
                       {"v", 1, {2}, values}};
    expect_index_refused("OneHot", ins, index_dx, c, 3, NULL, 0, NULL,
                         SHARDNET_INVALID_ARGUMENT,
                         "makes the output too large");
}

Test(index, range_of_two_to_the_63_elements_is_refused)
{
    static const char *const ins[] = {"a", "b", "c", NULL};
    static const int64_t a = INT64_MIN / 2, b = INT64_MAX / 2, one = 1;
    index_const c[] = {{"a", 0, {0}, &a}, {"b", 0, {0}, &b},
                       {"c", 0, {0}, &one}};
    expect_index_refused("Range", ins, index_dx, c, 3, NULL, 0, NULL,
                         SHARDNET_INVALID_ARGUMENT, "elements are too many");
}

Test(index, nonzero_of_a_tensor_on_the_device_is_refused)
{
    static const char *const ins[] = {"x", NULL};
    expect_index_refused("NonZero", ins, index_dx, NULL, 0, NULL, 0, NULL,
                         SHARDNET_UNSUPPORTED,
                         "must be known when the model is planned");
}

Test(index, reverse_sequence_longer_than_the_time_axis_is_refused)
{
    static const char *const ins[] = {"x", "l", NULL};
    index_const c = {"l", 1, {10}, index_tens};
    for (size_t k = 0; k < 10; k++)
        index_tens[k] = 11;
    expect_index_refused("ReverseSequence", ins, index_dx, &c, 1, NULL, 0,
                         NULL, SHARDNET_INVALID_ARGUMENT,
                         "sequence length 11 (batch 0) outside [0, 10]");
}

/* --- recurrent attributes ---------------------------------------------- */

/* An attribute named name: an int (type 2), float (1), string (3) or
 * strings (8, one). */
static pb rnn_attr(const char *name, int type, int64_t i, float f,
                   const char *s)
{
    pb a = {0};
    put_str(&a, 1, name);
    if (type == 1)
        put_f32(&a, 2, f);
    else if (type == 2)
        put_int(&a, 3, i);
    else
        put_bytes(&a, type == 3 ? 4 : 9, s, strlen(s));
    put_int(&a, 20, type);
    return a;
}

/*
 * An RNN over x (2, 1, 1) (two steps, one item, one input) with W and R of
 * ones and hidden size 1, the attribute attr (consumed) and, where lens is
 * set, sequence_lens {*lens} as a constant: refused with status want and a
 * message holding needle, at load, at session creation or at the first
 * run, never run.
 */
static void expect_rnn_refused(pb *attr, const int32_t *lens, int64_t opset,
                               shardnet_status want, const char *needle)
{
    static const float one = 1.0f;
    static const int64_t dx[] = {2, 1, 1}, dw[] = {1, 1, 1}, dy[] = {1, 1, 1};
    static const int64_t dl[] = {1};
    const char *ins[] = {"x", "w", "r", "", lens ? "lens" : NULL, NULL};
    const char *outs[] = {"", "y", NULL};
    pb g = {0}, n = node("rnn", "RNN", ins, outs), x = value_info("x", dx, 3),
       y = value_info("y", dy, 3), t;
    char dir[64];
    float in[2] = {0.5f, -0.5f};
    shardnet_status st;
    make_tmpdir("hostile", dir, sizeof dir);
    put_msg(&n, 5, attr);
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    t = tensor_raw("w", 1, dw, 3, &one, sizeof one);
    put_msg(&g, 5, &t);
    t = tensor_raw("r", 1, dw, 3, &one, sizeof one);
    put_msg(&g, 5, &t);
    if (lens) {
        t = tensor_raw("lens", 6, dl, 1, lens, sizeof *lens);
        put_msg(&g, 5, &t);
    }
    st = write_and_run(dir, &g, &x, &y, opset, 3, dx, in);
    cr_assert_eq(st, want, "%s", shardnet_last_error());
    assert_error_has(needle);
    rm_tmpdir(dir);
}

Test(rnn, sequence_length_past_the_sequence_is_refused)
{
    static const int32_t lens = 5;
    pb a = rnn_attr("hidden_size", 2, 1, 0.0f, NULL);
    expect_rnn_refused(&a, &lens, 14, SHARDNET_INVALID_ARGUMENT,
                       "sequence_lens[0] = 5 is outside [0, 2]");
}

Test(rnn, negative_sequence_length_is_refused)
{
    static const int32_t lens = -1;
    pb a = rnn_attr("hidden_size", 2, 1, 0.0f, NULL);
    expect_rnn_refused(&a, &lens, 14, SHARDNET_INVALID_ARGUMENT,
                       "sequence_lens[0] = -1 is outside [0, 2]");
}

Test(rnn, negative_or_wrong_hidden_size_is_refused)
{
    pb a = rnn_attr("hidden_size", 2, -3, 0.0f, NULL);
    pb b = rnn_attr("hidden_size", 2, (int64_t)1 << 40, 0.0f, NULL);
    expect_rnn_refused(&a, NULL, 14, SHARDNET_INVALID_ARGUMENT,
                       "hidden size 1");
    expect_rnn_refused(&b, NULL, 14, SHARDNET_INVALID_ARGUMENT,
                       "hidden size 1");
}

Test(rnn, unknown_direction_and_activation_are_refused)
{
    pb a = rnn_attr("direction", 3, 0, 0.0f, "sideways");
    pb b = rnn_attr("activations", 8, 0, 0.0f, "Swish");
    expect_rnn_refused(&a, NULL, 14, SHARDNET_INVALID_ARGUMENT,
                       "direction 'sideways'");
    expect_rnn_refused(&b, NULL, 14, SHARDNET_UNSUPPORTED,
                       "activation 'Swish'");
}

Test(rnn, batch_first_layout_before_opset_14_and_negative_clip_are_refused)
{
    pb a = rnn_attr("layout", 2, 1, 0.0f, NULL);
    pb b = rnn_attr("clip", 1, 0, -1.0f, NULL);
    expect_rnn_refused(&a, NULL, 13, SHARDNET_INVALID_ARGUMENT, "layout 1");
    expect_rnn_refused(&b, NULL, 14, SHARDNET_INVALID_ARGUMENT,
                       "clip -1 is negative");
}

/* --- spatial operators ---------------------------------------------------- */

/* Each model of tests/onnx_cases/hostile_spatial (made by make_cases.py):
 * refused at load, at session creation or at the first run, with an error
 * naming its node 'n', never run. */
Test(spatial, hostile_parameters_are_refused_naming_the_node)
{
    static const char *const names[] = {
        "tile_product_wraps",          "pad_product_wraps",
        "resize_huge_size",            "resize_negative_scale",
        "resize_antialias_tiny_scale", "depth_to_space_negative_block",
        "lrn_size_zero",               "maxunpool_index_outside",
        "roialign_negative_output",    "gridsample_bad_grid"};
    static const int64_t dx[] = {1, 1, 2, 2};
    const float in[4] = {1, 2, 3, 4};
    char path[1024];
    shardnet_context_t *ctx;
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        shardnet_model_t *m = NULL;
        shardnet_session_t *s = NULL;
        shardnet_status st;
        snprintf(path, sizeof path,
                 "%s/tests/onnx_cases/hostile_spatial/%s.onnx", srcdir(),
                 names[i]);
        st = shardnet_model_load(path, &m);
        if (st == SHARDNET_OK)
            st = shardnet_session_create(ctx, m, "cpu:0", &s);
        if (st == SHARDNET_OK &&
            (st = shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 4,
                                             dx, in)) == SHARDNET_OK)
            st = shardnet_session_run(s);
        cr_expect(st == SHARDNET_INVALID_ARGUMENT ||
                      st == SHARDNET_UNSUPPORTED,
                  "%s: status %d, %s", names[i], (int)st,
                  shardnet_last_error());
        cr_expect(strstr(shardnet_last_error(), "'n'"),
                  "%s: error '%s' does not name the node", names[i],
                  shardnet_last_error());
        shardnet_session_free(s);
        shardnet_model_free(m);
    }
    shardnet_context_free(ctx);
}

/* --- quantized weights ------------------------------------------------------ */

/*
 * MatMulNBits (com.microsoft) of x (1, 32) by K = 32, N = 2 with the
 * given block size and B of b_bytes bytes (two rows of one block of 16
 * bytes make it right), with g_idx as a fifth input where asked: refused
 * with status want and a message holding needle, never run.
 */
static void expect_nbits_refused(int64_t block, size_t b_bytes, int g_idx,
                                 shardnet_status want, const char *needle)
{
    static const int64_t dx[] = {1, 32}, dy[] = {1, 2};
    const int64_t db[] = {(int64_t)b_bytes}, ds[] = {2}, dg[] = {32};
    uint8_t bytes[256] = {0};
    static const float scales[2] = {0.5f, 0.25f};
    int32_t gi[32] = {0};
    const char *ins[] = {"x", "b", "s", "", g_idx ? "g" : NULL, NULL};
    const char *outs[] = {"y", NULL};
    pb g = {0}, n = node("nbits", "MatMulNBits", ins, outs),
       x = value_info("x", dx, 2), y = value_info("y", dy, 2), t;
    char dir[64];
    float in[32] = {0};
    shardnet_status st;
    make_tmpdir("hostile", dir, sizeof dir);
    put_str(&n, 7, "com.microsoft");
    pb a = rnn_attr("K", 2, 32, 0.0f, NULL);
    put_msg(&n, 5, &a);
    a = rnn_attr("N", 2, 2, 0.0f, NULL);
    put_msg(&n, 5, &a);
    a = rnn_attr("bits", 2, 4, 0.0f, NULL);
    put_msg(&n, 5, &a);
    a = rnn_attr("block_size", 2, block, 0.0f, NULL);
    put_msg(&n, 5, &a);
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    t = tensor_raw("b", 2, db, 1, bytes, b_bytes);
    put_msg(&g, 5, &t);
    t = tensor_raw("s", 1, ds, 1, scales, sizeof scales);
    put_msg(&g, 5, &t);
    if (g_idx) {
        t = tensor_raw("g", 6, dg, 1, gi, sizeof gi);
        put_msg(&g, 5, &t);
    }
    st = write_and_run(dir, &g, &x, &y, 13, 2, dx, in);
    cr_assert_eq(st, want, "%s", shardnet_last_error());
    assert_error_has(needle);
    rm_tmpdir(dir);
}

Test(quantized, matmul_nbits_with_bad_blocks_or_bytes_is_refused)
{
    /* the right form runs */
    expect_nbits_refused(32, 32, 0, SHARDNET_OK, "");
    expect_nbits_refused(12, 32, 0, SHARDNET_INVALID_ARGUMENT,
                         "block_size a power of two");
    expect_nbits_refused(32, 31, 0, SHARDNET_INVALID_ARGUMENT,
                         "B must be a constant uint8 of N x 1 blocks x 16");
    expect_nbits_refused(32, 200, 0, SHARDNET_INVALID_ARGUMENT,
                         "B must be a constant uint8");
    expect_nbits_refused(32, 32, 1, SHARDNET_UNSUPPORTED,
                         "g_idx (act-order) is not supported");
}
