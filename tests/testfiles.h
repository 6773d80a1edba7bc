/*
 * File helpers shared by the Criterion suites that write test files
 * (test_onnx, test_hostile, test_profile, test_split): whole files in and
 * out, and a temporary folder removed one level deep.  Each failure is a test
 * failure naming the file.  Include after <criterion/criterion.h>.
 */
#ifndef SN_TESTFILES_H
#define SN_TESTFILES_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The whole file (malloc'ed, one byte more, zero: usable as text). */
static inline uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b;
    long n;
    cr_assert(f, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc(n > 0 ? (size_t)n + 1 : 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n > 0 ? n : 0] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

static inline void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot create %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* A fresh folder /tmp/sn-NAME-XXXXXX, removed by rm_tmpdir. */
static inline void make_tmpdir(const char *name, char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/sn-%s-XXXXXX", name);
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

/* Removes dir and what is in it, one level deep (links not followed). */
static inline void rm_tmpdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    if (!d)
        return;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

#endif
