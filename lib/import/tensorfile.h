/*
 * Tensor files (private): reading and writing host tensors (sn_host_tensor,
 * lib/ir/graph.h) in the formats models' test data come in.
 *
 * NumPy .npy (version 1.0-3.0, C order,
 * little-endian; float32/float64/int32/int64/uint8/int8/bool) and ONNX
 * TensorProto .pb (the ONNX test data's format, raw_data or typed fields).
 */
#ifndef SN_TENSORFILE_H
#define SN_TENSORFILE_H

#include "ir/graph.h"

shardnet_status sn_tensor_load(const char *path, sn_host_tensor *out);
shardnet_status sn_tensor_load_npy(const char *path, sn_host_tensor *out);
shardnet_status sn_tensor_load_pb(const char *path, sn_host_tensor *out);
shardnet_status sn_tensor_save_npy(const char *path, const sn_host_tensor *t);


#endif /* SN_TENSORFILE_H */
