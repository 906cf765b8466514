// Explains a peak: which storages are live at the peak's event and why (DESIGN.md §3; the answer
// to "selective recompute cut my peak by 2 %, why?"). Replays the schedule's reference counts to
// the peak's event only when asked, so sweeps never pay for it.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "sim/simulate.hpp"

namespace sim {
namespace {

std::string op_label(const Graph& g, int32_t op) {
  if (op < 0) return "?";
  const Op& o = g.ops[op];
  return (o.block >= 0 ? "block " + std::to_string(o.block) + " " : std::string()) + o.name;
}

std::string op_name(const Graph& g, int32_t op) { return op < 0 ? "" : g.ops[op].name; }

// One reason, worded for people. `per_block` drops the block number so groups merge.
std::string why(const Graph& g, const Holder& h, bool per_block) {
  auto label = [&](int32_t op) { return per_block ? op_name(g, op) : op_label(g, op); };
  switch (h.kind) {
    case Holder::kForwardUse: return "not yet consumed by the forward pass";
    case Holder::kSavedBy: return "saved for the backward of " + label(h.op);
    case Holder::kCheckpointInput: return "checkpointed input, kept for recomputation";
    case Holder::kSacCache: return "kept by the sac:mm policy (output of " + label(h.op) + ")";
    case Holder::kAutocastCache: return "autocast's weight-cast cache (held until forward ends)";
    case Holder::kGradSlot: return "gradient made by the backward of " + label(h.op);
    case Holder::kPersistent: return "held by the training loop until the step ends";
    case Holder::kForwardReturn: return "returned by the model's forward (held until forward ends)";
  }
  return "?";
}

}  // namespace

std::vector<PeakItem> explain_peak(const Graph& graph, const Plan& plan, const Result& result,
                                   int max_items) {
  std::vector<PeakItem> items;
  if (result.peak_event_index < 0) return items;
  const auto holders = holders_at(graph, plan, recompute_mode(graph),
                                  result.peak_event_index);
  // Group storages with the same role, dtype, category and reason across blocks.
  struct Group {
    PeakItem item;
    int32_t lo = 1 << 30, hi = -1;
  };
  std::map<std::tuple<std::string, std::string, int>, Group> groups;
  for (size_t s = 0; s < holders.size(); ++s) {
    if (holders[s].empty()) continue;
    const Storage& st = graph.storages[s];
    if (st.producer < 0) continue;  // persistent state is in the breakdown
    std::string role = std::string(st.role) + " (" + std::string(dtype_name(st.dtype)) + ")";
    std::string reason;
    for (size_t k = 0; k < holders[s].size(); ++k) {
      std::string w = why(graph, holders[s][k], true);
      if (reason.find(w) != std::string::npos) continue;
      if (!reason.empty()) reason += "; ";
      reason += w;
    }
    Group& gr = groups[{role, reason, static_cast<int>(st.category)}];
    gr.item.bytes += st.bytes;
    gr.item.count += gr.item.what.empty() ? 0 : 1;
    gr.item.category = st.category;
    gr.item.what = role;
    gr.item.why = reason;
    gr.lo = std::min(gr.lo, st.block);
    gr.hi = std::max(gr.hi, st.block);
  }
  for (auto& [key, gr] : groups) {
    PeakItem it = gr.item;
    if (gr.hi < 0) {
      it.block = -1;
    } else if (gr.lo == gr.hi) {
      it.block = gr.lo;
      it.what = "block " + std::to_string(gr.lo) + " " + it.what;
    } else {
      it.block = -1;
      it.what = std::to_string(it.count) + " x " + it.what +
                (gr.lo < 0 ? ", outside the blocks and blocks 0-" : ", blocks " +
                 std::to_string(gr.lo) + "-") + std::to_string(gr.hi);
    }
    items.push_back(std::move(it));
  }
  // The running op's own temporaries.
  const int64_t transient = result.peak_breakdown[static_cast<int>(Category::kTransient)];
  if (transient > 0) {
    PeakItem it;
    it.bytes = transient;
    it.category = Category::kTransient;
    it.what = "temporaries of " + result.peak_op;
    it.why = "allocated inside the running op, freed when it ends";
    items.push_back(it);
  }
  std::stable_sort(items.begin(), items.end(), [](const PeakItem& a, const PeakItem& b) {
    return a.bytes > b.bytes || (a.bytes == b.bytes && a.what < b.what);
  });
  if (static_cast<int>(items.size()) > max_items) items.resize(static_cast<size_t>(max_items));
  return items;
}

}  // namespace sim
