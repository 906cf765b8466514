// Element conversion for the executor's buffers and its counter-based random numbers.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sim/units.hpp"

namespace executor::detail {

// fp32 -> bf16, round to nearest even (NaN kept quiet), as torch's c10::BFloat16 rounds.
inline uint16_t to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// fp32 -> IEEE binary16, round to nearest even, overflow to infinity, subnormals kept.
inline uint16_t to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to infinity
  if (abs < 0x38800000) {  // subnormal in fp16 (below 2^-14): scale to units of 2^-24
    const float a = std::bit_cast<float>(abs);
    const float scaled = a * 16777216.0f;  // exact: a power of two
    // nearbyint rounds to nearest even in the default rounding mode
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | h);
}
inline float from_f16(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

inline double load(const uint8_t* p, sim::DType dt, int64_t i) {
  switch (dt) {
    case sim::DType::kBool: return p[i] ? 1.0 : 0.0;
    case sim::DType::kF8: return 0;  // feat: fp8 graphs are refused (walker.cpp run_step)
    case sim::DType::kF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return from_f16(h); }
    case sim::DType::kBF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return from_bf16(h); }
    case sim::DType::kF32: { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
    case sim::DType::kI64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
  }
  return 0;
}

// Stores x rounded to the dtype (16-bit types through fp32, as GPU kernels compute in fp32).
inline void store(uint8_t* p, sim::DType dt, int64_t i, double x) {
  switch (dt) {
    case sim::DType::kBool: p[i] = x != 0.0 ? 1 : 0; return;
    case sim::DType::kF8: return;  // feat: fp8 graphs are refused (walker.cpp run_step)
    case sim::DType::kF16: { uint16_t h = to_f16(static_cast<float>(x)); std::memcpy(p + 2 * i, &h, 2); return; }
    case sim::DType::kBF16: { uint16_t h = to_bf16(static_cast<float>(x)); std::memcpy(p + 2 * i, &h, 2); return; }
    case sim::DType::kF32: { float f = static_cast<float>(x); std::memcpy(p + 4 * i, &f, 4); return; }
    case sim::DType::kI64: { int64_t v = static_cast<int64_t>(x); std::memcpy(p + 8 * i, &v, 8); return; }
  }
}

// splitmix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"): a
// stateless mix, so a value depends only on its key (op, element, step): recompute replays it.
inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// Uniform in [0, 1) from the top 53 bits of mix(key...).
inline double uniform(uint64_t a, uint64_t b, uint64_t c, uint64_t d = 0) {
  const uint64_t z = mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace executor::detail
