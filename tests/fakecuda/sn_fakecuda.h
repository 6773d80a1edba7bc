/*
 * The fake CUDA toolkit's own calls (tests/fakecuda/): what the fake
 * runtime (runtime.c) offers the fake cuBLAS and cuBLASLt (cublas.c,
 * cublaslt.c) and the kernel files compiled with SN_CUDA_FAKE
 * (backends/cuda/cu.h), beyond the runtime API that it implements.
 *
 * Device memory is host memory whose address carries a tag bit that makes
 * it fault when host code reads it as a pointer, as a real device's
 * address would; work enqueued on a stream runs only when something waits
 * for it.  runtime.c says why.
 */
#ifndef SN_FAKECUDA_H
#define SN_FAKECUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueue run(arg) on a stream (a cudaStream_t; NULL: the device's
 * default stream): it runs when the stream is waited for, after what was
 * enqueued before it.  Returns a cudaError_t. */
int sn_fake_cuda_enqueue(void *stream, void (*run)(void *), void *arg);

/* The host address behind a device pointer (one of cudaMalloc's, or the
 * device's pointer to mapped host memory): what work on the device
 * reads and writes. */
void *sn_fake_cuda_host_address(const void *device_pointer);

/* Count a call of a kind that can fail (runtime.c lists them); non-zero
 * when this call is the one SN_FAKE_CUDA_FAIL or sn_fake_cuda_fail_at
 * names, which is then to fail. */
int sn_fake_cuda_fails(const char *call);

/* For a test program (found with dlsym, so that the same program runs
 * against a real runtime, where they are absent): how many calls of a
 * kind that can fail (runtime.c lists them: cudaMalloc, launch...) the
 * process has made, and the call of that kind, counted from the
 * process's start, that is to fail (NULL or 0: none). */
unsigned long sn_fake_cuda_calls(const char *call);
void sn_fake_cuda_fail_at(const char *call, unsigned long nth);

#ifdef __cplusplus
}
#endif

#endif /* SN_FAKECUDA_H */
