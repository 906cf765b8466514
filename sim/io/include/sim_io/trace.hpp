// Chrome / Perfetto trace of one simulated step (JSON Trace Event Format): one "X" complete event
// per op span on one track per stream (compute, collective) with the op's layer, name, phase,
// FLOPs and bytes as args, and one "C" counter event per memory sample (allocated bytes, and
// reserved bytes under the caching allocator). Needs a Result simulated with
// SimOptions::record_timeline.
#pragma once

#include <string>
#include <string_view>

#include "sim/graph.hpp"
#include "sim/result.hpp"

namespace sim_io {

// The whole trace file. ts and dur are microseconds (the format's unit) printed with three
// decimals from the integer nanoseconds, so the same result gives byte-identical text. Besides
// the spans and samples, three "M" metadata events name the process and the two tracks.
// `title` names the process ("gpt2-small on h100-sxm, strategy full").
std::string trace_json(const sim::Graph& graph, const sim::Result& result, std::string_view title);

}  // namespace sim_io
