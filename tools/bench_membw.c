/*
 * bench_membw: the machine's memory read bandwidth, as a batch-1 product
 * sees it: every thread of an OpenMP team (OMP_NUM_THREADS, default all
 * cores) sums its share of a buffer far larger than the caches, a
 * cache line (one AVX-512 load) at a time in four chains, as a weight is
 * streamed, in three ways: plain loads, and loads with each line asked
 * for ahead (_mm_prefetch 16 KiB ahead into every cache level, and 8 KiB
 * ahead non-temporal, as shardnet's batch-1 kernels do: the hardware's
 * prefetchers stop at each 4 KiB page, and on this project's host they
 * at times left plain loads at 50 GB/s where the kernels read 55 to 62).
 * The passes interleave the ways; prints the best way's median in GB/s
 * (10^9 bytes), then each way's.
 *
 *   bench_membw [MB] [PASSES]       (default 512 MB, 15 passes)
 *
 * tools/bench-big.sh runs it between shardnet's runs, so that the
 * bandwidth a run reaches is compared with what the machine gave in the
 * same minutes.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* lines cache lines of 16 floats from x, summed in four AVX-512 chains. */
/* way 0: plain loads; 1: each line asked for 16 KiB ahead (T0); 2: 8 KiB
 * ahead, non-temporal. */
__attribute__((target("avx512f"))) static float sum_avx512(const float *x,
                                                          size_t lines,
                                                          int way)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 4 <= lines; i += 4) {
        if (way == 1)
            _mm_prefetch((const char *)(x + 16 * i) + 16384, _MM_HINT_T0);
        else if (way == 2)
            _mm_prefetch((const char *)(x + 16 * i) + 8192, _MM_HINT_NTA);
        s0 = _mm512_add_ps(s0, _mm512_load_ps(x + 16 * i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(x + 16 * i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(x + 16 * i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(x + 16 * i + 48));
    }
    for (; i < lines; i++)
        s0 = _mm512_add_ps(s0, _mm512_load_ps(x + 16 * i));
    return _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}
#endif

static float sum_lines(const float *x, size_t lines, int way)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f"))
        return sum_avx512(x, lines, way);
#endif
    (void)way;
    float s[16] = {0};
    for (size_t i = 0; i < lines; i++)
        for (int j = 0; j < 16; j++)
            s[j] += x[16 * i + j];
    float total = 0;
    for (int j = 0; j < 16; j++)
        total += s[j];
    return total;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 512;
    int passes = argc > 2 ? atoi(argv[2]) : 15;
    if (mb < 1 || passes < 1 || passes > 1000) {
        fprintf(stderr, "Usage: bench_membw [MB] [PASSES]\n");
        return 2;
    }
    size_t n = mb * 1000 * 1000 / sizeof(float);
    float *buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    enum { WAYS = 3 };
    double *t = malloc((size_t)passes * WAYS * sizeof *t);
    if (!buf || !t) {
        fprintf(stderr, "bench_membw: out of memory for %zu MB\n", mb);
        return 1;
    }
    /* First touch by the threads that read it (each its own share). */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7);
    volatile float sink = 0;
    for (int p = -1; p < passes; p++)
        for (int way = 0; way < WAYS; way++) {
            double t0 = bench_now();
            float total = 0;
#pragma omp parallel reduction(+ : total)
            {
                size_t nt = (size_t)omp_get_num_threads(),
                       me = (size_t)omp_get_thread_num();
                size_t lines = n / 16, l0 = lines * me / nt,
                       l1 = lines * (me + 1) / nt;
                total += sum_lines(buf + l0 * 16, l1 - l0, way);
            }
            double dt = bench_now() - t0;
            sink += total;
            if (p >= 0) /* the first pass warms the threads up */
                t[way * passes + p] = dt;
        }
    double gbs[WAYS], best = 0;
    for (int way = 0; way < WAYS; way++) {
        gbs[way] = (double)(n / 16 * 16) * sizeof(float) /
                   bench_median(t + way * passes, passes) / 1e9;
        best = gbs[way] > best ? gbs[way] : best;
    }
    printf("memory read bandwidth: %.1f GB/s (the best way's median of %d "
           "passes over %zu MB, %d threads; plain %.1f, ahead %.1f, "
           "non-temporal %.1f)\n",
           best, passes, mb, omp_get_max_threads(), gbs[0], gbs[1], gbs[2]);
    free(buf);
    free(t);
    return sink == 12345.0f; /* keeps the sums */
}
