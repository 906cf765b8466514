#include "compare.hpp"

#include <algorithm>

#include "sim_io/output.hpp"
#include "update.hpp"  // gui_pp: step_result

namespace gui {

const char* column_label(CompareColumn c) {
  switch (c) {
    case CompareColumn::kStrategy: return "strategy";
    case CompareColumn::kPeak: return "peak";
    case CompareColumn::kFits: return "fits (headroom)";
    case CompareColumn::kRecomputeFlops: return "recompute";
    case CompareColumn::kRecomputeShare: return "of FLOPs";
    case CompareColumn::kStepTime: return "step time";
    case CompareColumn::kMfu: return "MFU";
    case CompareColumn::kHfu: return "HFU";
    case CompareColumn::kTokens: return "tokens/s";
    case CompareColumn::kMfuFp8: return "MFU (mixed)";
    case CompareColumn::kCount: break;
  }
  return "?";
}

std::vector<CompareRow> compare_rows(const AppState& st) {
  std::vector<CompareRow> rows;
  for (size_t i = 0; i < st.runs.size(); ++i) {
    const Run& run = st.runs[i];
    if (!run.data || i >= st.inputs.strategies.size()) continue;
    // gui_pp: a pipeline's row is its step (worst stage's memory, all micro-batches' time)
    const sim::Result& r = step_result(*run.data);
    CompareRow row;
    row.run = static_cast<int>(i);
    const StrategyEntry& e = st.inputs.strategies[i];
    row.strategy = e.strategy ? e.strategy->canonical() : e.spec;
    row.peak_bytes = r.peak_allocated_bytes;
    row.fits = r.fits;
    row.headroom_bytes = r.headroom_bytes;
    row.recompute_flops = r.recompute_flops;
    const int64_t step_flops = r.fwd_flops + r.bwd_flops + r.recompute_flops;
    row.recompute_share =
        step_flops > 0 ? static_cast<double>(r.recompute_flops) / static_cast<double>(step_flops) : 0;
    row.step_time_ns = r.step_time_ns;
    row.mfu = r.mfu;
    row.hfu = r.hfu;
    row.tokens_per_s = r.tokens_per_s;
    row.mfu_peak_flops_per_s = r.mfu_peak_flops_per_s;  // polish
    row.fp8_model_flops = r.fp8_model_flops;
    row.mfu_fp8_mixed = r.mfu_fp8_mixed;
    rows.push_back(std::move(row));
  }
  return rows;
}

void sort_rows(std::vector<CompareRow>& rows, CompareColumn column, bool descending) {
  const auto key_less = [column](const CompareRow& a, const CompareRow& b) {
    switch (column) {
      case CompareColumn::kStrategy: return a.strategy < b.strategy;
      case CompareColumn::kPeak: return a.peak_bytes < b.peak_bytes;
      case CompareColumn::kFits: return a.headroom_bytes < b.headroom_bytes;
      case CompareColumn::kRecomputeFlops: return a.recompute_flops < b.recompute_flops;
      case CompareColumn::kRecomputeShare: return a.recompute_share < b.recompute_share;
      case CompareColumn::kStepTime: return a.step_time_ns < b.step_time_ns;
      case CompareColumn::kMfu: return a.mfu < b.mfu;
      case CompareColumn::kHfu: return a.hfu < b.hfu;
      case CompareColumn::kTokens: return a.tokens_per_s < b.tokens_per_s;
      case CompareColumn::kMfuFp8: return a.mfu_fp8_mixed < b.mfu_fp8_mixed;
      case CompareColumn::kCount: break;
    }
    return false;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const CompareRow& a, const CompareRow& b) {
    return descending ? key_less(b, a) : key_less(a, b);
  });
}

std::string compare_csv(const AppState& st) {
  std::string out = sim_io::csv_header();
  int64_t index = 0;
  for (size_t i = 0; i < st.runs.size() && i < st.inputs.strategies.size(); ++i) {
    const Run& run = st.runs[i];
    const StrategyEntry& e = st.inputs.strategies[i];
    sim_io::Row row;
    row.row_index = index++;
    row.key.model = st.inputs.model_label;
    row.key.device = st.inputs.device_label;
    // budget: writes the plan it made, as `actsim run` does (budget:<bytes> names no plan).
    row.key.strategy = run.data && !run.data->planned.empty() ? run.data->planned
                       : e.strategy                           ? e.strategy->canonical()
                                                              : e.spec;
    row.key.setup = st.inputs.setup;
    if (run.data) row.result = step_result(*run.data);  // gui_pp: the pipeline's summary
    else row.error = run.error.empty() ? "not simulated yet" : run.error;
    out += sim_io::csv_row(row);
  }
  return out;
}

}  // namespace gui
