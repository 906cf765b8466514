#include "categories.hpp"

#include <stdexcept>


namespace gui {

CategorySeries category_series(const sim::Graph& g, const sim::Plan& plan,
                               const sim::Result& result) {
  (void)g;
  (void)plan;
  if (result.timeline_breakdown.size() != result.timeline.size())
    throw std::logic_error("category_series: the result has no breakdown per sample");
  CategorySeries out;
  out.at.reserve(result.timeline.size());
  for (size_t i = 0; i < result.timeline.size(); ++i) {
    sim::Breakdown b = result.timeline_breakdown[i];
    int64_t total = 0;
    for (int64_t v : b) total += v;
    const int64_t transient = result.timeline[i].allocated_bytes - total;
    if (transient < 0)
      throw std::logic_error("category_series: the ledger holds more than the engine's sample");
    b[static_cast<int>(sim::Category::kTransient)] += transient;
    out.at.push_back(b);
  }
  return out;
}

}  // namespace gui
