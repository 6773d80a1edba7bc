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
    }                                                                         \
    static void context_teardown(void)                                        \
    {                                                                         \
        shardnet_context_free(ctx);                                           \
    }                                                                         \
    TestSuite(name, .init = context_setup, .fini = context_teardown,          \
              .timeout = seconds)

#endif /* SN_CONTEXT_SUITE_H */
