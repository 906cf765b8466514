// Human descriptions of ops and samples for hovers: "block 3 fc1 (backward)".
#pragma once

#include <cstdint>
#include <string>

#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "state.hpp"

namespace gui {

// "block 3 fc1", "loss", or "optimizer step" for op -1.
std::string op_name(const sim::Graph& graph, int32_t op);

// The span of `lane` (RunData::lanes[stream]) running at time t, or -1 between spans.
int32_t span_at(const RunData& run, int stream, int64_t t_ns);

// The timeline sample holding at time t (step semantics of gui_plot/decimate.hpp), or -1 before
// the first.
int32_t sample_at(const sim::Result& result, int64_t t_ns);

}  // namespace gui
