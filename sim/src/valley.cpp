// The memory valley (DESIGN.md §4): Chen et al.'s unit-cost curve m + n/m beside the real
// M(m) = m*c + ceil(n/m)*A + baseline for transformer blocks, and the simulated peak per m.
#include "sim/valley.hpp"

#include <cmath>

#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace sim {
namespace {

Plan even_plan(int64_t n, int64_t m) {
  Plan p;
  p.mode.assign(static_cast<size_t>(n), BlockMode::kCheckpoint);
  p.segments = even_segments(n, m);
  return p;
}

// census12: the blocks' ops and bytes (op count, bytes made, bytes saved). Equal for every block
// of a cloned graph; different where blocks differ in ops or sizes.
struct BlockShape {
  int64_t ops = 0, made = 0, saved = 0;
  bool operator==(const BlockShape&) const = default;
};

BlockShape block_shape(const Graph& g, int64_t b) {
  BlockShape s;
  const IdxRange r = g.block_ops[static_cast<size_t>(b)];
  s.ops = r.count;
  for (int32_t i = r.begin; i < r.begin + r.count; ++i) {
    const Op& op = g.ops[static_cast<size_t>(i)];
    for (const int32_t* p = g.begin(op.outputs); p != g.end(op.outputs); ++p)
      s.made += g.storages[static_cast<size_t>(*p)].bytes;
    for (const int32_t* p = g.begin(op.saves); p != g.end(op.saves); ++p)
      s.saved += g.storages[static_cast<size_t>(*p)].bytes;
  }
  return s;
}

}  // namespace

Valley valley_head(const Graph& g, const Device& device) {
  Valley v;
  const int64_t n = g.n_blocks;
  v.n = n;
  if (n <= 0) return v;
  Plan none;
  none.mode.assign(static_cast<size_t>(n), BlockMode::kStore);
  const Result r_none = simulate_plan(g, none, device);
  const Result r_full = simulate_plan(g, even_plan(n, n), device);
  // c: a checkpoint is a block's input, what `full` keeps per block; A: a block's activations.
  v.c_bytes = r_full.activation_bytes_per_layer;
  v.a_bytes = r_none.activation_bytes_per_layer;
  // baseline: what the block phase holds besides checkpoints and one segment's activations, read
  // off the m = n run: block peak(full) = n*c + 1*A + baseline. The block phase, because the
  // step's peak may sit in the loss instead (large vocabularies), which M(m) does not model.
  v.sqrt_n = std::llround(std::sqrt(static_cast<double>(n)));
  // census12: M(m) = m*c + ceil(n/m)*A + baseline needs n identical blocks (one c, one A).
  const BlockShape first = block_shape(g, 0);
  for (int64_t b = 1; b < n && v.closed_form; ++b) {
    const BlockShape s = block_shape(g, b);
    if (s == first) continue;
    v.closed_form = false;
    v.why = "block " + std::to_string(b) + " differs from block 0 (" + std::to_string(s.ops) +
            " ops saving " + std::to_string(s.saved) + " B against " + std::to_string(first.ops) +
            " ops saving " + std::to_string(first.saved) +
            " B): M(m) = m*c + ceil(n/m)*A + baseline assumes n identical blocks";
  }
  if (!v.closed_form) return v;
  v.baseline_bytes = r_full.block_peak_bytes - checked_mul(n, v.c_bytes, "valley") - v.a_bytes;
  int64_t best_model = INT64_MAX;
  for (int64_t m = 1; m <= n; ++m) {
    const int64_t model = valley_model_point(v, m).model_bytes;
    if (model < best_model) best_model = model, v.m_star = m;
  }
  return v;
}

ValleyPoint valley_model_point(const Valley& v, int64_t m) {
  ValleyPoint p;
  p.m = m;
  const int64_t per = (v.n + m - 1) / m;
  p.chen_units = static_cast<double>(m) + static_cast<double>(v.n) / static_cast<double>(m);
  if (!v.closed_form) return p;  // census12: no M(m) for differing blocks (model_bytes 0)
  p.model_bytes = checked_add(checked_add(checked_mul(m, v.c_bytes, "valley"),
                                          checked_mul(per, v.a_bytes, "valley"), "valley"),
                              v.baseline_bytes, "valley");
  return p;
}

ValleyPoint valley_point(const Graph& g, const Device& device, const Valley& head, int64_t m) {
  ValleyPoint p = valley_model_point(head, m);
  const Result r = simulate_plan(g, even_plan(head.n, m), device);
  p.simulated_bytes = r.peak_allocated_bytes;
  p.simulated_block_bytes = r.block_peak_bytes;
  p.step_time_ns = r.step_time_ns;
  p.recompute_flops = r.recompute_flops;
  return p;
}

void add_point(Valley& v, const ValleyPoint& p) {
  // The first minimum, as over m = 1..n in order.
  if (v.points.empty() || p.simulated_bytes < v.points[static_cast<size_t>(v.m_star_simulated - 1)].simulated_bytes)
    v.m_star_simulated = p.m;
  v.points.push_back(p);
}

Valley compute_valley(const Graph& g, const Device& device) {
  Valley v = valley_head(g, device);
  for (int64_t m = 1; m <= v.n; ++m) add_point(v, valley_point(g, device, v, m));
  return v;
}

}  // namespace sim
