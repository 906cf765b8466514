// The memory valley (DESIGN.md §4): Chen et al.'s unit-cost curve m + n/m beside the real
// M(m) = m*c + ceil(n/m)*A + baseline for transformer blocks, and the simulated peak per m.
#include "sim/valley.hpp"

#include <cmath>

#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace sim {

Valley compute_valley(const Graph& g, const Device& device) {
  Valley v;
  const int64_t n = g.n_blocks;
  v.n = n;
  if (n <= 0) return v;
  auto plan_for = [&](int64_t m) {
    Plan p;
    p.mode.assign(static_cast<size_t>(n), BlockMode::kCheckpoint);
    p.segments = even_segments(n, m);
    return p;
  };
  Plan none;
  none.mode.assign(static_cast<size_t>(n), BlockMode::kStore);
  const Result r_none = simulate_plan(g, none, device);
  const Result r_full = simulate_plan(g, plan_for(n), device);
  // c: a checkpoint is a block's input, what `full` keeps per block; A: a block's activations.
  v.c_bytes = r_full.activation_bytes_per_layer;
  v.a_bytes = r_none.activation_bytes_per_layer;
  // baseline: what the block phase holds besides checkpoints and one segment's activations, read
  // off the m = n run: block peak(full) = n*c + 1*A + baseline. The block phase, because the
  // step's peak may sit in the loss instead (large vocabularies), which M(m) does not model.
  v.baseline_bytes = r_full.block_peak_bytes - checked_mul(n, v.c_bytes, "valley") - v.a_bytes;
  v.sqrt_n = std::llround(std::sqrt(static_cast<double>(n)));
  int64_t best_model = INT64_MAX, best_sim = INT64_MAX;
  for (int64_t m = 1; m <= n; ++m) {
    ValleyPoint p;
    p.m = m;
    const int64_t per = (n + m - 1) / m;
    p.chen_units = static_cast<double>(m) + static_cast<double>(n) / static_cast<double>(m);
    p.model_bytes = checked_add(checked_add(checked_mul(m, v.c_bytes, "valley"),
                                            checked_mul(per, v.a_bytes, "valley"), "valley"),
                                v.baseline_bytes, "valley");
    const Result r = m == n ? r_full : simulate_plan(g, plan_for(m), device);
    p.simulated_bytes = r.peak_allocated_bytes;
    p.simulated_block_bytes = r.block_peak_bytes;
    p.step_time_ns = r.step_time_ns;
    p.recompute_flops = r.recompute_flops;
    if (p.model_bytes < best_model) best_model = p.model_bytes, v.m_star = m;
    if (p.simulated_bytes < best_sim) best_sim = p.simulated_bytes, v.m_star_simulated = m;
    v.points.push_back(p);
  }
  return v;
}

}  // namespace sim
