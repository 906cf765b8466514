#include "axes.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <utility>

#include "sim/error.hpp"

namespace cli_common {
namespace {

[[noreturn]] void fail(std::string_view flag, std::string_view text, const std::string& message) {
  throw sim::ConfigError(std::string(flag), std::string(text), message);
}

// Splits on one character, keeping empty pieces (the callers reject them).
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto pos = text.find(sep);
    out.push_back(text.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    text.remove_prefix(pos + 1);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Items of a comma list, trimmed; an empty list or item is an error.
std::vector<std::string_view> items(std::string_view text, std::string_view flag) {
  std::vector<std::string_view> out;
  for (std::string_view item : split(text, ',')) {
    item = trim(item);
    if (item.empty()) fail(flag, text, "empty value in the list");
    out.push_back(item);
  }
  return out;
}

double parse_real(std::string_view text, std::string_view flag) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    fail(flag, text, "expected a number");
  return value;
}

// Appends the values of one item (a number or a range) to `out`.
void expand_int_item(std::string_view item, std::string_view flag, bool sizes,
                     std::vector<int64_t>& out) {
  const auto parts = split(item, ':');
  if (parts.size() == 1) {
    out.push_back(parse_int(item, flag, sizes));
    return;
  }
  if (parts.size() > 3) fail(flag, item, "expected a range start:stop[:step]");
  const int64_t start = parse_int(parts[0], flag, sizes);
  const int64_t stop = parse_int(parts[1], flag, sizes);
  if (stop < start) fail(flag, item, "range stop is below its start");
  bool multiply = false;
  int64_t step = 1;
  if (parts.size() == 3) {
    std::string_view s = parts[2];
    if (!s.empty() && s.front() == 'x') {
      multiply = true;
      s.remove_prefix(1);
    }
    step = parse_int(s, flag, sizes);
    if (multiply && step < 2) fail(flag, item, "a multiplicative step must be at least x2");
    if (multiply && start == 0) fail(flag, item, "a multiplicative range cannot start at 0");
    if (!multiply && step < 1) fail(flag, item, "the step must be at least 1");
  }
  const std::size_t before = out.size();
  for (int64_t v = start; v <= stop;) {
    if (static_cast<int64_t>(out.size() - before) >= kMaxAxisValues)
      fail(flag, item, "the range has more than 1,000,000 values");
    out.push_back(v);
    // Stop before the next value would pass `stop` (or overflow).
    if (multiply ? v > stop / step : v > stop - step) break;
    v = multiply ? v * step : v + step;
  }
}

template <typename E>
std::vector<E> parse_named_axis(std::string_view text, std::string_view flag,
                                std::optional<E> (*parse)(std::string_view),
                                std::string_view accepted) {
  std::vector<E> out;
  for (std::string_view item : items(text, flag)) {
    const auto value = parse(item);
    if (!value) fail(flag, item, "unknown value; expected one of " + std::string(accepted));
    out.push_back(*value);
  }
  return out;
}

}  // namespace

std::vector<std::string> split_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> out;
  for (std::string_view item : items(text, flag)) out.emplace_back(item);
  return out;
}

int64_t parse_int(std::string_view text, std::string_view flag, bool sizes) {
  std::string_view digits = text;
  int64_t scale = 1;
  if (sizes && !digits.empty()) {
    if (digits.back() == 'k' || digits.back() == 'K') scale = 1024;
    if (digits.back() == 'M') scale = 1024 * 1024;
    if (scale != 1) digits.remove_suffix(1);
  }
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) fail(flag, text, "number too large");
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
    fail(flag, text,
         sizes ? "expected a non-negative integer (k = 1024 and M = 1024^2 suffixes allowed)"
               : "expected a non-negative integer");
  if (value < 0) fail(flag, text, "expected a non-negative integer");
  if (value > INT64_MAX / scale) fail(flag, text, "number too large");
  return value * scale;
}

std::vector<int64_t> parse_int_axis(std::string_view text, std::string_view flag, bool sizes,
                                    int64_t min_value, int64_t max_value) {
  std::vector<int64_t> out;
  for (std::string_view item : items(text, flag)) {
    const std::size_t before = out.size();
    expand_int_item(item, flag, sizes, out);
    for (std::size_t i = before; i < out.size(); ++i) {
      if (out[i] < min_value || out[i] > max_value) {
        const std::string range = max_value == INT64_MAX
                                      ? "at least " + std::to_string(min_value)
                                      : "between " + std::to_string(min_value) + " and " +
                                            std::to_string(max_value);
        fail(flag, item, "every value must be " + range);
      }
    }
    if (static_cast<int64_t>(out.size()) > kMaxAxisValues)
      fail(flag, text, "more than 1,000,000 values");
  }
  return out;
}

std::vector<double> parse_real_axis(std::string_view text, std::string_view flag) {
  std::vector<double> out;
  for (std::string_view item : items(text, flag)) {
    const auto parts = split(item, ':');
    if (parts.size() == 1) {
      out.push_back(parse_real(item, flag));
      continue;
    }
    if (parts.size() != 3) fail(flag, item, "expected a range start:stop:step");
    const double start = parse_real(parts[0], flag);
    const double stop = parse_real(parts[1], flag);
    const double step = parse_real(parts[2], flag);
    if (stop < start) fail(flag, item, "range stop is below its start");
    if (!(step > 0)) fail(flag, item, "the step must be positive");
    const double count = std::floor((stop - start) / step + 1e-9) + 1;
    if (count > static_cast<double>(kMaxAxisValues))
      fail(flag, item, "the range has more than 1,000,000 values");
    // Rounded to 12 decimals so 0:0.3:0.1 gives 0.3, not 0.30000000000000004, in the CSV.
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
      out.push_back(std::round((start + static_cast<double>(i) * step) * 1e12) / 1e12);
  }
  return out;
}

std::vector<bool> parse_switch_axis(std::string_view text, std::string_view flag) {
  if (trim(text).empty()) return {true};
  constexpr std::array<std::pair<std::string_view, bool>, 8> kWords{{
      {"on", true}, {"off", false}, {"true", true}, {"false", false},
      {"yes", true}, {"no", false}, {"1", true}, {"0", false},
  }};
  std::vector<bool> out;
  for (std::string_view item : items(text, flag)) {
    bool found = false;
    for (const auto& [word, value] : kWords) {
      if (item == word) {
        out.push_back(value);
        found = true;
      }
    }
    if (!found) fail(flag, item, "expected on or off");
  }
  return out;
}

std::vector<sim::Profile> parse_profile_axis(std::string_view text) {
  return parse_named_axis(text, "--profile", &sim::parse_profile, "pytorch, paper");
}
// implver: NAME or NAME@VERSION (a release of that code base, sim/src/impl/registry.cpp)
std::vector<sim::ImplChoice> parse_impl_axis(std::string_view text) {
  std::vector<sim::ImplChoice> out;
  for (std::string_view item : items(text, "--impl")) {
    std::string version_error;
    const auto value = sim::parse_impl_choice(item, &version_error);
    if (!value && !version_error.empty()) fail("--impl", item, version_error);
    if (!value) fail("--impl", item, "unknown value; expected one of " + sim::impl_names());
    out.push_back(*value);
  }
  return out;
}
std::vector<sim::Precision> parse_precision_axis(std::string_view text) {
  return parse_named_axis(text, "--precision", &sim::parse_precision,
                          "bf16-mixed, bf16-amp, fp16-amp, fp32, fsdp2-bf16, deepspeed-bf16");
}
std::vector<sim::AttentionKind> parse_attention_axis(std::string_view text) {
  return parse_named_axis(text, "--attention", &sim::parse_attention, "standard, flash");
}
std::vector<sim::Optimizer> parse_optimizer_axis(std::string_view text) {
  return parse_named_axis(text, "--optimizer", &sim::parse_optimizer,
                          "adam, adam-fused, adam-loop, sgd");
}
std::vector<sim::AllocatorKind> parse_allocator_axis(std::string_view text) {
  return parse_named_axis(text, "--allocator", &sim::parse_allocator,
                          "exact, caching, caching-expandable");
}

// feat2 (issue 13): --fp8 as a list
std::vector<sim::Fp8Recipe> parse_fp8_axis(std::string_view text) {
  return parse_named_axis(text, "--fp8", &sim::parse_fp8,
                          "off, te-delayed, te-current, torchao-tensorwise, torchao-rowwise");
}

std::vector<sim::Strategy> parse_strategy_axis(std::string_view text) {
  std::vector<sim::Strategy> out;
  for (std::string_view item : items(text, "--strategy")) out.push_back(sim::parse_strategy(item));
  return out;
}

}  // namespace cli_common
