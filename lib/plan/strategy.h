/*
 * Strategies (private): how a plan file forces the tensor split's cut of
 * one operator, in MindSpore's notation, and what a strategy means for a
 * product's cut.  Plan data: lib/api/planfile.c reads and writes it, the
 * tensor split's builder (lib/runtime/shard*.c) obeys it and records the
 * strategies it chose.  See strategy.c.
 */
#ifndef SN_STRATEGY_H
#define SN_STRATEGY_H

#include "exec/exec.h"

/*
 * One tuple per input, one number per dimension of that input, saying
 * into how many parts that dimension is cut.  "((1,2),(2,1))" on a MatMul
 * cuts A's columns and B's rows in two: a row-parallel layer.
 */
#define SN_STRATEGY_TUPLES 4
typedef struct sn_strategy {
    char node[256];               /* the node's name */
    size_t ntuples;
    size_t len[SN_STRATEGY_TUPLES];
    unsigned v[SN_STRATEGY_TUPLES][SN_MAX_DIMS];
} sn_strategy;

/* Parse "((a,b),(c,d))" (spaces allowed; numbers 1 to SN_COLL_MAX) into
 * *out (node name untouched). */
shardnet_status sn_strategy_parse(const char *text, sn_strategy *out);
/* Write the tuples back in the same notation. */
void sn_strategy_format(const sn_strategy *s, char *buf, size_t cap);

/* How a product of data and a weight is cut over the devices. */
enum {
    SN_CUT_NONE,    /* replicated: whole on every device */
    SN_CUT_COLUMNS, /* the weight's output dimension */
    SN_CUT_ROWS,    /* the reduced dimension of both: partial sums */
    SN_CUT_DATA,    /* a dimension of the data alone, the weight whole */
    SN_CUT_MIXED    /* two or three of those at once, on a mesh of devices
                       (MindSpore's mixed forms such as ((2,1),(1,2))) */
};

/* A product's operands: the data's rank ra and reduced axis k_axis_a, the
 * weight's rank rb, reduced axis k_axis_w and output axis n_axis_w. */
typedef struct sn_product_axes {
    int ra, k_axis_a;
    int rb, k_axis_w, n_axis_w;
} sn_product_axes;

/* The cut a strategy forces: kind (an SN_CUT_ value); for SN_CUT_DATA and
 * SN_CUT_MIXED the data's axis cut (-1: none); for SN_CUT_MIXED the
 * devices as a mesh of parts[0] (that data axis) by parts[1] (the reduced
 * dimension) by parts[2] (the weight's output dimension), their product
 * the device count, at least two of them above 1: device
 * (i * parts[1] + k) * parts[2] + j computes the rows' part i, the
 * reduced dimension's part k and the columns' part j. */
typedef struct sn_cut {
    int kind, axis;
    unsigned parts[3];
} sn_cut;

/*
 * The cut strategy s forces on a product over ndev devices, into *out.
 * One dimension cut into ndev parts is one of the four plain cuts; two or
 * three cut (parts multiplying to ndev; the reduced dimension alike in
 * both tuples) are SN_CUT_MIXED where `mixed` is set (the products by a
 * 2-D weight), an error where not (convolutions).  A strategy this
 * version cannot carry out is an error naming the node (`node`, of type
 * op_type) and what it can.
 */
shardnet_status sn_strategy_cut(const sn_strategy *s, size_t ndev,
                                const sn_product_axes *ax, int mixed,
                                const char *node, const char *op_type,
                                sn_cut *out);
/* The meshes of ndev devices a mixed cut may take, parts[0..2] each
 * (at least two of them above 1), into mesh (room for max); how many. */
size_t sn_strategy_meshes(size_t ndev, unsigned (*mesh)[3], size_t max);
/* The strategy text of a mixed cut: data axis `axis` of a product of
 * axes ax into parts[0], the reduced dimension into parts[1], the
 * weight's output dimension into parts[2]. */
void sn_strategy_of_mixed(const sn_product_axes *ax, int axis,
                          const unsigned parts[3], char *buf, size_t cap);
/* The strategy text of a product over ndev devices cutting axis sa of its
 * data (rank ra) and axis sb of its weight (rank rb; 0: no weight
 * tuple), -1 for none. */
void sn_strategy_of_cut(size_t ndev, size_t ra, int sa, size_t rb, int sb,
                        char *buf, size_t cap);

#endif /* SN_STRATEGY_H */
