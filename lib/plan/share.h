/*
 * What devices share (private): which of a list of devices compute on the
 * same cores or read the same memory, from what hwloc and the drivers
 * tell, and how much of its speed each keeps when they run at once,
 * measured (share.c).  The cost models of the splits that run devices at
 * once (layer, hybrid, data, tensor) slow each device by what it keeps;
 * one device alone keeps all.
 */
#ifndef SN_SHARE_H
#define SN_SHARE_H

#include "backend/backend.h"

typedef enum sn_sharing {
    SN_SHARES_NOTHING,
    SN_SHARES_MEMORY, /* the same memory (and its bandwidth) */
    SN_SHARES_CORES   /* the same CPU cores */
} sn_sharing;

/* What a and b share: cores where a CPU device's cores overlap another's
 * or an OpenCL CPU device (sn_device.host_cores) meets a CPU device or
 * another such; memory where two CPU devices sit on one NUMA node, are
 * partitions of one device, or a device with memory unified with the
 * host's meets a CPU device; nothing across processes. */
sn_sharing sn_devices_sharing(const sn_device *a, const sn_device *b);

/* keep[d] for devs[0..n): the share of its speed devs[d] keeps while
 * every listed device it shares something with computes too (1: it shares
 * nothing).  Measured once per process for each group of devices that
 * share (every device of the group running products at once against
 * each alone, the best of three rounds of each, about 0.1 s per device)
 * and kept.  job: every process of a job of several calls this alike
 * (collective), and each device's figure comes from its own process; 0:
 * this process alone (its own devices).  A line per group that shares is
 * appended to report at *len (report may be NULL). */
shardnet_status sn_devices_contention(sn_device *const *devs, size_t n,
                                      int job,
                                      double *keep, char *report, size_t cap,
                                      size_t *len);

#endif /* SN_SHARE_H */
