/* The cache folder shared by the profiles and the OpenCL programs: see
 * cachedir.h. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/cachedir.h"
#include "core/error.h"

/* mkdir -p; 0 on success (the folder exists afterwards). */
static int make_dirs(char *path)
{
    struct stat sb;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

/* See cachedir.h. */
int sn_cache_dir(const sn_config *config, char *dir, size_t cap)
{
    const char *given = sn_config_or_env(config)->cache_dir, *env;
    int w;
    if (*given) {
        w = snprintf(dir, cap, "%s", given);
    } else if ((env = getenv("XDG_CACHE_HOME")) && *env) {
        w = snprintf(dir, cap, "%s/shardnet", env);
    } else if ((env = getenv("HOME")) && *env) {
        w = snprintf(dir, cap, "%s/.cache/shardnet", env);
    } else {
        return 0;
    }
    if (w < 0 || (size_t)w >= cap)
        return 0;
    if (make_dirs(dir) != 0) {
        sn_log(SHARDNET_LOG_DEBUG, "cache folder %s unusable: %s", dir,
               strerror(errno));
        return 0;
    }
    return 1;
}
