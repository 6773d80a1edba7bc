/*
 * Device profiles (private): what the cost models know of a device, measured
 * on the device once and kept on disk.
 *
 * A profile holds the GEMM speed on a large and a small product, the cost
 * of one kernel launch (a tiny kernel, launched and waited for), the
 * host->device and device->host bandwidth of an 8 MiB buffer and the
 * speed a one-row product reads its weight at (what a batch-1 product
 * costs: its weights' bytes over that speed).  It is
 * measured the first time a process asks for it and remembered in
 * $SHARDNET_CACHE_DIR (else $XDG_CACHE_HOME/shardnet, else
 * ~/.cache/shardnet)/profiles-2.txt, keyed by the device's name, model,
 * driver, cores, the library's version and the BLAS kernel choice, so a
 * later process reads it instead of measuring (about a tenth of a second
 * per device).
 *
 * Profiles must not lie forever: one measured while the machine was busy
 * would slow every later plan.  The policy:
 *  - a busy machine only makes a measurement slower, so repeated
 *    measurements keep the best of each figure: a profile read from the
 *    cache is checked by a quick measurement (a few milliseconds), and a
 *    figure the device beats now by more than 5x has the device measured
 *    again, the best figures kept and the cache rewritten (a profile 30x
 *    too slow heals in the next process that reads it; launch costs under
 *    10 us are not compared: they vary more than that and steer nothing);
 *  - the best-of never lowers a figure, so a profile too fast (measured on
 *    other hardware under the same key, or edited) heals another way: an
 *    "auto" session whose fastest of its second to eighth runs takes over
 *    10x (and 1 ms) more or less than its plan's estimate has its devices
 *    measured again and their profiles replaced (sn_profiles_check_run);
 *    a replacement taken under load is healed by the quick check of a
 *    later process.  SHARDNET_REPROFILE=1 measures again and replaces, too;
 *  - the file has one entry per key and is only replaced whole (a
 *    temporary file renamed over it, under a lock beside it);
 *  - every figure read is checked (finite, within the range a device can
 *    have); a damaged entry, or a file that is not a profile cache (binary,
 *    foreign, too large, not a regular file) is ignored with a warning
 *    naming the file and the field, and the file is written cleanly again.
 */
#ifndef SN_PROFILE_H
#define SN_PROFILE_H

#include <stddef.h>

#include "backend/backend.h"

typedef struct sn_profile {
    double gemm_flops;       /* flops/s on a 384^3 product */
    double gemm_small_flops; /* flops/s on a 64^3 product */
    double launch_s;         /* seconds per kernel launch and wait */
    double h2d_bps, d2h_bps; /* bytes/s, 8 MiB buffer write and read */
    double read_bps;         /* bytes/s of a weight read by a one-row
                              * product (2048 x 4096 floats) */
    int from_disk;           /* read from the cache file, not measured */
} sn_profile;

/* A collective's fixed cost beyond its devices' launch costs (thread
 * hand-offs at the rendezvous), for estimates. */
#define SN_COLL_LATENCY_S 20e-6

/* The device's profile (measured, or read from the cache; never NULL).
 * Thread-safe; the pointer stays valid for the process. */
const sn_profile *sn_device_profile(sn_device *dev);
/* Another process's device: its profile, as measured there (remote
 * devices are never measured here; before this, they get guesses). */
void sn_profile_remember(sn_device *dev, const sn_profile *p);
/* In a job of several processes (collective): each listed device's
 * profile, measured on its own process, remembered on the others. */
shardnet_status sn_profiles_share(sn_device *const *devs, size_t ndev);
/* A device's GEMM speed in flops/s (its profile's large product). */
double sn_device_speed(sn_device *dev);
/* Bytes/s of staging data through the host: the slower direction. */
double sn_profile_staging_bw(const sn_profile *p);

/* A session's run took measured_s where its plan estimated estimate_s:
 * over 10x and 1 ms off either way, the profiles of the listed devices of this
 * process are measured again and replace the old ones, here and in the
 * cache (the next plan uses them).  Not collective. */
void sn_profiles_check_run(sn_device *const *devs, size_t ndev,
                           double estimate_s, double measured_s);
/* Tests: drop this process's profiles (as a new process starts); no
 * profile pointer may be in use. */
void sn_profiles_forget(void);

#endif /* SN_PROFILE_H */
