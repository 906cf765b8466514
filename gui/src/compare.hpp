// The comparison table's rows (one per simulated strategy), their order when sorted by a column,
// and the same rows as CSV schema v1 (sim_io::csv_header / csv_row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "state.hpp"

namespace gui {

enum class CompareColumn : uint8_t {
  kStrategy, kPeak, kFits, kRecomputeFlops, kRecomputeShare, kStepTime, kMfu, kHfu, kTokens, kCount
};
const char* column_label(CompareColumn c);  // table header text

struct CompareRow {
  int run = 0;                 // index into AppState::runs
  std::string strategy;        // canonical
  int64_t peak_bytes = 0;
  bool fits = false;
  int64_t headroom_bytes = 0;
  int64_t recompute_flops = 0;
  double recompute_share = 0;  // of the step's FLOPs: recompute / (fwd + bwd + recompute)
  int64_t step_time_ns = 0;
  double mfu = 0, hfu = 0, tokens_per_s = 0;
};

// Rows of the runs that have a result, in strategy order.
std::vector<CompareRow> compare_rows(const AppState& state);

// Stable sort by one column; ties keep strategy order.
void sort_rows(std::vector<CompareRow>& rows, CompareColumn column, bool descending);

// CSV schema v1 of the simulated strategies (header and one row each), as `actsim run --format
// csv` writes them.
std::string compare_csv(const AppState& state);

}  // namespace gui
