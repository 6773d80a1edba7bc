/*
 * A Criterion suite whose tests share one context of every device, `ctx`,
 * made before each test and freed after it (context_setup and
 * context_teardown, for a second suite of the same file).  Include after
 * <criterion/criterion.h> and shardnet.h.
 */
#ifndef SN_CONTEXT_SUITE_H
#define SN_CONTEXT_SUITE_H

#include <stdio.h>
#include <string.h>

#define SN_CONTEXT_SUITE(name, seconds)                                       \
    static shardnet_context_t *ctx;                                           \
    static void context_setup(void)                                           \
    {                                                                         \
        cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",        \
                     shardnet_last_error());                                  \
        cr_assert_gt(shardnet_device_count(ctx), 0);                          \
    }                                                                         \
    static void context_teardown(void)                                        \
    {                                                                         \
        shardnet_context_free(ctx);                                           \
    }                                                                         \
    TestSuite(name, .init = context_setup, .fini = context_teardown,          \
              .timeout = seconds)

/* The body once per device of ctx, as `dev` (an sn_device *: include
 * backend/backend.h); built with SN_TEST_CUDA_EMU, once on the emulated
 * CUDA device instead (tests/cuda_emu.h). */
#ifdef SN_TEST_CUDA_EMU
#include "cuda_emu.h"
#define FOR_EACH_DEVICE(dev)                                                  \
    for (sn_device *dev = sn_cuda_emu_device(); dev; dev = NULL)
#else
#define FOR_EACH_DEVICE(dev)                                                  \
    for (size_t dev##_i = 0; dev##_i < shardnet_device_count(ctx);           \
         dev##_i++)                                                           \
        for (sn_device *dev = sn_context_device(ctx, dev##_i); dev; dev = NULL)
#endif

/* The kinds of ctx's devices, each once, in the context's order ("cpu",
 * "cpu,cl", "cpu,cuda"...), from their names. */
static inline void kinds_here(shardnet_context_t *c, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < shardnet_device_count(c); i++) {
        shardnet_device_info info;
        char kind[sizeof info.name + 2];
        cr_assert_eq(shardnet_device_get_info(c, i, &info), SHARDNET_OK);
        snprintf(kind, sizeof kind, ",%.*s,", (int)strcspn(info.name, ":"),
                 info.name);
        char listed[256];
        snprintf(listed, sizeof listed, ",%s,", buf);
        if (strstr(listed, kind))
            continue;
        kind[strlen(kind) - 1] = '\0';
        used += (size_t)snprintf(buf + used, cap - used, "%s",
                                 kind + (used == 0));
        cr_assert_lt(used, cap);
    }
}

#endif /* SN_CONTEXT_SUITE_H */
