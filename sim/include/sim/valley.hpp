// The memory valley (DESIGN.md §4 "The valley"): peak memory against m evenly spaced checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/graph.hpp"
#include "sim/strategy.hpp"

namespace sim {

struct ValleyPoint {
  int64_t m = 0;
  double chen_units = 0;        // Chen et al.: m + n/m, in units of one block's activations
  int64_t model_bytes = 0;      // M(m) = m*c + ceil(n/m)*A + baseline
  int64_t simulated_bytes = 0;  // peak of the simulated plan with m segments
  int64_t simulated_block_bytes = 0;  // its peak while block ops run (what M(m) models)
  int64_t step_time_ns = 0;     // simulated step time of that plan
  int64_t recompute_flops = 0;
  friend bool operator==(const ValleyPoint&, const ValleyPoint&) = default;
};

struct Valley {
  int64_t n = 0;              // blocks
  int64_t c_bytes = 0;        // one checkpoint: a block's input (from the `full` run)
  int64_t a_bytes = 0;        // one block's activations (from the `none` run)
  int64_t baseline_bytes = 0; // block-phase peak(full) - n*c - A
  int64_t m_star = 0;         // argmin of M(m) over 1..n (analytic: known before any point)
  int64_t m_star_simulated = 0;  // argmin of the simulated peaks of `points` (0 while none)
  int64_t sqrt_n = 0;         // round(sqrt(n)), the argmin of Chen's curve
  std::vector<ValleyPoint> points;  // m = 1..n (a prefix while being filled in)
  // census12 (issue 12): M(m) holds for n identical blocks only. Where the blocks differ (T5's
  // encoder and decoder stacks, DeepSeek's dense first layers, Gemma's local and global layers
  // under SDPA) it is refused: closed_form false, `why` says how they differ, model_bytes,
  // baseline_bytes and m_star stay 0, and only the simulated points are shown.
  bool closed_form = true;
  std::string why;
  friend bool operator==(const Valley&, const Valley&) = default;
};

Valley compute_valley(const Graph& graph, const Device& device);

// The valley in steps, for front ends that show it filling in (the GUI's worker). compute_valley
// is exactly
//   Valley v = valley_head(graph, device);
//   for (m = 1..v.n) add_point(v, valley_point(graph, device, v, m));
// so the two cannot diverge.
// valley_head simulates `none` and `full` (for A and c) and sets everything but `points` and
// m_star_simulated.
Valley valley_head(const Graph& graph, const Device& device);
// The analytic part of point m (m, chen_units, model_bytes); needs only the head.
ValleyPoint valley_model_point(const Valley& head, int64_t m);
// Point m with its simulated plan (m evenly spaced checkpointed segments). 1 <= m <= head.n.
ValleyPoint valley_point(const Graph& graph, const Device& device, const Valley& head, int64_t m);
// Appends `p` (points in ascending m) and updates m_star_simulated.
void add_point(Valley& valley, const ValleyPoint& p);

}  // namespace sim
