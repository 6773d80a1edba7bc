/*
 * A Criterion suite whose tests share one context of every device, `ctx`,
 * made before each test and freed after it (context_setup and
 * context_teardown, for a second suite of the same file).  Include after
 * <criterion/criterion.h> and shardnet.h.
 */
#ifndef SN_CONTEXT_SUITE_H
#define SN_CONTEXT_SUITE_H

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

#endif /* SN_CONTEXT_SUITE_H */
