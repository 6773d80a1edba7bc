/*
 * libFuzzer target for the sharding strategies of plan files (MindSpore's
 * notation, "((2,1),(1,2))", and the named ones): `make fuzz-strategy
 * [FUZZ_SECONDS=600]` (needs clang).  An input is parsed, and a strategy
 * it gives is formatted back.  Every input that crashes, leaks or hangs
 * is a bug; keep it, once fixed, as a case of the plan file tests.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/strategy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), back[512];
    sn_strategy s;
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (sn_strategy_parse(text, &s) == SHARDNET_OK)
        sn_strategy_format(&s, back, sizeof back);
    free(text);
    return 0;
}
