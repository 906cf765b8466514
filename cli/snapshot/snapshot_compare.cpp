#include "snapshot_compare.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

namespace actsim_cli {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The function of a frame "file.py:line:function".
std::string function_of(const std::string& frame) {
  const std::size_t colon = frame.rfind(':');
  return colon == std::string::npos ? frame : frame.substr(colon + 1);
}

bool names_op(const std::string& frame, const std::string& op) {
  if (frame.empty() || op.empty()) return false;
  const std::string f = lower(function_of(frame));
  const std::string o = lower(op);
  if (f.empty()) return false;
  return f.find(o) != std::string::npos || o.find(f) != std::string::npos;
}

}  // namespace

TensorMatch match_tensors(const std::vector<SimTensor>& simulated,
                          const std::vector<LiveAtPeak>& measured) {
  // Unmatched measured blocks by rounded size, in list order.
  std::map<int64_t, std::vector<std::size_t>> open;
  for (std::size_t m = 0; m < measured.size(); ++m)
    open[round_block_size(measured[m].allocated_bytes)].push_back(m);

  std::vector<std::size_t> order(simulated.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return simulated[a].bytes > simulated[b].bytes;
  });
  TensorMatch out;
  std::vector<bool> measured_used(measured.size(), false);
  std::vector<bool> simulated_done(simulated.size(), false);
  // Pass 1: same size and the frame names the op; pass 2: same size.
  for (const bool by_name : {true, false}) {
    for (std::size_t s : order) {
      if (simulated_done[s]) continue;
      auto it = open.find(round_block_size(simulated[s].bytes));
      if (it == open.end()) continue;
      std::vector<std::size_t>& candidates = it->second;
      auto pick = std::find_if(candidates.begin(), candidates.end(), [&](std::size_t m) {
        return !by_name || names_op(measured[m].frame, simulated[s].op);
      });
      if (pick == candidates.end()) continue;
      out.matched.emplace_back(s, *pick);
      measured_used[*pick] = true;
      simulated_done[s] = true;
      candidates.erase(pick);
    }
  }
  for (std::size_t s : order)
    if (!simulated_done[s]) out.simulated_only.push_back(s);
  for (std::size_t m = 0; m < measured.size(); ++m)
    if (!measured_used[m]) out.measured_only.push_back(m);
  return out;
}

std::vector<std::tuple<int64_t, int64_t, std::string>> grouped_by_label(
    const std::vector<std::pair<int64_t, std::string>>& items, std::size_t limit) {
  std::map<std::pair<int64_t, std::string>, int64_t> counts;
  for (const auto& it : items) ++counts[it];
  std::vector<std::tuple<int64_t, int64_t, std::string>> out;
  for (const auto& [key, n] : counts) out.emplace_back(key.first, n, key.second);
  const auto total = [](const auto& g) {  // ordering only: double cannot overflow
    return static_cast<double>(std::get<0>(g)) * static_cast<double>(std::get<1>(g));
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return total(a) > total(b); });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace actsim_cli
