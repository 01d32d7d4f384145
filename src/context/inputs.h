#pragma once
// Deterministic input generation shared by the runner (which fills device buffers) and the parent
// (which recomputes the reference): the same (spec, count, seed, variant) gives the same bytes on
// every machine. Also the poison patterns and fp16 conversion.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "context/bound.h"
#include "context/context.h"

namespace peak {

// Bytes of `count` elements of `spec.dtype` drawn from `spec.init`. `variant` selects one of
// several distributions for the same initializer (0: as written; 1: scaled by 1/8 and shifted by
// +0.25, so a kernel that works only on one distribution is caught; 2: scaled by -2; 3+: as
// written; i32 arrays keep their values and change only the stream). `seed` is the task seed: the
// array's stream is array_seed(seed, spec.name), and each variant other than 0 draws from its own
// stream. The generator is documented in docs/kernel-context.md. uniform and normal never yield an
// all-zero array.
std::vector<uint8_t> generate_array(const ArraySpec& spec, int64_t count, uint64_t seed,
                                    int variant);
// Every input (non-output) array of `ctx` at a bound shape, by name, as generate_array draws it.
std::map<std::string, std::vector<uint8_t>> generate_inputs(const KernelContext& ctx,
                                                            const BoundShape& bound, uint64_t seed,
                                                            int variant);
// A per-array seed derived from the task seed and the array's name.
uint64_t array_seed(uint64_t seed, const std::string& array_name);

// Poison: f32 NaN 0x7fc0dead-like pattern 0x7FBADBAD (a signaling NaN payload peak alone writes),
// f16 0x7DAD, i32 0x7BADBAD7. An element still holding the poison after a run was never written.
uint32_t poison_u32(DType t);  // 32-bit fill word (two halves for f16)
bool is_poison(DType t, const uint8_t* element);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// bfloat16: the top half of a float; conversion rounds to nearest even (NaN stays NaN).
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
// Element i of a typed byte buffer as double.
double element_as_double(DType t, const uint8_t* data, int64_t i);

}  // namespace peak
