#pragma once
// Deterministic input generation shared by the runner (which fills device buffers) and the parent
// (which recomputes the reference): the same (spec, count, seed, variant) gives the same bytes on
// every machine. Also the poison patterns and fp16 conversion.
#include <cstdint>
#include <map>
#include <optional>
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

// generate_array as a device can run it (runner/device.h: Device::generate): element i is
// draw(i), stored as `dtype`, and the bytes are generate_array's. Draws need integer and IEEE
// double arithmetic alone (no libm), each add and multiply rounded on its own (no fused
// multiply-add):
//   uniform_real:  a + d * u(i)          (d = high - low)
//   uniform_int:   a + floor(u(i) * d)   (d = the count of integers)
//   constant:      a
//   iota:          i mod period
// where u(i) = (prng::at(stream, i) >> 11) * 2^-53 (context/prng.h), then stored as the host
// stores: double -> float rounded to nearest even, then to half / bfloat16 (nearest even), or
// i32 rounded to nearest and clamped. When every element is zero and the initializer is random,
// element `zero_fix_index` becomes `zero_fix` (generate_array's rule: an all-zero input hides
// bugs).
struct InputGenerator {
  enum class Kind { uniform_real, uniform_int, constant, iota };
  Kind kind = Kind::constant;
  DType dtype = DType::f32;
  uint64_t stream = 0;
  double a = 0, d = 0;
  int64_t period = 1;
  bool random = false;  // the zero fix applies
  int64_t zero_fix_index = 0;
  std::vector<uint8_t> zero_fix;  // one element's bytes
};
// The generator of generate_array(spec, count, seed, variant), or none where a device cannot
// give the same bytes: normal draws (their logarithm and sine differ between libraries) and
// variants other than 0.
std::optional<InputGenerator> input_generator(const ArraySpec& spec, int64_t count, uint64_t seed,
                                              int variant);
// generate_array's bytes at `indices` alone, every other element zero: what a reference that
// reads those elements needs. None where the bytes could differ from generate_array's there: a
// random array whose elements at `indices` are all zero may be all zero, and generate_array then
// changes one element (the whole array tells).
std::optional<std::vector<uint8_t>> generate_elements(const ArraySpec& spec, int64_t count,
                                                      uint64_t seed, int variant,
                                                      const std::vector<int64_t>& indices);
// The same into `out` (the bytes of `count` elements; the others are left as they are): a
// buffer kept for the next call, whose elements written now the caller zeroes again. False
// where generate_elements gives none.
bool write_elements(const ArraySpec& spec, int64_t count, uint64_t seed, int variant,
                    const std::vector<int64_t>& indices, std::vector<uint8_t>& out);
// The generator run on the host, as a device runs it (the zero fix included): the reference
// that a device's run is tested against.
std::vector<uint8_t> run_generator(const InputGenerator& g, int64_t count);

// Poison: f32 NaN 0x7fc0dead-like pattern 0x7FBADBAD (a signaling NaN payload peak alone writes),
// f16 0x7DAD, i32 0x7BADBAD7, e4m3 0x7F (its NaN). An element still holding the poison after a run
// was never written.
uint32_t poison_u32(DType t);  // 32-bit fill word (two halves for f16)
bool is_poison(DType t, const uint8_t* element);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// bfloat16: the top half of a float; conversion rounds to nearest even (NaN stays NaN).
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
// OCP FP8 E4M3 (e4m3fn): exact to float; from float rounded to nearest even and saturated to
// +-448 (infinity too), NaN to 0x7F: what PTX's cvt.rn.satfinite.e4m3x2.f32 gives.
float e4m3_to_float(uint8_t x);
uint8_t float_to_e4m3(float f);
// Element i of a typed byte buffer as double.
double element_as_double(DType t, const uint8_t* data, int64_t i);

}  // namespace peak
