/*
 * Execution traces in the Chrome trace-event format (opens in Perfetto or
 * chrome://tracing): one track per device, complete events ("ph":"X") for
 * kernels, transfers and micro-batches.  While tracing, plans wait for each
 * kernel to finish so that its time is its own; that slows runs down.
 */
#include <config.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/grow.h"
#include "core/trace.h"

typedef struct event {
    int track;
    char name[96];
    const char *cat;
    double t0, t1; /* seconds */
} event;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int active;
static double origin;
static event *events;
static size_t nevents, cap;
static char tracks[64][32];
static int ntracks;

double sn_trace_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int sn_poll(int (*ready)(const void *arg), const void *arg, double seconds)
{
    if (ready(arg)) /* no clock read where nothing needs waiting for */
        return 1;
    double t0 = sn_trace_now();
    for (;;) {
        if (ready(arg))
            return 1;
        if (sn_trace_now() - t0 >= seconds)
            return 0;
        sched_yield();
    }
}

/* Tell the core that it is spinning: on x86 a pause of a few tens of
 * nanoseconds that also leaves the other hardware thread of the core
 * its share. */
static void relax(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif defined(__GNUC__) && defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int sn_spin(int (*ready)(const void *arg), const void *arg, unsigned tries)
{
    for (unsigned k = 0; k < tries; k++) {
        if (ready(arg))
            return 1;
        relax();
    }
    return ready(arg);
}

int sn_trace_on(void)
{
    return __atomic_load_n(&active, __ATOMIC_RELAXED);
}

void sn_trace_add(const char *track, const char *cat, const char *name,
                  double t0, double t1)
{
    int tr = -1;
    if (!sn_trace_on())
        return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntracks; i++)
        if (!strcmp(tracks[i], track))
            tr = i;
    if (tr < 0 && ntracks < 64) {
        tr = ntracks++;
        snprintf(tracks[tr], sizeof tracks[tr], "%s", track);
    }
    if (tr >= 0) {
        event *ne = sn_grow(events, &cap, nevents, sizeof *ne, 1024);
        if (ne)
            events = ne;
    }
    if (tr >= 0 && nevents < cap) {
        event *e = &events[nevents++];
        e->track = tr;
        e->cat = cat;
        snprintf(e->name, sizeof e->name, "%s", name);
        e->t0 = t0;
        e->t1 = t1;
    }
    pthread_mutex_unlock(&lock);
}

shardnet_status shardnet_trace_start(void)
{
    pthread_mutex_lock(&lock);
    nevents = 0;
    ntracks = 0;
    origin = sn_trace_now();
    __atomic_store_n(&active, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return SHARDNET_OK;
}

/* Names go into JSON strings: keep them to safe characters. */
static void put_name(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(*s == '"' || *s == '\\' || (unsigned char)*s < 0x20 ? '_' : *s,
              f);
}

shardnet_status shardnet_trace_stop(const char *path)
{
    FILE *f;
    shardnet_status st = SHARDNET_OK;
    pthread_mutex_lock(&lock);
    __atomic_store_n(&active, 0, __ATOMIC_RELAXED);
    if (!path)
        goto out;
    f = fopen(path, "w");
    if (!f) {
        st = sn_error(SHARDNET_IO_ERROR, "cannot write the trace to %s", path);
        goto out;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    for (int i = 0; i < ntracks; i++) {
        fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\","
                   "\"args\":{\"name\":\"",
                i + 1);
        put_name(f, tracks[i]);
        fputs("\"}},\n", f);
    }
    for (size_t i = 0; i < nevents; i++) {
        const event *e = &events[i];
        fprintf(f, "{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"cat\":\"%s\","
                   "\"name\":\"",
                e->track + 1, e->cat);
        put_name(f, e->name);
        fprintf(f, "\",\"ts\":%.3f,\"dur\":%.3f}%s\n",
                (e->t0 - origin) * 1e6, (e->t1 - e->t0) * 1e6,
                i + 1 < nevents ? "," : "");
    }
    fputs("]}\n", f);
    if (fclose(f) != 0)
        st = sn_error(SHARDNET_IO_ERROR, "cannot write the trace to %s", path);
out:
    free(events);
    events = NULL;
    nevents = cap = 0;
    pthread_mutex_unlock(&lock);
    return st;
}
