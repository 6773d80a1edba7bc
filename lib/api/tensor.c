/* Tensors of the public API: the element types' sizes and names, and
 * tensors read from and written to files (.npy, ONNX .pb) for callers
 * that feed a session from files or keep its outputs. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "import/tensorfile.h"

size_t shardnet_dtype_size(shardnet_dtype dtype)
{
    switch (dtype) {
    case SHARDNET_DTYPE_FLOAT32:
    case SHARDNET_DTYPE_UINT8:
    case SHARDNET_DTYPE_INT8:
    case SHARDNET_DTYPE_INT32:
    case SHARDNET_DTYPE_INT64:
    case SHARDNET_DTYPE_BOOL:
    case SHARDNET_DTYPE_FLOAT64:
    case SHARDNET_DTYPE_UINT16:
    case SHARDNET_DTYPE_INT16:
    case SHARDNET_DTYPE_UINT32:
    case SHARDNET_DTYPE_UINT64:
    case SHARDNET_DTYPE_FLOAT16:
    case SHARDNET_DTYPE_BFLOAT16:
        return sn_dtype_size((sn_dtype)dtype);
    default:
        return 0;
    }
}

const char *shardnet_dtype_name(shardnet_dtype dtype)
{
    switch (dtype) {
    case SHARDNET_DTYPE_UNDEFINED: return "undefined";
    case SHARDNET_DTYPE_FLOAT32: return "float32";
    case SHARDNET_DTYPE_UINT8: return "uint8";
    case SHARDNET_DTYPE_INT8: return "int8";
    case SHARDNET_DTYPE_UINT16: return "uint16";
    case SHARDNET_DTYPE_INT16: return "int16";
    case SHARDNET_DTYPE_INT32: return "int32";
    case SHARDNET_DTYPE_INT64: return "int64";
    case SHARDNET_DTYPE_BOOL: return "bool";
    case SHARDNET_DTYPE_FLOAT16: return "float16";
    case SHARDNET_DTYPE_FLOAT64: return "float64";
    case SHARDNET_DTYPE_UINT32: return "uint32";
    case SHARDNET_DTYPE_UINT64: return "uint64";
    case SHARDNET_DTYPE_BFLOAT16: return "bfloat16";
    }
    return "unknown";
}

shardnet_status shardnet_tensor_load(const char *path, shardnet_tensor *out)
{
    sn_host_tensor t = {0};
    shardnet_status st;
    if (!path || !out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "tensor: NULL argument");
    memset(out, 0, sizeof *out);
    if ((st = sn_tensor_load(path, &t)) != SHARDNET_OK)
        return st;
    if (!shardnet_dtype_size((shardnet_dtype)t.dtype)) {
        sn_host_tensor_free(&t);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: tensors of type %s are not supported: the file "
                        "cannot be read",
                        path, sn_dtype_name(t.dtype));
    }
    out->info.name = t.name; /* released with the tensor */
    out->info.dtype = (shardnet_dtype)t.dtype;
    out->info.rank = t.rank;
    memcpy(out->info.dims, t.dims, sizeof out->info.dims);
    out->data = t.data;
    out->nbytes = t.nbytes;
    return SHARDNET_OK;
}

void shardnet_tensor_free(shardnet_tensor *tensor)
{
    if (!tensor)
        return;
    free((char *)tensor->info.name);
    free(tensor->data);
    memset(tensor, 0, sizeof *tensor);
}

void shardnet_tensor_release(shardnet_tensor *tensor)
{
    shardnet_tensor_free(tensor);
}

shardnet_status shardnet_tensor_save(const char *path,
                                     const shardnet_tensor_info *info,
                                     const void *data)
{
    sn_host_tensor t = {0};
    size_t count = 1;
    if (!path || !info || info->rank < 0 ||
        info->rank > SHARDNET_MAX_DIMS || !shardnet_dtype_size(info->dtype))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "tensor save: bad argument");
    for (int i = 0; i < info->rank; i++) {
        if (info->dims[i] < 0)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "tensor save: negative dimension");
        count *= (size_t)info->dims[i];
    }
    if (!data && count) /* an empty tensor needs no data */
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: tensor save: NULL data",
                        path);
    t.dtype = (sn_dtype)info->dtype;
    t.rank = info->rank;
    memcpy(t.dims, info->dims, (size_t)info->rank * sizeof t.dims[0]);
    t.data = (void *)data;
    t.nbytes = count * shardnet_dtype_size(info->dtype);
    return sn_tensor_save_npy(path, &t);
}
