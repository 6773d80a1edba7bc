/* OpenCL programs: embedded sources, building, the on-disk binary cache. */
#ifndef SN_CL_PROGRAM_H
#define SN_CL_PROGRAM_H

#include <stddef.h>

/* One kernels_cl/<name>.cl file, embedded at build time (sources.c). */
typedef struct sn_cl_source {
    const char *name; /* file name, e.g. "elementwise.cl" */
    const char *text; /* NUL-terminated */
    size_t len;       /* bytes, without the NUL */
} sn_cl_source;

extern const sn_cl_source sn_cl_sources[];
extern const size_t sn_cl_source_count;

/*
 * The rest needs the OpenCL headers.  The generated sources.c includes this
 * file without config.h, hence the default API version.
 */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/opencl.h>
#else
#include <CL/cl.h>
#endif

#include "core/config.h"
#include "shardnet.h"

/* Options every program is built with (part of the cache key). */
#define SN_CL_BUILD_OPTIONS "-cl-std=CL1.2"

/*
 * Build the program of kernels_cl/<name> for one device: from
 * <kernel_dir>/<name> when config (the device's context's, NULL: the
 * process's) names a kernel_dir (SHARDNET_CL_DIR), else from the embedded
 * table; through the on-disk binary cache in config's cache folder (see
 * program.c) when it can.
 * \param label  how messages name the device, e.g. "cl:0 (pthread-...)".
 * \param[out] out  a built program, released by the caller.
 * \return SHARDNET_BUILD_ERROR with the build log in the error detail,
 *         SHARDNET_IO_ERROR for an unreadable kernel_dir file.
 */
shardnet_status sn_cl_program_build(const sn_config *config, cl_context ctx,
                                    cl_device_id device, const char *label,
                                    const char *name, cl_program *out);

/* Name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or "unknown". */
const char *sn_cl_error_name(cl_int err);

#endif /* SN_CL_PROGRAM_H */
