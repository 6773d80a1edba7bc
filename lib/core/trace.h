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

/* Poll ready(arg) for up to seconds, yielding the core between tries; 1
 * once it holds.  A thread that has a core to itself sees an event within
 * microseconds this way, where a sleeper on a condition needs a wake-up of
 * tens of them; the caller sleeps after a 0. */
int sn_poll(int (*ready)(const void *arg), const void *arg, double seconds);

/* Spin on ready(arg) for up to `tries` tries, with a pause instruction
 * between them (no system call); 1 once it holds.  For a wait that is
 * usually over in a microsecond or two, where even a yield costs more
 * than the wait; the caller polls with sn_poll after a 0. */
int sn_spin(int (*ready)(const void *arg), const void *arg, unsigned tries);

#endif /* SN_TRACE_H */
