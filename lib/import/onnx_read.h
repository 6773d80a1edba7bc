/*
 * The ONNX reader's private parts (not installed), shared by its three
 * files: onnx.c reads the ModelProto and GraphProto and holds the entry
 * points, onnx_node.c reads NodeProto and AttributeProto, and
 * onnx_files.c maps the model file and its external-data files and checks
 * later that they have not changed.  They share the reader's state (one
 * sn_onnx_ctx per load) and the few helpers below.
 */
#ifndef SN_ONNX_READ_H
#define SN_ONNX_READ_H

#include <stddef.h>
#include <stdint.h>

#include "import/pbwire.h"
#include "ir/graph.h"
#include "import/onnx.h"
#include "shardnet.h"

/* An external-data file, mapped once however many tensors it holds. */
typedef struct sn_onnx_ext_file {
    char *location;
    const uint8_t *addr;
    size_t len;
} sn_onnx_ext_file;

/* The state of one load. */
typedef struct sn_onnx_ctx {
    sn_graph *g;          /* the graph being read: the model's, or a
                             subgraph's while one is read */
    sn_graph *root;       /* the model's graph (owns the mappings) */
    int depth;            /* subgraphs around the one being read */
    const char *base_dir; /* NULL: external data refused */
    char *real_dir;       /* base_dir with its links resolved */
    int copy;             /* read files into memory instead of mapping */
    sn_model_file **files; /* files mapped, for later checks (or NULL) */
    size_t *nfiles;
    sn_onnx_ext_file *ext;
    size_t next;
    uint64_t anon;        /* suffix for generated value names */
    char name[SN_MAX_NAME + 1];
} sn_onnx_ctx;

/* A name from the file, NUL-terminated in c->name (valid until the next
 * call); NULL with error set when too long or holding a NUL byte. */
const char *sn_onnx_name_in(sn_onnx_ctx *c, const uint8_t *s, size_t n,
                            const char *what);

/* The value named name, created when new; -1 with error set. */
int sn_onnx_value_of(sn_onnx_ctx *c, const char *name);

/* A constant value named `name` holding tensor t; its index, or -1. */
int sn_onnx_tensor_value(sn_onnx_ctx *c, const sn_pb_tensor *t,
                         const char *name);

/* A value name no one has taken, starting from "<a>:<b>" (in c->name). */
const char *sn_onnx_fresh_name(sn_onnx_ctx *c, const char *a, const char *b);

/* NodeProto p (the index-th node): a node of c->g, with its attributes and
 * the values it names; the error is prefixed with the node's label. */
shardnet_status sn_onnx_parse_node(sn_onnx_ctx *c, const uint8_t *p,
                                   size_t n, size_t index);

/* GraphProto p as a subgraph of c->g (a control node's attribute):
 * read, sorted, its outer values found (sn_graph.outer); *out is new. */
shardnet_status sn_onnx_parse_subgraph(sn_onnx_ctx *c, const uint8_t *p,
                                       size_t n, sn_graph **out);

/* Tensor t's bytes in its external-data file (mapped once per file, and
 * only inside the model's folder); *data NULL for an empty tensor. */
shardnet_status sn_onnx_external_data(sn_onnx_ctx *c, const sn_pb_tensor *t,
                                      const void **data);

/* The model file at path mapped (copy = 0, noted in files for
 * sn_model_files_check) or read (copy = 1) into *addr, *len bytes, not
 * empty; nothing mapped on failure. */
shardnet_status sn_onnx_map_model(const char *path, int copy, void **addr,
                                  size_t *len, sn_model_file **files,
                                  size_t *nfiles);

#endif
