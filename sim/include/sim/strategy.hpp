// Activation-checkpointing strategies as values (DESIGN.md §4), parsed by one explicit table.
// A Strategy is what the user wrote; a Plan is what it means for a model with n blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sim {

enum class StrategyKind : uint8_t {
  kNone,       // keep every saved tensor
  kFull,       // checkpoint each block
  kEvery,      // every:k — groups of k consecutive blocks (last smaller), Megatron "uniform"
  kBlock,      // block:k — the first k blocks (of each pipeline stage) checkpointed, Megatron "block"
  kSqrt,       // m = round(sqrt(n)) segments, first n mod m one block longer (Chen et al. 2016)
  kSelective,  // core attention recomputed (Korthikanti et al. 2022 §5)
  kSacMm,      // save matmul and SDPA outputs, recompute the rest
  kSacTorchtitan,  // sac:torchtitan — torchtitan's op SAC: as sac:mm but every second mm recomputed
  kLayerSac,   // layer-sac:k — every k-th block checkpointed, counting from 1 (torchtitan
               // selective_ac_option = k)
  kCustom,     // custom:<clause>+<clause>..., see Clause
  kOffload,      // every saved tensor of each block copied to pinned host memory, prefetched back
  kOffloadFull,  // offload+full: each block checkpointed, its checkpointed input kept on the host
  kBudget,     // budget:<bytes> — the planner's plan (sim/planner.hpp); k holds the bytes
};

// One clause of a custom spec: blocks [first, last] (inclusive) in one mode.
enum class ClauseMode : uint8_t { kNone, kFull, kSeg, kSelective, kSacMm, kOffload, kOffloadFull };
struct Clause {
  ClauseMode mode = ClauseMode::kNone;
  int64_t first = 0;
  int64_t last = 0;
  int64_t group = 1;  // seg@a-b/k: groups of k blocks
  friend bool operator==(const Clause&, const Clause&) = default;
};

struct Strategy {
  StrategyKind kind = StrategyKind::kNone;
  int64_t k = 0;                // every:k, block:k; budget: bytes
  std::vector<Clause> clauses;  // custom, sorted by first block, adjacent equal clauses merged

  std::string canonical() const;  // parse_strategy(s.canonical()) == s; the CSV's strategy column
  friend bool operator==(const Strategy&, const Strategy&) = default;
};

// Parses "none", "full", "every:4", "block:2", "sqrt", "selective", "sac:mm", "sac:torchtitan",
// "layer-sac:2" and
// "custom:none@0-3+full@4-23+seg@24-31/4" (also "sel@a-b", "sac@a-b", "offload@a-b",
// "offload-full@a-b"), "offload", "offload+full" and "budget:60GiB" (bytes, or an integer with
// KiB/MiB/GiB/TiB; canonical "budget:<bytes>"). Throws ConfigError with
// where "--strategy" on anything else. Block ranges are checked against n only by resolve().
Strategy parse_strategy(std::string_view text);

// What is done to one block.
enum class BlockMode : uint8_t {
  kStore,       // forward saves everything
  kSelective,   // core attention checkpointed inside the block
  kSacMm,       // block checkpointed with a save-matmuls policy
  kCheckpoint,  // block belongs to a checkpointed segment (see Plan::segments)
  kOffload,     // forward saves everything, on the host: copied out after forward, back before
                // backward (DESIGN.md §4 offload)
};

// Consecutive blocks [first, last] recomputed as one unit before the backward of `last`.
struct Segment {
  int64_t first = 0;
  int64_t last = 0;
  bool offload_inputs = false;  // offload+full: the checkpointed inputs wait on the host
  friend bool operator==(const Segment&, const Segment&) = default;
};

struct Plan {
  std::vector<BlockMode> mode;    // one per block
  bool sac_torchtitan = false;    // kSacMm blocks keep Op::sac_save_torchtitan, not Op::sac_save
  bool torchtitan_ac = false;     // from sac:torchtitan or layer-sac:k (torchtitan's options)
  std::vector<Segment> segments;  // ascending, disjoint; exactly the kCheckpoint blocks
};

// The plan for n blocks. Throws ConfigError("--strategy", ...) when a custom spec leaves gaps,
// overlaps, or names blocks beyond n - 1, or when k is out of range for n, and for budget:,
// whose plan needs the graph: sim::concrete_strategy (sim/planner.hpp) turns it into custom:.
Plan resolve(const Strategy& strategy, int64_t n_blocks);

// "60GiB", "512MiB", "64424509440" as bytes (binary suffixes KiB, MiB, GiB, TiB, or B);
// nullopt when malformed or beyond 64 bits.
std::optional<int64_t> parse_bytes(std::string_view text);

// m segments over n blocks, sizes differing by at most one, the first n mod m one longer.
std::vector<Segment> even_segments(int64_t n_blocks, int64_t m);
// The segments of `sqrt` for n blocks: even_segments(n, round(sqrt(n))) (DESIGN.md §4).
std::vector<Segment> sqrt_segments(int64_t n_blocks);

}  // namespace sim
