/*
 * The cache folder (private): where the device profiles (lib/plan) and the
 * compiled OpenCL programs (backends/opencl) are kept between runs.  It is
 * in core because both layers need it and a backend sees only the backend
 * interface and core.
 */
#ifndef SN_CACHEDIR_H
#define SN_CACHEDIR_H

#include <stddef.h>

/* The cache folder, created if needed, in dir (cap bytes):
 * SHARDNET_CACHE_DIR, else $XDG_CACHE_HOME/shardnet, else
 * $HOME/.cache/shardnet.  0 when there is none to use. */
int sn_cache_dir(char *dir, size_t cap);

#endif /* SN_CACHEDIR_H */
