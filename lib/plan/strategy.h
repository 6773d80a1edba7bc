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
    SN_CUT_DATA     /* a dimension of the data alone, the weight whole */
};

/* A product's operands: the data's rank ra and reduced axis k_axis_a, the
 * weight's rank rb, reduced axis k_axis_w and output axis n_axis_w. */
typedef struct sn_product_axes {
    int ra, k_axis_a;
    int rb, k_axis_w, n_axis_w;
} sn_product_axes;

/*
 * The cut strategy s forces on a product over ndev devices: *cut (an
 * SN_CUT_ value) and, for SN_CUT_DATA, which axis of the data.  A
 * strategy this version cannot carry out (more than one dimension cut,
 * or into other than ndev parts) is an error naming the node (`node`,
 * of type op_type).
 */
shardnet_status sn_strategy_cut(const sn_strategy *s, size_t ndev,
                                const sn_product_axes *ax, const char *node,
                                const char *op_type, int *cut, int *axis);
/* The strategy text of a product over ndev devices cutting axis sa of its
 * data (rank ra) and axis sb of its weight (rank rb; 0: no weight
 * tuple), -1 for none. */
void sn_strategy_of_cut(size_t ndev, size_t ra, int sa, size_t rb, int sb,
                        char *buf, size_t cap);

#endif /* SN_STRATEGY_H */
