/*
 * Error detail and logging (private).
 *
 * sn_error() records a message for shardnet_last_error() on the calling
 * thread and returns the status, so a failure reads
 *     return sn_error(SHARDNET_NO_DEVICE, "unknown device '%s'", tok);
 * sn_error_append() adds to the message already recorded (for context such
 * as "while building kernels_cl/reduce.cl: ...").
 */
#ifndef SN_ERROR_H
#define SN_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include "shardnet.h"

#if defined(__GNUC__)
#define SN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SN_PRINTF(f, a)
#endif

shardnet_status sn_error(shardnet_status status, const char *fmt, ...)
    SN_PRINTF(2, 3);
shardnet_status sn_error_prefix(shardnet_status status, const char *fmt, ...)
    SN_PRINTF(2, 3);
void sn_error_clear(void);
/* dims written out for a message, "[4, 96, 128]" (cut short if cap is);
 * returns buf. */
const char *sn_format_dims(char *buf, size_t cap, int rank,
                           const int64_t *dims);
void sn_log(shardnet_log_level level, const char *fmt, ...) SN_PRINTF(2, 3);

#endif /* SN_ERROR_H */
