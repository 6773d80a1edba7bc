/*
 * The CUDA backend's kernel files compiled as plain C++ for the host, each
 * launch emulated one thread after another (backends/cuda/cu.h), for the
 * emulated device of tests/cuda_emu.c.
 */
#include <config.h>

#define SN_CUDA_EMULATE 1

#include "../backends/cuda/elementwise.cu"
#include "../backends/cuda/qgemm.cu"
#include "../backends/cuda/data.cu"
#include "../backends/cuda/conv.cu"
#include "../backends/cuda/reduce.cu"
#include "../backends/cuda/sample.cu"
#include "../backends/cuda/rnn.cu"
