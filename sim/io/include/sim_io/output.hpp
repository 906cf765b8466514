// CSV schema v1 and JSON output (DESIGN.md §7). Columns are a stable contract: only ever added,
// units in their names, RFC 4180 quoting. The harness and the PyTorch reference write the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/result.hpp"
#include "sim/setup.hpp"

namespace sim_io {

inline constexpr int kSchemaVersion = 1;

// The key columns of one row: every input knob as the user named it.
struct RowKey {
  std::string model;     // as the user named it
  std::string device;
  std::string strategy;  // canonical string
  sim::TrainSetup setup;
};

// One CSV row: its key, and either a result or an error message.
struct Row {
  int64_t row_index = 0;
  std::string source = "sim";  // sim, cpu, cuda, torch
  RowKey key;
  std::optional<sim::Result> result;
  std::string error;     // non-empty for a row that could not be simulated
  // A measured row of the CPU reference executor: only what it measures is written (model size,
  // peak_phase and the peak columns peak_allocated_bytes, peak_requested_bytes,
  // peak_reserved_bytes, all the exact ledger's peak); every other figure is empty.
  bool peak_only = false;
};

const std::vector<std::string>& csv_columns();   // header, in order
std::string csv_header();                        // header line with trailing '\n'
std::string csv_row(const Row& row);             // one line with trailing '\n'
std::string csv_quote(std::string_view field);   // RFC 4180

// JSON object of one result (with per-block vector and breakdown), pretty-printed.
std::string result_json(const Row& row);

}  // namespace sim_io
