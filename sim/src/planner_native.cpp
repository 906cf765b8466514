// The best plan a code base's own checkpointing settings can run (sim/planner_native.hpp).
#include "sim/planner_native.hpp"

#include <string_view>

#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace sim {
namespace {

std::string with_k(std::string_view config, int64_t k) {
  std::string out(config);
  const size_t at = out.find("{k}");
  if (at != std::string::npos) out.replace(at, 3, std::to_string(k));
  return out;
}

}  // namespace

std::vector<NativeCandidate> native_candidates(std::span<const NativeAc> options, int64_t n) {
  std::vector<NativeCandidate> out;
  for (const NativeAc& o : options) {
    const std::string_view s = o.strategy;
    const size_t colon = s.find(":k");
    if (colon == std::string_view::npos || colon + 2 != s.size()) {
      out.push_back({parse_strategy(s), std::string(o.config)});
      continue;
    }
    const std::string head(s.substr(0, colon));
    // block:k checkpoints the first k of n blocks (k = n would be `full`); every:k and
    // layer-sac:k at k = 1 are `full`.
    const int64_t first = head == "block" ? 1 : 2;
    const int64_t last = head == "block" ? n - 1 : n;
    for (int64_t k = first; k <= last; ++k)
      out.push_back({parse_strategy(head + ":" + std::to_string(k)), with_k(o.config, k)});
  }
  return out;
}

NativeChoice best_native(const Graph& graph, const Device& device, int64_t budget,
                         std::span<const NativeAc> options) {
  NativeChoice c;
  const int64_t n = graph.n_blocks;
  if (n > kNativeSearchBlocks || options.empty()) return c;
  c.searched = true;
  Cost best_cost;
  for (NativeCandidate& cand : native_candidates(options, n)) {
    Result r;
    try {
      r = simulate_plan(graph, resolve(cand.strategy, n), device);
    } catch (const ConfigError&) {
      continue;  // not simulable for this graph (as best_fixed_exhaustive skips it)
    }
    ++c.candidates;
    if (budget_peak_bytes(r) > budget) continue;
    const Cost cost = cost_of(r);
    if (c.best.found && !(cost < best_cost)) continue;
    c.best.found = true;
    c.best.strategy = std::move(cand.strategy);
    c.best.result = std::move(r);
    c.config = std::move(cand.config);
    best_cost = cost;
  }
  return c;
}

}  // namespace sim
