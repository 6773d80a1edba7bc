/* Device partitions as device lists name them (partition.c): the
 * notation's parser and the names it gives; the context (context.c) makes
 * the devices. */
#ifndef SN_API_PARTITION_H
#define SN_API_PARTITION_H

#include <stddef.h>

#include "shardnet.h"

/* Units [first, first + count) of a device: a CPU device's cores, counted
 * among those it uses; an OpenCL CPU device's compute units. */
typedef struct sn_part {
    unsigned first, count;
} sn_part;

/*
 * The partitions that `suffix`, what follows a device's name in a device
 * list's item, names on that device (`device`, of `units` units, each a
 * `unit`: "core", "compute unit"):
 *   [A]    unit A
 *   [A-B]  units A to B
 *   /P     the device cut into P parts of whole units, as even as they
 *          can be, in order: all P of them
 *   /P.I   part I (0 to P - 1) of those
 * *parts (malloc'ed, the caller frees it) and *n of them.  A bad suffix
 * is SHARDNET_NO_DEVICE, with a message that quotes `item` (the whole
 * item) and says why.
 */
shardnet_status sn_partition_parse(const char *item, const char *suffix,
                                   const char *device, unsigned units,
                                   const char *unit, sn_part **parts,
                                   size_t *n);

/* The partition's name: the device's with "[A]" or "[A-B]" after it, in
 * buf (cap bytes); 0 where it does not fit. */
int sn_partition_name(char *buf, size_t cap, const char *device, sn_part p);

#endif /* SN_API_PARTITION_H */
