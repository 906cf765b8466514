#include "categories.hpp"

#include <stdexcept>

#include "sim/schedule.hpp"
#include "sim/simulate.hpp"

namespace gui {

CategorySeries category_series(const sim::Graph& g, const sim::Plan& plan,
                               const sim::Result& result) {
  const sim::Schedule sched = sim::build_schedule(g, plan, sim::recompute_mode(g.profile));
  std::vector<uint8_t> cat(g.storages.size(), 0);
  sim::Breakdown ledger{};
  int64_t total = 0;
  const auto alloc = [&](int32_t s, sim::Category c) {
    cat[s] = static_cast<uint8_t>(c);
    ledger[static_cast<int>(c)] += g.storages[s].bytes;
    total += g.storages[s].bytes;
  };
  for (int32_t s : g.persistent) alloc(s, g.storages[s].category);

  CategorySeries out;
  out.at.reserve(result.timeline.size());
  int32_t applied = -1;  // events applied so far: [0, applied]
  for (const sim::MemorySample& m : result.timeline) {
    // Every sample of event k sees the ledger after k's allocations or free: a forward or
    // backward event only allocates, a free event only frees.
    while (applied < m.event_index) {
      const sim::Event& e = sched.events[++applied];
      switch (e.kind) {
        case sim::EventKind::kForward:
        case sim::EventKind::kRecompute: {
          if (e.kind == sim::EventKind::kRecompute && (e.flags & sim::kCachedOutput)) break;
          const sim::Op& op = g.ops[e.id];
          for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s) {
            sim::Category c = g.storages[*s].category;
            if (e.kind == sim::EventKind::kRecompute && c == sim::Category::kActivations)
              c = sim::Category::kRecomputed;
            alloc(*s, c);
          }
          break;
        }
        case sim::EventKind::kBackward: {
          const sim::Op& op = g.ops[e.id];
          for (const int32_t* s = g.begin(op.bwd_allocs); s != g.end(op.bwd_allocs); ++s)
            alloc(*s, g.storages[*s].category);
          break;
        }
        case sim::EventKind::kFree:
          ledger[cat[e.id]] -= g.storages[e.id].bytes;
          total -= g.storages[e.id].bytes;
          break;
        case sim::EventKind::kOptimizer: break;
      }
    }
    const int64_t transient = m.allocated_bytes - total;
    if (transient < 0)
      throw std::logic_error("category_series: replay holds more than the engine's sample");
    sim::Breakdown b = ledger;
    b[static_cast<int>(sim::Category::kTransient)] += transient;
    out.at.push_back(b);
  }
  return out;
}

}  // namespace gui
