// Element math of the CUDA backend's kernels that must agree with the CPU backend: compiled by
// nvcc for the device and by the host compiler for tests/test_cuda_host.cpp, which holds it
// against harness/executor's numeric.hpp (the generator, bit for bit) and cpu_backend.cpp's
// formulas.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ACTSIM_HD __host__ __device__ __forceinline__
#else
#define ACTSIM_HD inline
#endif

namespace cuda_harness::math {

// numeric.hpp's splitmix64 (Steele, Lea, Flood 2014) and its uniform from the top 53 bits.
ACTSIM_HD uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
ACTSIM_HD double uniform(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t z = mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// cpu_backend's keep_scale: element i of op `op`'s dropout at step `step` is kept (scaled by
// 1 / (1 - p)) when its uniform is at least p.
ACTSIM_HD float keep_scale(uint64_t seed, uint64_t op, uint64_t i, uint64_t step, double p) {
  return uniform(seed, op, i, step) >= p ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
}

// cpu_backend's initialize_persistent: parameter `param`'s element i (norm gains near one,
// everything else small and centred), before rounding to its dtype.
ACTSIM_HD double param_value(uint64_t seed, uint64_t param, uint64_t i, bool norm) {
  const double u = uniform(seed, 0x5eed, param, i) - 0.5;
  return norm ? 1.0 + 0.4 * u : 0.8 * u;
}

// cpu_backend's Exec::kBatch: token ids (salt 0x1d5) and labels (salt 0x1abe1) in [0, vocab).
ACTSIM_HD int64_t token(uint64_t seed, uint64_t salt, uint64_t t, int64_t vocab) {
  return static_cast<int64_t>(floor(uniform(seed, salt, t, 0) * static_cast<double>(vocab)));
}

// GPT-2's tanh GeLU (gelu_new; sqrt(2/pi) = 0.7978845608028654) and SiLU, with their derivatives
// as cpu_backend.cpp writes them, in fp32.
ACTSIM_HD float gelu(float v) {
  const float th = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
  return 0.5f * v * (1 + th);
}
ACTSIM_HD float gelu_grad(float v) {
  const float th = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
  return 0.5f * (1 + th) + 0.5f * v * (1 - th * th) * 0.7978845608028654f * (1 + 3 * 0.044715f * v * v);
}
ACTSIM_HD float silu(float v) { return v * (1.0f / (1.0f + expf(-v))); }
ACTSIM_HD float silu_grad(float v) {
  const float sg = 1.0f / (1.0f + expf(-v));
  return sg * (1 + v * (1 - sg));
}

}  // namespace cuda_harness::math
