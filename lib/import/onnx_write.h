/*
 * Writing an ONNX model (private): a model as it was read, re-emitted
 * field by field with changes to its main graph (shardnet_model_quantize
 * in lib/api/quantize.c makes them).
 *
 * Everything the caller does not change is written as the file has it,
 * byte for byte: fields shardnet does not know, doc strings, metadata,
 * value_info, subgraphs.  The caller sees each node, initializer and graph
 * input of the main graph in turn and says whether it stays and what goes
 * before it; the new nodes and tensors are written by the helpers below.
 * The result is one self-contained file: initializers the model kept in
 * external data are written inline.
 */
#ifndef SN_ONNX_WRITE_H
#define SN_ONNX_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "import/pbwrite.h"
#include "ir/graph.h"

/* The largest model one protobuf message may be: 2 GiB less a byte. */
#define SN_ONNX_MAX_BYTES ((uint64_t)INT32_MAX)

/* The parts of the main graph the caller has a say on. */
typedef enum sn_onnx_part {
    SN_ONNX_NODE,
    SN_ONNX_INITIALIZER,
    SN_ONNX_INPUT
} sn_onnx_part;

/*
 * The caller's say on one part, in the file's order: index counts the
 * parts of that kind from 0 (a node's is its index in the graph
 * sn_onnx_load_file made, which has one node per NodeProto, in order);
 * name is an initializer's or an input's name (NULL for a node).  It
 * writes into `before` whole GraphProto fields to go before the part
 * (sn_onnx_put_*) and sets *keep (1 on entry) to 0 to leave the part out;
 * a status other than SHARDNET_OK (its error set) ends the rewrite.
 */
typedef shardnet_status (*sn_onnx_edit_fn)(void *user, sn_onnx_part part,
                                           size_t index, const char *name,
                                           sn_pbw *before, int *keep);

/* An operator set the written model must import. */
typedef struct sn_onnx_opset {
    const char *domain;
    int64_t version;
} sn_onnx_opset;

/*
 * The model g was imported from by sn_onnx_load_file (whose first mapping
 * holds the model file's bytes) into *out (initialised by the caller),
 * its main graph's parts as edit says, with the operator sets of need
 * imported (added after the model's own imports where it lacks them).  A
 * model with more than one graph field, one that imports a domain of need
 * at another version, or one that would be more than SN_ONNX_MAX_BYTES is
 * refused, saying so.  Bytes of the model file and of g's constants are
 * referenced by *out, not copied: g must outlive the writing of *out.
 */
shardnet_status sn_onnx_rewrite(const sn_graph *g, sn_onnx_edit_fn edit,
                                void *user, const sn_onnx_opset *need,
                                size_t nneed, sn_pbw *out);

/* An integer attribute of a node written by sn_onnx_put_node. */
typedef struct sn_onnx_int_attr {
    const char *name;
    int64_t value;
} sn_onnx_int_attr;

/* GraphProto fields: a node of one output ("" for the default domain; an
 * input "" is an omitted optional one), an initializer whose nbytes of data
 * at data are referenced, not copied (they must stay until *w is written),
 * and a graph input of that type and shape. */
void sn_onnx_put_node(sn_pbw *w, const char *name, const char *op_type,
                      const char *domain, const char *const *inputs,
                      size_t ninputs, const char *output,
                      const sn_onnx_int_attr *attrs, size_t nattrs);
void sn_onnx_put_tensor(sn_pbw *w, const char *name, sn_dtype dtype,
                        int rank, const int64_t *dims, const void *data,
                        size_t nbytes);
void sn_onnx_put_input(sn_pbw *w, const char *name, sn_dtype dtype, int rank,
                       const int64_t *dims);

#endif /* SN_ONNX_WRITE_H */
