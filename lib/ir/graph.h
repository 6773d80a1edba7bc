/*
 * The graph IR (private): what an ONNX model becomes after import, and what
 * the passes, the planner and the executor work on.  Backend-neutral.
 *
 *   sn_graph   values[] (every tensor: inputs, weights, activations,
 *              outputs) and nodes[] (operators), referring to values by
 *              index.
 *   sn_value   name, element type, shape (dims; -1 = not known yet, with the
 *              symbolic name in dim_param when the model gave one), and for
 *              constants (initializers, Constant nodes, folded results) the
 *              host data.
 *   sn_node    op_type, domain, inputs/outputs (value indices; -1 = an
 *              omitted optional input), attributes.
 *
 * Constant data either points into the memory-mapped model file (or an
 * external-data file), never copied, or is owned by the value (`owned`,
 * freed with the graph) when it had to be converted (packed repeated
 * fields, Constant attributes, folding).  Data in a file is only as
 * aligned as the file made it (protobuf gives no alignment): read elements
 * with memcpy, or copy, before treating `data` as float * and the like.
 *
 * A Constant node keeps its attributes as the file gave them and always
 * has an attribute "value" of type TENSOR (the importer adds it when the
 * file used value_float, value_int, value_floats or value_ints).
 */
#ifndef SN_GRAPH_H
#define SN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "shardnet.h"

/* Element types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum sn_dtype {
    SN_DT_UNDEFINED = 0,
    SN_DT_FLOAT = 1,
    SN_DT_UINT8 = 2,
    SN_DT_INT8 = 3,
    SN_DT_UINT16 = 4,
    SN_DT_INT16 = 5,
    SN_DT_INT32 = 6,
    SN_DT_INT64 = 7,
    SN_DT_STRING = 8,
    SN_DT_BOOL = 9,
    SN_DT_FLOAT16 = 10,
    SN_DT_DOUBLE = 11,
    SN_DT_UINT32 = 12,
    SN_DT_UINT64 = 13,
    SN_DT_COMPLEX64 = 14,
    SN_DT_COMPLEX128 = 15,
    SN_DT_BFLOAT16 = 16
} sn_dtype;

/* Bytes per element; 0 for UNDEFINED, STRING, and numbers ONNX does not
 * define. */
size_t sn_dtype_size(sn_dtype t);
/* "float", "int64", ...; "?" for unknown numbers. */
const char *sn_dtype_name(sn_dtype t);

/* sn_value.flags */
#define SN_VALUE_INPUT 1u  /* a graph input the caller binds */
#define SN_VALUE_OUTPUT 2u /* a graph output */
#define SN_VALUE_CONST 4u  /* data is known on the host */
#define SN_VALUE_OUTER 8u  /* a subgraph's: a value of an enclosing graph
                              (sn_graph.outer) */
#define SN_VALUE_MAPPED 16u /* SN_VALUE_CONST whose data lies in a model
                               file mapped read-only: its pages may be
                               dropped (sn_value_drop_pages) and are read
                               again from the file */

typedef struct sn_value {
    char *name;
    sn_dtype dtype;        /* SN_DT_UNDEFINED until known */
    int rank;              /* -1 until known; 0 = scalar */
    int64_t dims[SHARDNET_MAX_DIMS];      /* -1 = unknown */
    char *dim_param[SHARDNET_MAX_DIMS];   /* symbolic name of dims[i], or NULL */
    const void *data;      /* SN_VALUE_CONST: elements, C order,
                              little-endian, maybe unaligned */
    size_t nbytes;         /* bytes at data */
    void *owned;           /* heap memory behind data, or NULL */
    int producer;          /* node index, or -1 */
    unsigned flags;
} sn_value;

/* Attribute types; the values are ONNX's AttributeProto.AttributeType. */
typedef enum sn_attr_type {
    SN_ATTR_UNDEFINED = 0,
    SN_ATTR_FLOAT = 1,
    SN_ATTR_INT = 2,
    SN_ATTR_STRING = 3,
    SN_ATTR_TENSOR = 4,
    SN_ATTR_GRAPH = 5,
    SN_ATTR_FLOATS = 6,
    SN_ATTR_INTS = 7,
    SN_ATTR_STRINGS = 8,
    /* Kept so that an op using them can be reported; no value is stored. */
    SN_ATTR_TENSORS = 9,
    SN_ATTR_GRAPHS = 10,
    SN_ATTR_SPARSE_TENSOR = 11,
    SN_ATTR_SPARSE_TENSORS = 12,
    SN_ATTR_TYPE_PROTO = 13,
    SN_ATTR_TYPE_PROTOS = 14
} sn_attr_type;

typedef struct sn_attr {
    char *name;
    sn_attr_type type;
    int64_t i;        /* INT */
    float f;          /* FLOAT */
    char *s;          /* STRING (NUL-terminated copy) */
    int64_t *ints;    /* INTS: count of them */
    float *floats;    /* FLOATS: count of them */
    char **strings;   /* STRINGS: count of them, NUL-terminated copies */
    size_t count;
    int tensor;       /* TENSOR: index of a constant value holding it; -1 */
    struct sn_graph *graph; /* GRAPH: the subgraph (If's branches, a Loop's
                               or Scan's body), shared by the attribute's
                               copies (counted), or NULL */
} sn_attr;

typedef struct sn_node {
    char *name;    /* may be "" in the file: then "<op_type>#<index>" */
    char *op_type;
    char *domain;  /* "" for the default ONNX domain */
    int *inputs;   /* value indices, -1 for an omitted optional input */
    size_t ninputs;
    int *outputs;  /* value indices, -1 for an omitted optional output */
    size_t noutputs;
    sn_attr *attrs;
    size_t nattrs;
    int dead;      /* removed by a pass; skipped by everything after it */
} sn_node;

/* A region of a file mapped into memory, unmapped with the graph. */
typedef struct sn_mapping {
    void *addr;
    size_t len;
} sn_mapping;

typedef struct sn_graph {
    sn_value *values;
    size_t nvalues, cap_values;
    sn_node *nodes;   /* in the file's order until sn_graph_sort() */
    size_t nnodes, cap_nodes;
    int *inputs;      /* graph inputs to bind (initializers excluded) */
    size_t ninputs;
    int *outputs;
    size_t noutputs;
    int64_t opset;    /* opset of the default domain */
    int64_t ir_version;
    char *producer;   /* producer_name, e.g. "pytorch" */
    sn_mapping *maps; /* the model file and external-data files */
    size_t nmaps;
    /* Name -> value index, private to graph.c: add values only through
     * sn_graph_add_value() and never rename one in place. */
    struct sn_name_index *name_index;
    unsigned long id; /* unique in the process (caches key on it) */
    /* A subgraph (an attribute of a control node): the values it reads
     * from the graphs around it (flagged SN_VALUE_OUTER), in order.  The
     * node that holds it lists the enclosing graph's values of those names
     * as its last inputs, after its own (sn_node_implicit_inputs), so that
     * sorting, liveness and the splits see what the subgraph reads. */
    int *outer;
    size_t nouter;
    int refs;         /* attributes sharing this graph, less one */
} sn_graph;

/* Subgraphs nest at most this deep. */
#define SN_MAX_GRAPH_DEPTH 32

/* Limits that keep a hostile file from asking for absurd work. */
#define SN_MAX_ELEMENTS ((int64_t)1 << 34) /* per tensor */
#define SN_MAX_NODES 1000000
#define SN_MAX_NAME 4096

/* Graph construction and queries (lib/ir/graph.c). */
sn_graph *sn_graph_new(void);
void sn_graph_free(sn_graph *g);
/* Index of the value named `name`, or -1. */
int sn_graph_find(const sn_graph *g, const char *name);
/* Add a value (name copied; must be unique); its index, or -1 when out of
 * memory (error set). */
int sn_graph_add_value(sn_graph *g, const char *name);
/* Add a node; op_type/domain/name copied; inputs/outputs copied. Returns
 * its index, or -1 when out of memory (error set). */
int sn_graph_add_node(sn_graph *g, const char *name, const char *op_type,
                      const char *domain, const int *inputs, size_t ninputs,
                      const int *outputs, size_t noutputs);
/*
 * Append an attribute of the given type to node n (name copied; must not
 * be there yet), zeroed apart from name and type, with tensor = -1.  The
 * caller fills the value; s, ints, floats, strings (and each string) must
 * be malloc'ed: sn_graph_free() frees them.  NULL when out of memory or
 * when the name is taken (error set).  The pointer is valid until the next
 * attribute is added to n.
 */
sn_attr *sn_node_add_attr(sn_node *n, const char *name, sn_attr_type type);
/* Deep copy of attribute a into d (zeroed first; a GRAPH attribute's
 * subgraph is shared, counted); a TENSOR attribute's
 * value index goes through map (-1 stays -1).  0 when out of memory (d
 * then holds what was copied, for sn_graph_free() to release). */
int sn_attr_copy(sn_attr *d, const sn_attr *a, const int *map);
/* Drop the pages of v's data from the process where v is SN_VALUE_MAPPED
 * (nothing otherwise): a device holds a copy of its own now. */
void sn_value_drop_pages(const sn_value *v);
/* Have the pages of v's data read ahead from its file where v is
 * SN_VALUE_MAPPED (nothing otherwise): a device will read it in place. */
void sn_value_prefetch_pages(const sn_value *v);
/* Wait until what was queued of those pages is read and mapped
 * (sn_wait_file_pages): a kernel is about to read v in place. */
void sn_value_wait_pages(const sn_value *v);
/* Record a mapping for sn_graph_free() to unmap; -1 when out of memory
 * (error set; the caller still owns the mapping). */
int sn_graph_add_mapping(sn_graph *g, void *addr, size_t len);
/* How many of node n's inputs, at the end, are the outer values its
 * subgraphs read (the nouter of each GRAPH attribute, in attribute
 * order); n->ninputs less this is the count of its own inputs. */
size_t sn_node_implicit_inputs(const sn_node *n);
/* The subgraph in attribute `name` of node n, or NULL. */
sn_graph *sn_node_graph(const sn_node *n, const char *name);
/* The attribute `name` of node n, or NULL. */
const sn_attr *sn_node_attr(const sn_node *n, const char *name);
/* Attribute getters with defaults (type mismatches give the default). */
int64_t sn_attr_int(const sn_node *n, const char *name, int64_t dflt);
float sn_attr_float(const sn_node *n, const char *name, float dflt);
const char *sn_attr_string(const sn_node *n, const char *name,
                           const char *dflt);
/*
 * Reorder nodes topologically (stable: file order among ready nodes) and
 * set every value's producer.  Fails, naming a node, on a cycle, on a value
 * produced twice, or on an input that nothing produces and that is neither a
 * graph input, a constant nor (in a subgraph) an outer value.
 */
shardnet_status sn_graph_sort(sn_graph *g);
/* Number of elements of a value with known shape; -1 if unknown. */
int64_t sn_value_elements(const sn_value *v);

/* A tensor on the host: model inputs and outputs, tensor files. */
typedef struct sn_host_tensor {
    char *name; /* may be NULL */
    sn_dtype dtype;
    int rank;
    int64_t dims[SHARDNET_MAX_DIMS];
    void *data; /* owned, C order */
    size_t nbytes;
} sn_host_tensor;

void sn_host_tensor_free(sn_host_tensor *t); /* frees name and data */

#endif /* SN_GRAPH_H */
