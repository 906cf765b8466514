// The values of the common flags as axes of a sweep (DESIGN.md §7). Pure functions from the text
// a user typed to values; every error is a sim::ConfigError whose where() is the flag ("--seq"),
// whose field() is the offending text, and whose message says what was expected.
//
// Grammar of a numeric knob:  item (',' item)*
//   item   = number | number ':' number [':' step]      inclusive range
//   step   = number (additive, default 1) | 'x' number (multiplicative, at least 2)
//   number = digits with an optional size suffix 'k' (1024) or 'M' (1024^2) where sizes are allowed
// "--seq 1k:32k:x2" is 1024, 2048, ..., 32768; "--batch 1:8:3" is 1, 4, 7.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/setup.hpp"
#include "sim/strategy.hpp"

namespace cli_common {

inline constexpr int64_t kMaxAxisValues = 1'000'000;  // one axis; guards against 1:1M:1 typos

// "a,b,c" split on ','; an empty item is an error naming the flag.
std::vector<std::string> split_list(std::string_view text, std::string_view flag);

// One non-negative integer; `sizes` allows the k/M suffixes.
int64_t parse_int(std::string_view text, std::string_view flag, bool sizes);

// A numeric axis (grammar above), values in the order written, each in [min_value, max_value].
std::vector<int64_t> parse_int_axis(std::string_view text, std::string_view flag, bool sizes,
                                    int64_t min_value = 0, int64_t max_value = INT64_MAX);

// Real-valued axis (--dropout): numbers, or ranges start:stop:step with an additive step; the
// values are start + i*step, so 0:0.3:0.1 gives 0, 0.1, 0.2, 0.3 (a step within 1e-9 of the stop
// counts as reaching it), rounded to 12 decimals.
std::vector<double> parse_real_axis(std::string_view text, std::string_view flag);

// An on/off axis (--sp): on/off, true/false, yes/no, 1/0; empty text (the flag given alone) is on.
std::vector<bool> parse_switch_axis(std::string_view text, std::string_view flag);

// Named-value axes; an unknown name lists the accepted ones.
std::vector<sim::Profile> parse_profile_axis(std::string_view text);          // --profile
std::vector<sim::ImplChoice> parse_impl_axis(std::string_view text);  // implver: NAME[@VERSION]                // --impl
std::vector<sim::Precision> parse_precision_axis(std::string_view text);      // --precision
std::vector<sim::AttentionKind> parse_attention_axis(std::string_view text);  // --attention
std::vector<sim::Optimizer> parse_optimizer_axis(std::string_view text);      // --optimizer
std::vector<sim::AllocatorKind> parse_allocator_axis(std::string_view text);  // --allocator
std::vector<sim::Fp8Recipe> parse_fp8_axis(std::string_view text);            // --fp8 (feat2)
// --strategy: a comma list of strategies (a custom spec has '+' and '@' but never ',').
std::vector<sim::Strategy> parse_strategy_axis(std::string_view text);

}  // namespace cli_common
