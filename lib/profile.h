/*
 * Device profiles (private): what the cost models know of a device, measured
 * on the device once and kept on disk.
 *
 * A profile holds the GEMM speed on a large and a small product, the cost
 * of one kernel launch (a tiny kernel, launched and waited for) and the
 * host->device and device->host bandwidth of an 8 MiB buffer.  It is
 * measured the first time a process asks for it and remembered in
 * $SHARDNET_CACHE_DIR (else $XDG_CACHE_HOME/shardnet, else
 * ~/.cache/shardnet)/profiles-1.txt, keyed by the device's name, model,
 * driver, cores, the library's version and the BLAS kernel choice, so a
 * later process reads it instead of measuring (about a tenth of a second
 * per device).  SHARDNET_REPROFILE=1 measures again and replaces the line.
 */
#ifndef SN_PROFILE_H
#define SN_PROFILE_H

#include <stddef.h>

#include "backend.h"

typedef struct sn_profile {
    double gemm_flops;       /* flops/s on a 384^3 product */
    double gemm_small_flops; /* flops/s on a 64^3 product */
    double launch_s;         /* seconds per kernel launch and wait */
    double h2d_bps, d2h_bps; /* bytes/s, 8 MiB buffer write and read */
    int from_disk;           /* read from the cache file */
} sn_profile;

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

/* The cache folder (created if needed) in dir; 0 when there is none. */
int sn_cache_dir(char *dir, size_t cap);

#endif /* SN_PROFILE_H */
