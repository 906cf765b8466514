#include "phases.hpp"

namespace gui {

std::vector<PhaseBand> phase_bands(const sim::Result& r) {
  std::vector<PhaseBand> out;
  for (const sim::MemorySample& m : r.timeline) {
    if (!out.empty() && out.back().phase == m.phase) continue;
    if (!out.empty()) out.back().t1_ns = m.t_ns;
    out.push_back({out.empty() ? 0 : m.t_ns, m.t_ns, m.phase});
  }
  if (!out.empty()) out.back().t1_ns = r.step_time_ns;
  // Drop empty intervals (a phase that ran only zero-time events) so bands never overlap.
  std::vector<PhaseBand> kept;
  for (const PhaseBand& b : out)
    if (b.t1_ns > b.t0_ns) kept.push_back(b);
  return kept;
}

}  // namespace gui
