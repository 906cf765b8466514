// Integer units and checked arithmetic. Memory is int64_t bytes and time int64_t nanoseconds
// everywhere (STYLE.md rule 3); a product that leaves 64 bits is a config error naming the field.
#pragma once

#include <cstdint>
#include <string_view>

namespace sim {

inline constexpr int64_t kKiB = 1024;
inline constexpr int64_t kMiB = 1024 * kKiB;
inline constexpr int64_t kGiB = 1024 * kMiB;

// Element types of stored tensors. kBool is PyTorch's 1-byte bool (dropout masks); kF8 an fp8
// (e4m3/e5m2) tensor of --fp8's linears (feat).
enum class DType : uint8_t { kBool, kF16, kBF16, kF32, kI64, kF8 };

constexpr int64_t bytes_of(DType t) {
  switch (t) {
    case DType::kBool: return 1;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF32: return 4;
    case DType::kI64: return 8;
    case DType::kF8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t);  // "bf16", "fp32", ...

// a * b, or throws ConfigError("<setup>", field, "... overflows 64 bits").
int64_t checked_mul(int64_t a, int64_t b, std::string_view field);
// a + b, or throws the same.
int64_t checked_add(int64_t a, int64_t b, std::string_view field);
// The product of all factors, checked at every step.
int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view field);

}  // namespace sim
