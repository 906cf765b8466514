// The comparison table's rows (one per simulated strategy), their order when sorted by a column,
// and the same rows as CSV schema v1 (sim_io::csv_header / csv_row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "state.hpp"

namespace gui {

enum class CompareColumn : uint8_t {
  kStrategy, kPeak, kFits, kRecomputeFlops, kRecomputeShare, kStepTime, kMfu, kHfu, kTokens,
  kMfuFp8,  // polish: MFU against the mixed fp8/16-bit peak (Result::mfu_fp8_mixed)
  kCount
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
  // polish: MFU's peak (the dense 16-bit one, FLOP/s) and, under --fp8, the model FLOPs that ran
  // in fp8 GEMMs and the MFU against the mixed peak (Result's fields of the same names)
  double mfu_peak_flops_per_s = 0;
  int64_t fp8_model_flops = 0;
  double mfu_fp8_mixed = 0;
};

// Rows of the runs that have a result, in strategy order.
std::vector<CompareRow> compare_rows(const AppState& state);

// Stable sort by one column; ties keep strategy order.
void sort_rows(std::vector<CompareRow>& rows, CompareColumn column, bool descending);

// CSV schema v1 of the simulated strategies (header and one row each), as `actsim run --format
// csv` writes them.
std::string compare_csv(const AppState& state);

}  // namespace gui
