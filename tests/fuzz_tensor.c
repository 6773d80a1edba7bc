/*
 * libFuzzer target for the tensor file loaders (.npy and ONNX TensorProto
 * .pb): `make fuzz-tensor [FUZZ_SECONDS=600]` (needs clang).  An input's
 * first byte picks the format (even: .npy, odd: .pb); the rest is the
 * file, written to /dev/shm (the loaders read files, as shardnet run
 * does) and loaded.  Every input that crashes, leaks or hangs is a bug;
 * keep it, once fixed, as a case of tests/test_hostile.c.
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "import/tensorfile.h"
#include "ir/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[2][64];
    sn_host_tensor t;
    FILE *f;
    if (!path[0][0]) {
        snprintf(path[0], sizeof path[0], "/dev/shm/fuzz_tensor.%d.npy",
                 (int)getpid());
        snprintf(path[1], sizeof path[1], "/dev/shm/fuzz_tensor.%d.pb",
                 (int)getpid());
    }
    if (size < 1)
        return 0;
    const char *p = path[data[0] & 1];
    if (!(f = fopen(p, "wb")))
        return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    if (sn_tensor_load(p, &t) == SHARDNET_OK)
        sn_host_tensor_free(&t);
    return 0;
}
