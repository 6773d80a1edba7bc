/* IEEE half and bfloat16 conversions (round to nearest even); half.c. */
#ifndef SN_CORE_HALF_H
#define SN_CORE_HALF_H

#include <stdint.h>

float sn_half_to_float(uint16_t h);
uint16_t sn_float_to_half(float f);
float sn_bf16_to_float(uint16_t h);
uint16_t sn_float_to_bf16(float f);

#endif /* SN_CORE_HALF_H */
