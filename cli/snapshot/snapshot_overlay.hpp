// A measured step (a PyTorch snapshot's replayed curve) on a simulated step's time axis, and the
// simulated storages live at the simulated peak: what the GUI's memory view overlays and its
// comparison view matches (issue 14), and what `actsim compare` lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "sim/schedule.hpp"
#include "snapshot.hpp"
#include "snapshot_compare.hpp"

namespace actsim_cli {

// The three phases of a step, in order: the measured trace's and the simulation's.
enum class StepPhase : uint8_t { kForward, kBackward, kOptimizer };
inline constexpr int kStepPhases = 3;

struct OverlayPoint {
  int64_t t_ns = 0;            // on the simulated step's time axis
  int64_t allocated_bytes = 0; // measured, right after the event
  int64_t event = 0;           // index in the trace
  StepPhase phase = StepPhase::kForward;
};

// Contract ("time normalized per phase"): the measured trace is cut into forward (every event
// before the first whose frames say backward), backward (from there to the first optimizer
// event after it) and optimizer (the rest); events without a phase hint (segment events, frames
// outside the model) belong to the phase they fall in, and a recompute's forward frames inside
// backward stay in backward, as the simulation counts recompute. The simulation's phases are
// cut the same way from its timeline (recompute is backward). Each measured phase is stretched
// linearly onto the simulated one: by the events' times where the trace records times, else by
// event index. A measured phase the simulation lacks (or the reverse) places no points.
// `sim` must carry a timeline (SimOptions::record_timeline). One point per trace event, in order;
// times never decrease.
std::vector<OverlayPoint> overlay_curve(const SnapshotDevice& device, const SnapshotPeaks& peaks,
                                        const sim::Result& sim);

// The storages live at the simulated allocated peak (sim::holders_at), in storage order, with
// the producing op, a role-and-dtype label, block and category; `result` from simulate_plan of
// `graph` and `plan` with a timeline.
std::vector<SimTensor> simulated_at_peak(const sim::Graph& graph, const sim::Plan& plan,
                                         const sim::Result& result);

}  // namespace actsim_cli
