/*
 * A crew (private): the threads a split runs its local devices with, one
 * per device, each bound to its device for its whole life and parked
 * between runs; the caller drives the first device itself.  The tensor
 * split (shard_run.c) and the data split (data_split.c) run every device
 * at once through one.
 */
#ifndef SN_CREW_H
#define SN_CREW_H

#include "backend/backend.h"

typedef struct sn_crew sn_crew;

/* A member's part of a run: member is an index into the crew's devs. */
typedef shardnet_status (*sn_crew_fn)(void *ctx, size_t member);

/* A crew for devs[members[0..n)] (n may be 0), each run calling
 * fn(ctx, members[k]) once per member; a thread is started for every
 * member but the first. */
shardnet_status sn_crew_start(sn_device *const *devs, const size_t *members,
                              size_t n, sn_crew_fn fn, void *ctx,
                              sn_crew **out);
/* One run: every member's part at once, the first on the calling thread
 * (bound to its device meanwhile); returns when all are done, with the
 * first member's failure as it is, else the first other's, naming its
 * device.  What the parts read must be in place before the call. */
shardnet_status sn_crew_run(sn_crew *c);
/* Stop and join the threads.  NULL is ignored. */
void sn_crew_stop(sn_crew *c);

#endif /* SN_CREW_H */
