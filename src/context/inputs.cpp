#include "context/inputs.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "context/prng.h"

namespace peak {

namespace {

constexpr uint32_t kPoisonF32 = 0x7FBADBADu;
constexpr uint16_t kPoisonF16 = 0x7DADu;
constexpr uint16_t kPoisonBF16 = 0x7FADu;
constexpr uint32_t kPoisonI32 = 0x7BADBAD7u;
constexpr uint8_t kPoisonE4M3 = 0x7Fu;  // the positive NaN, the only one E4M3 has
constexpr double kTwoPi = 6.283185307179586476925286766559;

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The seed of one variant's stream.
uint64_t variant_seed(uint64_t array_stream, int variant) {
  if (variant == 0) return array_stream;
  return prng::mix(array_stream ^ (static_cast<uint64_t>(variant) * 0xD1B54A32D192ED03ull));
}

// Box-Muller on draws 2p and 2p+1 of the stream: elements 2p (cosine) and 2p+1 (sine) of a
// standard normal.
void normal_pair(uint64_t stream, int64_t p, double z[2]) {
  uint64_t x1 = prng::at(stream, 2 * static_cast<uint64_t>(p));
  uint64_t x2 = prng::at(stream, 2 * static_cast<uint64_t>(p) + 1);
  double u1 = (static_cast<double>(x1 >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  double u2 = prng::unit(x2);                                     // [0, 1)
  double r = std::sqrt(-2.0 * std::log(u1));
  z[0] = r * std::cos(kTwoPi * u2);
  z[1] = r * std::sin(kTwoPi * u2);
}

// iota is kept exactly representable: i mod 2048 for f16, 256 for bf16, 16 for e4m3, 2^24 for
// f32 and i32.
int64_t iota_period(DType t) {
  switch (t) {
    case DType::f16:
      return 2048;
    case DType::bf16:
      return 256;
    case DType::e4m3:
      return 16;
    default:
      return int64_t{1} << 24;
  }
}

// Value i as written in the initializer (before the variant's transform); not for normal.
double draw(const Initializer& init, DType t, uint64_t stream, int64_t i) {
  switch (init.kind) {
    case Initializer::Kind::uniform: {
      double u = prng::unit(prng::at(stream, static_cast<uint64_t>(i)));
      if (t == DType::i32) {
        // Integers uniformly in [ceil(low), floor(high)].
        double lo = std::ceil(init.a), hi = std::floor(init.b);
        if (hi < lo) return lo;
        double n = hi - lo + 1;
        return lo + std::floor(u * n);
      }
      return init.a + (init.b - init.a) * u;
    }
    case Initializer::Kind::normal:
      break;  // in pairs, see normal_pair
    case Initializer::Kind::ones:
      return 1.0;
    case Initializer::Kind::zeros:
      return 0.0;
    case Initializer::Kind::iota: {
      return static_cast<double>(i % iota_period(t));
    }
  }
  return 0.0;
}

// Integer arrays keep their declared values (they may be indices or counts): their variants
// differ only by stream.
double transform(double v, int variant, DType t) {
  if (t == DType::i32) return v;
  switch (variant) {
    case 0:
      return v;
    case 1:
      return v * 0.125 + 0.25;
    case 2:
      return -2.0 * v;
    default:
      return v;  // 3+: a fresh stream of the distribution as written
  }
}

void store(DType t, uint8_t* p, double v) {
  switch (t) {
    case DType::f32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::f16: {
      uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::bf16: {
      uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::e4m3:
      *p = float_to_e4m3(static_cast<float>(v));
      break;
    case DType::i32: {
      double r = std::nearbyint(v);
      if (r > std::numeric_limits<int32_t>::max()) r = std::numeric_limits<int32_t>::max();
      if (r < std::numeric_limits<int32_t>::min()) r = std::numeric_limits<int32_t>::min();
      int32_t x = static_cast<int32_t>(r);
      std::memcpy(p, &x, 4);
      break;
    }
  }
}

}  // namespace

std::map<std::string, std::vector<uint8_t>> generate_inputs(const KernelContext& ctx,
                                                            const BoundShape& bound, uint64_t seed,
                                                            int variant) {
  std::map<std::string, std::vector<uint8_t>> inputs;
  for (const auto& a : ctx.arrays)
    if (!a.output)
      inputs[a.name] = generate_array(a, bound.elements(a.name), array_seed(seed, a.name), variant);
  return inputs;
}

uint64_t array_seed(uint64_t seed, const std::string& array_name) {
  return prng::mix(prng::mix(seed) ^ prng::fnv1a(array_name));
}

namespace {

uint64_t element_stream(const ArraySpec& spec, uint64_t seed, int variant) {
  return variant_seed(array_seed(seed, spec.name), variant);
}

bool is_random(const ArraySpec& spec) {
  return spec.init.kind == Initializer::Kind::uniform ||
         spec.init.kind == Initializer::Kind::normal;
}

// generate_array's rule for an all-zero random array: element `index` (chosen by the stream)
// gets the first nonzero of the high end, the low end and 1 (tiny ranges can round to zero in the
// element type).
std::vector<uint8_t> zero_fix(const ArraySpec& spec, uint64_t stream, int64_t count, int variant,
                              int64_t& index) {
  index = static_cast<int64_t>(prng::at(stream, ~0ull) % static_cast<uint64_t>(count));
  std::vector<uint8_t> e(dtype_size(spec.dtype));
  double lo = spec.init.a, hi = spec.init.b;
  if (spec.init.kind == Initializer::Kind::normal) {
    lo = spec.init.a - spec.init.b;
    hi = spec.init.a + spec.init.b;
  }
  for (double v : {transform(hi, variant, spec.dtype), transform(lo, variant, spec.dtype), 1.0}) {
    store(spec.dtype, e.data(), v);
    if (element_as_double(spec.dtype, e.data(), 0) != 0.0) break;
  }
  return e;
}

bool all_zero(DType t, const std::vector<uint8_t>& bytes, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (element_as_double(t, bytes.data(), i) != 0.0) return false;
  return true;
}

// fill(first, last) over [0, count) in chunks of 2^20, on up to 32 threads (one per core) when
// there is more than one chunk. The chunks write disjoint elements.
void for_chunks(int64_t count, const std::function<void(int64_t, int64_t)>& fill) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  const int64_t nthreads = std::min<int64_t>(
      {chunks, static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())), 32});
  if (nthreads <= 1) {
    if (count > 0) fill(0, count);
    return;
  }
  std::atomic<int64_t> next{0};
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < nthreads; ++t) {
    threads.emplace_back([&] {
      for (int64_t c; (c = next.fetch_add(1)) < chunks;)
        fill(c * kChunk, std::min(count, (c + 1) * kChunk));
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace

std::vector<uint8_t> generate_array(const ArraySpec& spec, int64_t count, uint64_t seed,
                                    int variant) {
  if (count <= 0) return {};
  const size_t es = dtype_size(spec.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(count) * es);
  const uint64_t stream = element_stream(spec, seed, variant);
  // Element i depends on i alone, so large arrays are filled by several threads in chunks.
  auto fill = [&](int64_t first, int64_t last) {
    double pair[2] = {0, 0};
    int64_t pair_index = -1;
    for (int64_t i = first; i < last; ++i) {
      double v;
      if (spec.init.kind == Initializer::Kind::normal) {
        if (i / 2 != pair_index) {
          pair_index = i / 2;
          normal_pair(stream, pair_index, pair);
        }
        v = spec.init.a + spec.init.b * pair[i & 1];
      } else {
        v = draw(spec.init, spec.dtype, stream, i);
      }
      store(spec.dtype, out.data() + static_cast<size_t>(i) * es,
            transform(v, variant, spec.dtype));
    }
  };
  for_chunks(count, fill);
  if (is_random(spec) && all_zero(spec.dtype, out, count)) {
    int64_t i = 0;
    auto e = zero_fix(spec, stream, count, variant, i);
    std::memcpy(out.data() + static_cast<size_t>(i) * es, e.data(), es);
  }
  return out;
}

std::optional<InputGenerator> input_generator(const ArraySpec& spec, int64_t count, uint64_t seed,
                                              int variant) {
  if (variant != 0 || count <= 0 || spec.init.kind == Initializer::Kind::normal)
    return std::nullopt;
  InputGenerator g;
  g.dtype = spec.dtype;
  g.stream = element_stream(spec, seed, variant);
  switch (spec.init.kind) {
    case Initializer::Kind::uniform:
      if (spec.dtype == DType::i32) {
        const double lo = std::ceil(spec.init.a), hi = std::floor(spec.init.b);
        g.kind = hi < lo ? InputGenerator::Kind::constant : InputGenerator::Kind::uniform_int;
        g.a = lo;
        g.d = hi - lo + 1;
      } else {
        g.kind = InputGenerator::Kind::uniform_real;
        g.a = spec.init.a;
        g.d = spec.init.b - spec.init.a;
      }
      break;
    case Initializer::Kind::ones:
      g.a = 1.0;
      break;
    case Initializer::Kind::zeros:
      g.a = 0.0;
      break;
    case Initializer::Kind::iota:
      g.kind = InputGenerator::Kind::iota;
      g.period = iota_period(spec.dtype);
      break;
    case Initializer::Kind::normal:
      return std::nullopt;
  }
  g.random = is_random(spec);
  if (g.random) g.zero_fix = zero_fix(spec, g.stream, count, variant, g.zero_fix_index);
  return g;
}

bool write_elements(const ArraySpec& spec, int64_t count, uint64_t seed, int variant,
                    const std::vector<int64_t>& indices, std::vector<uint8_t>& out) {
  const size_t es = dtype_size(spec.dtype);
  if (count < 0 || out.size() != static_cast<size_t>(count) * es) return false;
  for (int64_t i : indices)
    if (i < 0 || i >= count) return false;
  const uint64_t stream = element_stream(spec, seed, variant);
  std::atomic<bool> nonzero{false};
  // Every element is a function of its index alone, so chunks of the indices fill in parallel
  // (a decode-sized attention check writes tens of millions of K and V elements).
  for_chunks(static_cast<int64_t>(indices.size()), [&](int64_t first, int64_t last) {
    bool any = false;
    for (int64_t k = first; k < last; ++k) {
      const int64_t i = indices[static_cast<size_t>(k)];
      double v;
      if (spec.init.kind == Initializer::Kind::normal) {
        double pair[2];
        normal_pair(stream, i / 2, pair);
        v = spec.init.a + spec.init.b * pair[i & 1];
      } else {
        v = draw(spec.init, spec.dtype, stream, i);
      }
      uint8_t* p = out.data() + static_cast<size_t>(i) * es;
      store(spec.dtype, p, transform(v, variant, spec.dtype));
      any = any || element_as_double(spec.dtype, p, 0) != 0.0;
    }
    if (any) nonzero = true;
  });
  return nonzero || !is_random(spec);
}

std::optional<std::vector<uint8_t>> generate_elements(const ArraySpec& spec, int64_t count,
                                                      uint64_t seed, int variant,
                                                      const std::vector<int64_t>& indices) {
  std::vector<uint8_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)) *
                           dtype_size(spec.dtype));
  if (!write_elements(spec, count, seed, variant, indices, out)) return std::nullopt;
  return out;
}

std::vector<uint8_t> run_generator(const InputGenerator& g, int64_t count) {
  const size_t es = dtype_size(g.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)) * es);
  for (int64_t i = 0; i < count; ++i) {
    double v = g.a;
    const double u = prng::unit(prng::at(g.stream, static_cast<uint64_t>(i)));
    if (g.kind == InputGenerator::Kind::uniform_real) v = g.a + g.d * u;
    if (g.kind == InputGenerator::Kind::uniform_int) v = g.a + std::floor(u * g.d);
    if (g.kind == InputGenerator::Kind::iota) v = static_cast<double>(i % g.period);
    store(g.dtype, out.data() + static_cast<size_t>(i) * es, v);
  }
  if (g.random && count > 0 && all_zero(g.dtype, out, count))
    std::memcpy(out.data() + static_cast<size_t>(g.zero_fix_index) * es, g.zero_fix.data(), es);
  return out;
}

uint32_t poison_u32(DType t) {
  switch (t) {
    case DType::f32:
      return kPoisonF32;
    case DType::f16:
      return (uint32_t{kPoisonF16} << 16) | kPoisonF16;
    case DType::bf16:
      return (uint32_t{kPoisonBF16} << 16) | kPoisonBF16;
    case DType::i32:
      return kPoisonI32;
    case DType::e4m3:
      return uint32_t{kPoisonE4M3} * 0x01010101u;
  }
  return kPoisonF32;
}

bool is_poison(DType t, const uint8_t* element) {
  if (t == DType::e4m3) return *element == kPoisonE4M3;
  if (t == DType::f16 || t == DType::bf16) {
    uint16_t h;
    std::memcpy(&h, element, 2);
    return h == (t == DType::f16 ? kPoisonF16 : kPoisonBF16);
  }
  uint32_t u;
  std::memcpy(&u, element, 4);
  return u == (t == DType::f32 ? kPoisonF32 : kPoisonI32);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F)
    return bits_float(sign | 0x7F800000u | (mant << 13));  // inf / NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);  // signed zero
  // Subnormal: value = mant * 2^-24, exact in float.
  float f = static_cast<float>(mant) * 0x1.0p-24f;
  return sign ? -f : f;
}

uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t exp = (u >> 23) & 0xFFu;
  const uint32_t mant = u & 0x7FFFFFu;
  if (exp == 0xFF) {
    if (mant == 0) return sign | 0x7C00u;  // infinity
    // NaN: keep the top payload bits; never let the payload collapse to zero (infinity).
    uint16_t m = static_cast<uint16_t>(mant >> 13);
    if (m == 0) m = 0x200;
    return sign | 0x7C00u | m;
  }
  const int e = static_cast<int>(exp) - 127;  // unbiased
  if (e > 15) return sign | 0x7C00u;          // overflow to infinity
  if (e >= -14) {
    // Normal half: 10 mantissa bits, round to nearest even on the 13 dropped bits. A carry out
    // of the mantissa correctly bumps the exponent (and 65520 and up become infinity).
    uint32_t hbits = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (hbits & 1u))) ++hbits;
    return static_cast<uint16_t>(sign | hbits);
  }
  if (e < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: value / 2^-24 rounded to nearest even, with the implicit bit made explicit.
  const uint32_t full = mant | 0x800000u;  // 24-bit significand; value = full * 2^(e-23)
  const int shift = -e - 1;                // full * 2^(e-23) / 2^-24 = full >> (-1 - e)
  uint32_t hm = full >> shift;
  const uint32_t rem = full & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (hm & 1u))) ++hm;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | hm);
}

float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0) {
    uint16_t h = static_cast<uint16_t>(u >> 16);
    return (h & 0x7Fu) ? h : static_cast<uint16_t>(h | 0x40u);  // a NaN stays a NaN
  }
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float e4m3_to_float(uint8_t x) {
  const float sign = (x & 0x80u) ? -1.0f : 1.0f;
  const int exp = (x >> 3) & 0xF;
  const int mant = x & 0x7;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: m * 2^-9
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);      // (1 + m/8) * 2^(e-7)
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return kPoisonE4M3;
  const uint8_t sign = std::signbit(f) ? 0x80u : 0x00u;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 448.0) return sign | 0x7Eu;  // saturated, infinity included
  if (a < 0x1.0p-6) {
    // Subnormals in steps of 2^-9; 8 steps carry into the smallest normal (code 0x08).
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1.0p9));
  }
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e with f in [0.5, 1): the unbiased exponent is e - 1
  const double q = std::nearbyint(std::ldexp(a, 4 - e));    // 8..16 eighths of 2^(e-1)
  int code = ((e - 1 + 7) << 3) + static_cast<int>(q) - 8;  // q = 16 carries into the exponent
  return sign | static_cast<uint8_t>(std::min(code, 0x7E));
}

double element_as_double(DType t, const uint8_t* data, int64_t i) {
  switch (t) {
    case DType::f32: {
      float f;
      std::memcpy(&f, data + i * 4, 4);
      return f;
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return half_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return bf16_to_float(h);
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, data + i * 4, 4);
      return x;
    }
    case DType::e4m3:
      return e4m3_to_float(data[i]);
  }
  return 0.0;
}

}  // namespace peak
