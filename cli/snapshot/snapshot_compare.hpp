// Tensors live at a measured peak (a PyTorch snapshot) matched with the storages live at the
// simulated peak (issue 14, `actsim compare`): what actsim missed, and what it invented.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "snapshot.hpp"

namespace actsim_cli {

struct SimTensor {
  int64_t bytes = 0;     // the storage's exact bytes
  std::string label;     // role and dtype: "softmax out (bf16)", "word embeddings (fp32)"
  int32_t block = -1;    // the block it is attributed to; -1: none
  std::string op;        // the producing op's name ("softmax"); empty for persistent state
  std::string category;  // sim::category_name
};

struct TensorMatch {
  std::vector<std::pair<std::size_t, std::size_t>> matched;  // (simulated, measured) indices
  std::vector<std::size_t> simulated_only;                    // indices into the simulated list
  std::vector<std::size_t> measured_only;                     // indices into the measured list
};

// Contract: a simulated storage matches a measured block when both have the same size rounded
// as the caching allocator rounds (round_block_size). A first pass pairs only blocks whose
// deepest user frame's function names the storage's op (either name containing the other, case
// ignored); a second pairs the rest by size alone, the earliest measured block first. In both,
// simulated storages go largest first (ties in list order), so the result is deterministic;
// every index appears exactly once in the result.
TensorMatch match_tensors(const std::vector<SimTensor>& simulated,
                          const std::vector<LiveAtPeak>& measured);

// Items of equal (bytes, label) grouped with their counts (a role in several blocks is one
// group), largest total first, at most `limit`: (bytes each, count, label).
std::vector<std::tuple<int64_t, int64_t, std::string>> grouped_by_label(
    const std::vector<std::pair<int64_t, std::string>>& items, std::size_t limit);

}  // namespace actsim_cli
