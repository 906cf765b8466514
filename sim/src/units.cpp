#include "sim/units.hpp"

#include <string>

#include "sim/error.hpp"

namespace sim {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "fp32";
    case DType::kI64: return "int64";
    case DType::kF8: return "fp8";
  }
  return "?";
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view field) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw ConfigError("<setup>", std::string(field), "byte or FLOP count overflows 64 bits");
  }
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view field) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw ConfigError("<setup>", std::string(field), "byte or FLOP count overflows 64 bits");
  }
  return r;
}

int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view field) {
  int64_t r = 1;
  for (int64_t f : factors) r = checked_mul(r, f, field);
  return r;
}

}  // namespace sim
