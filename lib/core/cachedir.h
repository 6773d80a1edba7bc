/*
 * The cache folder (private): where the device profiles (lib/plan) and the
 * compiled OpenCL programs (backends/opencl) are kept between runs.  It is
 * in core because both layers need it and a backend sees only the backend
 * interface and core.
 */
#ifndef SN_CACHEDIR_H
#define SN_CACHEDIR_H

#include <stddef.h>

#include "core/config.h"

/* The cache folder, created if needed, in dir (cap bytes): config's
 * cache_dir (a context's option, else SHARDNET_CACHE_DIR; config NULL: the
 * process's), else $XDG_CACHE_HOME/shardnet, else $HOME/.cache/shardnet.
 * 0 when there is none to use. */
int sn_cache_dir(const sn_config *config, char *dir, size_t cap);

#endif /* SN_CACHEDIR_H */
