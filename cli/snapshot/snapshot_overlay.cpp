#include "snapshot_overlay.hpp"

#include <algorithm>
#include <array>

#include "sim/simulate.hpp"

namespace actsim_cli {
namespace {

struct Span {
  int64_t begin = 0, end = 0;  // [begin, end): trace events, or simulated ns
  bool empty() const { return end <= begin; }
};

}  // namespace

std::vector<OverlayPoint> overlay_curve(const SnapshotDevice& d, const SnapshotPeaks& peaks,
                                        const sim::Result& sim) {
  const auto n = static_cast<int64_t>(d.trace.size());
  // Measured cuts: the first backward event, then the first optimizer event at or after it.
  int64_t first_bwd = n, first_opt = n;
  for (int64_t i = 0; i < n; ++i) {
    if (d.trace[static_cast<std::size_t>(i)].phase == "backward") {
      first_bwd = i;
      break;
    }
  }
  for (int64_t i = first_bwd == n ? 0 : first_bwd; i < n; ++i) {
    if (d.trace[static_cast<std::size_t>(i)].phase == "optimizer") {
      first_opt = i;
      break;
    }
  }
  first_bwd = std::min(first_bwd, first_opt);
  const std::array<Span, kStepPhases> measured{Span{0, first_bwd}, Span{first_bwd, first_opt},
                                               Span{first_opt, n}};
  // Simulated cuts, from the timeline's phases (recompute counts as backward).
  int64_t sim_bwd = -1, sim_opt = -1;
  for (const sim::MemorySample& m : sim.timeline) {
    if (sim_bwd < 0 && (m.phase == sim::Phase::kBackward || m.phase == sim::Phase::kRecompute))
      sim_bwd = m.t_ns;
    if (sim_opt < 0 && m.phase == sim::Phase::kOptimizer) sim_opt = m.t_ns;
  }
  const int64_t end = sim.step_time_ns;
  if (sim_opt < 0) sim_opt = end;
  if (sim_bwd < 0) sim_bwd = sim_opt;
  const std::array<Span, kStepPhases> simulated{Span{0, sim_bwd}, Span{sim_bwd, sim_opt},
                                                Span{sim_opt, end}};

  std::vector<OverlayPoint> out;
  out.reserve(d.trace.size());
  for (int ph = 0; ph < kStepPhases; ++ph) {
    const Span m = measured[ph], s = simulated[ph];
    if (m.empty() || s.empty()) continue;
    // Position within the measured phase: the events' times when every event of the phase and
    // the next phase's first event have one, else the event index.
    const auto time_at = [&](int64_t i) { return d.trace[static_cast<std::size_t>(i)].time_us; };
    const int64_t stop = m.end < n ? m.end : m.end - 1;  // the last phase ends at its last event
    bool timed = time_at(m.begin) >= 0 && time_at(stop) >= 0 && time_at(stop) > time_at(m.begin);
    for (int64_t i = m.begin; timed && i < m.end; ++i) timed = time_at(i) >= 0;
    const double lo = timed ? static_cast<double>(time_at(m.begin)) : static_cast<double>(m.begin);
    const double hi = timed ? static_cast<double>(time_at(stop))
                            : static_cast<double>(m.end < n ? m.end : std::max(m.end - 1, m.begin + 1));
    int64_t last_t = s.begin;
    for (int64_t i = m.begin; i < m.end; ++i) {
      const double x = timed ? static_cast<double>(time_at(i)) : static_cast<double>(i);
      const double f = hi > lo ? std::clamp((x - lo) / (hi - lo), 0.0, 1.0) : 0.0;
      int64_t t = s.begin + static_cast<int64_t>(f * static_cast<double>(s.end - s.begin));
      t = std::clamp(std::max(t, last_t), s.begin, s.end);  // times never go back (clock skew)
      last_t = t;
      out.push_back({t, peaks.curve[static_cast<std::size_t>(i)], i, static_cast<StepPhase>(ph)});
    }
  }
  return out;
}

std::vector<SimTensor> simulated_at_peak(const sim::Graph& graph, const sim::Plan& plan,
                                         const sim::Result& result) {
  std::vector<SimTensor> out;
  const auto holders =
      sim::holders_at(graph, plan, sim::recompute_mode(graph), result.peak_event_index);
  for (std::size_t i = 0; i < holders.size(); ++i) {
    if (holders[i].empty()) continue;
    const sim::Storage& st = graph.storages[i];
    SimTensor t;
    t.bytes = st.bytes;
    t.op = st.producer >= 0 ? graph.ops[static_cast<std::size_t>(st.producer)].name : "";
    t.label = std::string(st.role) + " (" + std::string(sim::dtype_name(st.dtype)) + ")";
    t.block = st.block;
    t.category = std::string(sim::category_name(st.category));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace actsim_cli
