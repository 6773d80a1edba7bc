/*
 * Embedding shardnet: list the devices, then multiply two matrices on the
 * device named on the command line (default: the first one).
 *
 * Build against an installed shardnet:
 *     cc devices_gemm.c $(pkg-config --cflags --libs shardnet) -o devices_gemm
 * Run:
 *     ./devices_gemm cl:0
 */
#include <shardnet.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const char *want = argc > 1 ? argv[1] : NULL;
    shardnet_context_t *ctx;
    shardnet_status st;
    size_t dev, n;
    enum { M = 3, K = 4, N = 2 };
    float a[M * K], b[K * N], c[M * N];
    int bad = 0;

    printf("shardnet %s\n", shardnet_version());
    st = shardnet_context_create(&ctx);
    if (st != SHARDNET_OK) {
        fprintf(stderr, "shardnet: %s: %s\n", shardnet_status_str(st),
                shardnet_last_error());
        return 1;
    }
    for (size_t i = 0; i < shardnet_device_count(ctx); i++) {
        shardnet_device_info info;
        shardnet_device_get_info(ctx, i, &info);
        printf("  %-6s %s (%u units)\n", info.name, info.model,
               info.compute_units);
    }

    /* Resolve the device name; NULL means SHARDNET_DEVICES or "all". */
    st = shardnet_devices_select(ctx, want, &dev, 1, &n);
    if (st != SHARDNET_OK && !(st == SHARDNET_INVALID_ARGUMENT && n > 1)) {
        fprintf(stderr, "device '%s': %s\n", want ? want : "(default)",
                shardnet_last_error());
        shardnet_context_free(ctx);
        return 1;
    }

    for (int i = 0; i < M * K; i++)
        a[i] = (float)(i + 1);
    for (int i = 0; i < K * N; i++)
        b[i] = (float)(i % 3) - 1.0f;
    st = shardnet_matmul(ctx, dev, M, N, K, a, b, c);
    if (st != SHARDNET_OK) {
        fprintf(stderr, "matmul: %s\n", shardnet_last_error());
        shardnet_context_free(ctx);
        return 1;
    }
    /* Check against the product computed here. */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int p = 0; p < K; p++)
                s += a[i * K + p] * b[p * N + j];
            if (c[i * N + j] != s)
                bad = 1;
            printf("%s%6.1f", j ? " " : "  ", c[i * N + j]);
            if (j == N - 1)
                printf("\n");
        }
    printf("%s on device %zu\n", bad ? "WRONG" : "ok", dev);
    shardnet_context_free(ctx);
    return bad;
}
