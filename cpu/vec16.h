/*
 * The 16-float vectors of the CPU kernels written with GCC's vector
 * extensions (cpu/conv.c, cpu/elementwise.c): one AVX-512 register, two
 * AVX2 ones in that target clone (see SN_VECTOR_CLONES).  Private to cpu/.
 */
#ifndef SN_CPU_VEC16_H
#define SN_CPU_VEC16_H

typedef float v16 __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));
typedef unsigned v16u __attribute__((vector_size(64)));
#define VW 16

#endif /* SN_CPU_VEC16_H */
