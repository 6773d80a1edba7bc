/*
 * Strategies (private): how a plan file forces the tensor split's cut of
 * one operator, in MindSpore's notation.  Plan data: lib/api/planfile.c
 * reads and writes it, the tensor split's builder (lib/runtime/shard*.c)
 * obeys it and records the strategies it chose.  See strategy.c.
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

#endif /* SN_STRATEGY_H */
