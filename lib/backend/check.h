/*
 * What the checked entry points of lib/backend share (private to
 * device.c and kernels.c).
 */
#ifndef SN_BACKEND_CHECK_H
#define SN_BACKEND_CHECK_H

#include "backend/backend.h"

/* dev exists, is this process's and has `member` (the backend's function
 * for `what`): OK, or an error that names what is missing. */
shardnet_status sn_check_device(const sn_device *dev, const void *member,
                                const char *what);

#endif /* SN_BACKEND_CHECK_H */
