/*
 * An emulated CUDA device for the kernel suite (tests/test_kernels.c built
 * as test_kernels_cuda_emu): its buffers are host memory and its kernel
 * members run the CUDA backend's launchers (backends/cuda/kernels.h)
 * compiled for the host (tests/cuda_emu_kernels.cc; backends/cuda/cu.h
 * says how a launch is emulated).  GEMM, which the backend leaves to
 * cuBLAS, is the plain reference product followed by the backend's own
 * epilogue kernel.  What this proves is the kernels' arithmetic and
 * indexing, not the CUDA runtime, cuBLAS or a GPU's math library.
 */
#ifndef SN_TEST_CUDA_EMU_H
#define SN_TEST_CUDA_EMU_H

#include "backend/backend.h"

/* The process's one emulated device, "cuda-emu:0". */
sn_device *sn_cuda_emu_device(void);

#endif /* SN_TEST_CUDA_EMU_H */
