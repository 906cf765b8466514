// What a Workspace holds (sim/simulate.hpp): the vectors that one simulation fills and the next
// one clears and refills. Only capacity carries over between calls, never contents.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/allocator.hpp"

#include "sim/graph.hpp"
#include "sim/schedule.hpp"
#include "sim/simulate.hpp"

namespace sim {

// The scheduler's per-storage and per-op reference-counting state.
struct ScheduleScratch {
  std::vector<int32_t> region_of, count;
  std::vector<uint8_t> live, cached, step_end;
};

// The engine's per-storage ledger state.
struct EngineScratch {
  std::vector<uint8_t> live, cat;
  std::vector<int64_t> fwd_ns;
  // planner3 (issue 15): the caching allocator model and its handles, reset (not rebuilt) by the
  // next simulation, so their memory is not faulted in anew for each plan the planner simulates.
  std::unique_ptr<CachingAllocator> allocator;
  std::vector<int32_t> heap_handle;
  // planner4 (issue 15): a run that records its timeline takes these (cleared) as its Result's
  // timeline, breakdown and spans; a caller done with a Result may hand its vectors back, so
  // that the planner's probes (seven timelines of ~10^6 samples and spans at 10,000 blocks) do
  // not fault their memory in seven times. Capacity only, as above.
  std::vector<MemorySample> timeline;
  std::vector<Breakdown> timeline_breakdown;
  std::vector<OpSpan> spans;
};

struct Workspace::Buffers {
  Graph graph;
  Schedule schedule;
  ScheduleScratch schedule_scratch;
  EngineScratch engine_scratch;
};

// build_schedule into `out`, reusing its capacity and the scratch's.
void build_schedule(const Graph& graph, const Plan& plan, RecomputeMode mode, Schedule& out,
                    ScheduleScratch& scratch);
// run_engine with the engine's vectors taken from (and returned to) the scratch.
Result run_engine(const Graph& graph, const Schedule& schedule, const Device& device,
                  const SimOptions& options, EngineScratch& scratch);
// planner5 (issue 15): run_engine, except that under a caching allocator, when the warm-up step
// leaves more than `reserved_limit` bytes reserved, the measured step is not run (its reserved
// peak starts there, so it exceeds the limit too) and `stopped` is set: the result is then the
// warm-up step's, with peak_reserved_bytes the reserved bytes it left (a lower bound on the
// measured step's, above the limit). Its times and FLOPs are the measured step's (the engine's
// times never read the allocator model; tests/test_planner.cpp checks it); its memory figures
// are the warm-up's.
Result run_engine_bounded(const Graph& graph, const Schedule& schedule, const Device& device,
                          const SimOptions& options, EngineScratch& scratch,
                          int64_t reserved_limit, bool& stopped);

}  // namespace sim
