/* Version, status messages, error detail and the log callback. */
#include <config.h>

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "shardnet.h"

Test(version, run_time_version_matches_the_headers)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", SHARDNET_VERSION_MAJOR,
             SHARDNET_VERSION_MINOR, SHARDNET_VERSION_PATCH);
    cr_assert_str_eq(shardnet_version(), want);
    cr_assert_str_eq(SHARDNET_VERSION_STRING, want);
    cr_assert_eq(SHARDNET_VERSION_HEX, SHARDNET_VERSION_MAJOR * 0x10000 +
                                           SHARDNET_VERSION_MINOR * 0x100 +
                                           SHARDNET_VERSION_PATCH);
}

Test(version, numeric_run_time_version_matches_the_headers)
{
    unsigned v = shardnet_version_hex();
    char text[32];
    cr_assert_eq(v, SHARDNET_VERSION_HEX, "library 0x%06x, headers 0x%06x", v,
                 (unsigned)SHARDNET_VERSION_HEX);
    /* The number and the string tell the same version. */
    snprintf(text, sizeof text, "%u.%u.%u", v >> 16, (v >> 8) & 0xff,
             v & 0xff);
    cr_assert_str_eq(text, shardnet_version());
#if SHARDNET_VERSION_HEX < 0x000001
#error "SHARDNET_VERSION_HEX does not compare as a number in #if"
#endif
}

Test(dtype, every_type_has_its_name)
{
    static const struct {
        shardnet_dtype dtype;
        const char *name;
    } names[] = {
        {SHARDNET_DTYPE_UNDEFINED, "undefined"},
        {SHARDNET_DTYPE_FLOAT32, "float32"}, {SHARDNET_DTYPE_UINT8, "uint8"},
        {SHARDNET_DTYPE_INT8, "int8"},       {SHARDNET_DTYPE_UINT16, "uint16"},
        {SHARDNET_DTYPE_INT16, "int16"},     {SHARDNET_DTYPE_INT32, "int32"},
        {SHARDNET_DTYPE_INT64, "int64"},     {SHARDNET_DTYPE_BOOL, "bool"},
        {SHARDNET_DTYPE_FLOAT16, "float16"}, {SHARDNET_DTYPE_FLOAT64, "float64"},
        {SHARDNET_DTYPE_UINT32, "uint32"},   {SHARDNET_DTYPE_UINT64, "uint64"},
        {SHARDNET_DTYPE_BFLOAT16, "bfloat16"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cr_assert_str_eq(shardnet_dtype_name(names[i].dtype), names[i].name);
        /* every named type but undefined has a size */
        cr_assert_eq(shardnet_dtype_size(names[i].dtype) == 0,
                     names[i].dtype == SHARDNET_DTYPE_UNDEFINED, "%s",
                     names[i].name);
    }
    cr_assert_str_eq(shardnet_dtype_name((shardnet_dtype)8), "unknown");
    cr_assert_str_eq(shardnet_dtype_name((shardnet_dtype)-1), "unknown");
}

Test(status, every_code_has_its_own_message)
{
    const shardnet_status codes[] = {
#define CODE_(name, value, msg) SHARDNET_##name,
        SHARDNET_STATUS_MAP(CODE_)
#undef CODE_
    };
    size_t n = sizeof codes / sizeof codes[0];
    cr_assert_str_eq(shardnet_status_str(SHARDNET_OK), "success");
    for (size_t i = 0; i < n; i++) {
        cr_assert_neq(strcmp(shardnet_status_str(codes[i]), "unknown status"),
                      0);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(shardnet_status_str(codes[i]),
                              shardnet_status_str(codes[j]));
    }
    cr_assert_str_eq(shardnet_status_str((shardnet_status)12345),
                     "unknown status");
}

Test(status, error_detail_is_kept_per_call_and_prefixed)
{
    cr_assert_eq(sn_error(SHARDNET_NO_DEVICE, "no device '%s'", "cl:9"),
                 SHARDNET_NO_DEVICE);
    cr_assert_str_eq(shardnet_last_error(), "no device 'cl:9'");
    sn_error_prefix(SHARDNET_NO_DEVICE, "while %s", "testing");
    cr_assert_str_eq(shardnet_last_error(), "while testing: no device 'cl:9'");
    sn_error_clear();
    cr_assert_str_eq(shardnet_last_error(), "");
}

static int log_calls;
static char log_last[256];

static void logger(shardnet_log_level level, const char *msg, void *user)
{
    log_calls++;
    snprintf(log_last, sizeof log_last, "%d %s %s", (int)level, msg,
             (const char *)user);
}

Test(log, callback_receives_messages_up_to_its_level)
{
    shardnet_set_log(logger, SHARDNET_LOG_INFO, "u");
    sn_log(SHARDNET_LOG_DEBUG, "hidden");
    cr_assert_eq(log_calls, 0);
    sn_log(SHARDNET_LOG_WARN, "shown %d", 7);
    cr_assert_eq(log_calls, 1);
    cr_assert_str_eq(log_last, "1 shown 7 u");
    shardnet_set_log(NULL, SHARDNET_LOG_DEBUG, NULL);
    sn_log(SHARDNET_LOG_ERROR, "off");
    cr_assert_eq(log_calls, 1);
}

Test(broadcast, merges_dimensions_and_zeroes_broadcast_strides)
{
    sn_binary_desc d = {0};
    const size_t a[] = {3, 1, 5}, b[] = {4, 1};
    cr_assert_eq(sn_binary_broadcast(&d, 3, a, 2, b), SHARDNET_OK);
    cr_assert_eq(d.rank, 3);
    cr_assert_eq(d.shape[0], 3);
    cr_assert_eq(d.shape[1], 4);
    cr_assert_eq(d.shape[2], 5);
    cr_assert_eq(d.stride_a[0], 5);
    cr_assert_eq(d.stride_a[1], 0);
    cr_assert_eq(d.stride_a[2], 1);
    cr_assert_eq(d.stride_b[0], 0);
    cr_assert_eq(d.stride_b[1], 1);
    cr_assert_eq(d.stride_b[2], 0);

    /* Same shapes collapse to one contiguous dimension. */
    const size_t s[] = {2, 3, 4};
    cr_assert_eq(sn_binary_broadcast(&d, 3, s, 3, s), SHARDNET_OK);
    cr_assert_eq(d.rank, 1);
    cr_assert_eq(d.shape[0], 24);
    cr_assert_eq(d.stride_a[0], 1);
    cr_assert_eq(d.stride_b[0], 1);

    /* A scalar against a matrix. */
    cr_assert_eq(sn_binary_broadcast(&d, 2, s, 0, NULL), SHARDNET_OK);
    cr_assert_eq(d.rank, 1);
    cr_assert_eq(d.stride_b[0], 0);
}

Test(broadcast, rejects_incompatible_shapes)
{
    sn_binary_desc d = {0};
    const size_t a[] = {3, 4}, b[] = {5};
    cr_assert_eq(sn_binary_broadcast(&d, 2, a, 1, b),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "cannot be broadcast"));
}
