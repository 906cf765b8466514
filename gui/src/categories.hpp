// Memory by category over the step, from the engine's ledger recorded with each timeline sample
// (Result::timeline_breakdown). A sample's bytes beyond the ledger are the running op's
// transients (the engine adds them to the sample only). Checked against the engine in tests/test_gui.cpp: every sample's categories sum to
// its total, and the breakdown at the peak sample equals Result::peak_breakdown.
#pragma once

#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "sim/strategy.hpp"
#include "state.hpp"

namespace gui {

// The breakdown at every sample of `result.timeline` (simulated with record_timeline from
// `graph` and `plan`). Throws std::logic_error if the replay disagrees with a sample's total.
CategorySeries category_series(const sim::Graph& graph, const sim::Plan& plan,
                               const sim::Result& result);

}  // namespace gui
