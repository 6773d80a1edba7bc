/* Status messages, the per-thread error detail and the log callback. */
#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

/* Long enough for an OpenCL build log excerpt. */
#define SN_ERROR_CAP 4096

static _Thread_local char last_error[SN_ERROR_CAP];

static shardnet_log_fn log_fn;
static shardnet_log_level log_level;
static void *log_user;

const char *shardnet_version(void)
{
    return PACKAGE_VERSION;
}

unsigned shardnet_version_hex(void)
{
    return SHARDNET_VERSION_HEX;
}

const char *shardnet_status_str(shardnet_status status)
{
    switch (status) {
#define SN_CASE_(name, value, msg)                                            \
    case SHARDNET_##name:                                                     \
        return msg;
        SHARDNET_STATUS_MAP(SN_CASE_)
#undef SN_CASE_
    }
    return "unknown status";
}

const char *shardnet_last_error(void)
{
    return last_error;
}

void sn_error_clear(void)
{
    last_error[0] = '\0';
}

shardnet_status sn_error(shardnet_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    sn_log(SHARDNET_LOG_DEBUG, "error: %s", last_error);
    return status;
}

shardnet_status sn_error_prefix(shardnet_status status, const char *fmt, ...)
{
    char prefix[512];
    size_t plen, olen;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* "prefix: old", the old message cut where the buffer ends. */
    plen = strlen(prefix);
    olen = strlen(last_error);
    if (olen > SN_ERROR_CAP - 1 - plen - 2)
        olen = SN_ERROR_CAP - 1 - plen - 2;
    memmove(last_error + plen + 2, last_error, olen);
    memcpy(last_error, prefix, plen);
    memcpy(last_error + plen, ": ", 2);
    last_error[plen + 2 + olen] = '\0';
    return status;
}

void shardnet_set_log(shardnet_log_fn fn, shardnet_log_level level, void *user)
{
    log_fn = fn;
    log_level = level;
    log_user = user;
}

void sn_log(shardnet_log_level level, const char *fmt, ...)
{
    char msg[SN_ERROR_CAP];
    va_list ap;
    if (!log_fn || level > log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}

const char *sn_format_dims(char *buf, size_t cap, int rank,
                           const int64_t *dims)
{
    size_t n = 0;
    if (!cap)
        return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "",
                              dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}
