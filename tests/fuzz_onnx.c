/*
 * libFuzzer target for the ONNX importer and the graph sort.
 *
 * Build (clang; config.h and shardnet-version.h from any configured build
 * folder B):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 \
 *     -Iinclude -Ilib -IB -IB/include tests/fuzz_onnx.c lib/import/onnx.c \
 *     lib/ir/graph.c lib/import/pbwire.c lib/core/status.c -o fuzz_onnx
 * Run:
 *   ./fuzz_onnx -max_total_time=600 -rss_limit_mb=2048 -timeout=10 \
 *     CORPUS_DIR SEED_DIR...
 * Every input that crashes, leaks or hangs goes into tests/fuzz_corpus/,
 * which tests/test_onnx.c loads on every `make check`.
 */
#include <config.h>

#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"
#include "import/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sn_graph *g = NULL;
    if (sn_onnx_load_memory(data, size, NULL, &g) == SHARDNET_OK) {
        sn_graph_sort(g);
        sn_graph_free(g);
    }
    return 0;
}
