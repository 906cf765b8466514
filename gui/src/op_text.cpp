#include "op_text.hpp"

#include "gui_plot/decimate.hpp"

namespace gui {

std::string op_name(const sim::Graph& g, int32_t op) {
  if (op == sim::kStallSpan) return "stall: waiting for a copy to the device";
  if (op == sim::kHostWaitSpan) return "idle: GPU waiting for the host";
  if (op == sim::kCommWaitSpan) return "wait: data-parallel communication";
  if (op < 0 || op >= static_cast<int32_t>(g.ops.size())) return "optimizer step";
  const sim::Op& o = g.ops[op];
  return o.block >= 0 ? "block " + std::to_string(o.block) + " " + o.name : std::string(o.name);
}

int32_t span_at(const RunData& run, int stream, int64_t t) {
  const auto& lane = run.lanes[stream];
  const auto& spans = run.result.spans;
  const auto start = [&](std::size_t i) { return spans[lane[i]].start_ns; };
  const std::size_t i = gui_plot::upper_index(lane.size(), start, static_cast<double>(t));
  if (i == 0) return -1;
  const sim::OpSpan& s = spans[lane[i - 1]];
  return t < s.start_ns + s.duration_ns ? lane[i - 1] : -1;
}

int32_t sample_at(const sim::Result& r, int64_t t) {
  const auto time = [&](std::size_t i) { return r.timeline[i].t_ns; };
  const std::size_t i = gui_plot::upper_index(r.timeline.size(), time, static_cast<double>(t));
  return static_cast<int32_t>(i) - 1;
}

}  // namespace gui
