/* Execution traces (private side): see trace.c. */
#ifndef SN_TRACE_H
#define SN_TRACE_H

#include "shardnet.h"

/* Is a trace being recorded? */
int sn_trace_on(void);
/* Seconds on the monotonic clock. */
double sn_trace_now(void);
/* One complete event on the track (a device's name) from t0 to t1. */
void sn_trace_add(const char *track, const char *cat, const char *name,
                  double t0, double t1);

#endif /* SN_TRACE_H */
