#include "sim/strategy.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "sim/error.hpp"

namespace sim {
namespace {

constexpr const char* kWhere = "--strategy";

[[noreturn]] void fail(std::string_view text, const std::string& why) {
  throw ConfigError(kWhere, "strategy", "'" + std::string(text) + "': " + why);
}

int64_t parse_int(std::string_view text, std::string_view digits, const char* what) {
  int64_t v = 0;
  const auto* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, v);
  if (digits.empty() || ec != std::errc() || p != end || v < 0)
    fail(text, std::string("expected a non-negative integer for ") + what + ", got '" +
                   std::string(digits) + "'");
  return v;
}

// Clause modes of the custom grammar, one table (name, mode, takes /k).
struct ClauseName {
  std::string_view name;
  ClauseMode mode;
};
constexpr ClauseName kClauseNames[] = {
    {"none", ClauseMode::kNone}, {"full", ClauseMode::kFull}, {"seg", ClauseMode::kSeg},
    {"sel", ClauseMode::kSelective}, {"sac", ClauseMode::kSacMm},
    {"offload", ClauseMode::kOffload}, {"offload-full", ClauseMode::kOffloadFull},
};

std::string_view clause_name(ClauseMode m) {
  for (const auto& c : kClauseNames)
    if (c.mode == m) return c.name;
  return "?";
}

// custom:<clause>(+<clause>)*, clause = mode@a-b or mode@a or seg@a-b/k.
std::vector<Clause> parse_clauses(std::string_view text, std::string_view spec) {
  std::vector<Clause> out;
  if (spec.empty()) fail(text, "custom: needs at least one clause, e.g. custom:none@0-3+full@4-7");
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t plus = spec.find('+', pos);
    std::string_view c = spec.substr(pos, plus == std::string_view::npos ? plus : plus - pos);
    size_t at = c.find('@');
    if (at == std::string_view::npos) fail(text, "clause '" + std::string(c) + "' lacks '@'");
    std::string_view mode = c.substr(0, at);
    std::string_view range = c.substr(at + 1);
    Clause cl;
    bool known = false;
    for (const auto& n : kClauseNames)
      if (n.name == mode) cl.mode = n.mode, known = true;
    if (!known)
      fail(text, "unknown clause mode '" + std::string(mode) +
                     "' (none, full, seg, sel, sac, offload, offload-full)");
    size_t slash = range.find('/');
    if (slash != std::string_view::npos) {
      if (cl.mode != ClauseMode::kSeg) fail(text, "only seg@a-b/k takes a group size");
      cl.group = parse_int(text, range.substr(slash + 1), "the group size");
      if (cl.group < 1) fail(text, "group size must be at least 1");
      range = range.substr(0, slash);
    } else if (cl.mode == ClauseMode::kSeg) {
      fail(text, "seg needs a group size: seg@a-b/k");
    }
    size_t dash = range.find('-');
    if (dash == std::string_view::npos) {
      cl.first = cl.last = parse_int(text, range, "a block index");
    } else {
      cl.first = parse_int(text, range.substr(0, dash), "a block index");
      cl.last = parse_int(text, range.substr(dash + 1), "a block index");
    }
    if (cl.last < cl.first) fail(text, "range " + std::string(range) + " runs backwards");
    out.push_back(cl);
    if (plus == std::string_view::npos) break;
    pos = plus + 1;
  }
  std::sort(out.begin(), out.end(),
            [](const Clause& a, const Clause& b) { return a.first < b.first; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first <= out[i - 1].last)
      fail(text, "clauses overlap at block " + std::to_string(out[i].first));
  // Adjacent clauses of the same mode (and group) merge, so the canonical string is unique.
  // seg clauses merge only when the first one's length is a multiple of the group.
  std::vector<Clause> merged;
  for (const Clause& c : out) {
    if (!merged.empty()) {
      Clause& p = merged.back();
      bool same = p.mode == c.mode && p.group == c.group && p.last + 1 == c.first;
      if (same && c.mode == ClauseMode::kSeg) same = (p.last - p.first + 1) % p.group == 0;
      if (same) {
        p.last = c.last;
        continue;
      }
    }
    merged.push_back(c);
  }
  return merged;
}

// The one table of strategy names (STYLE.md rule 6).
struct Entry {
  std::string_view name;  // text before ':' (or all of it)
  StrategyKind kind;
  bool takes_k;           // name:k
};
constexpr Entry kTable[] = {
    {"none", StrategyKind::kNone, false},       {"full", StrategyKind::kFull, false},
    {"every", StrategyKind::kEvery, true},      {"block", StrategyKind::kBlock, true},
    {"sqrt", StrategyKind::kSqrt, false},       {"selective", StrategyKind::kSelective, false},
    {"sac", StrategyKind::kSacMm, false},       {"custom", StrategyKind::kCustom, false},
    {"offload", StrategyKind::kOffload, false}, {"offload+full", StrategyKind::kOffloadFull, false},
    {"budget", StrategyKind::kBudget, false},   {"layer-sac", StrategyKind::kLayerSac, true},
};

std::string_view kind_name(StrategyKind k) {
  for (const auto& e : kTable)
    if (e.kind == k) return e.name;
  return "?";
}

// Segments of `group` blocks over [first, last], the last one smaller. `group` comes from the
// user and may be huge: no arithmetic here may pass `last`.
void push_blocks(Plan& plan, int64_t first, int64_t last, int64_t group,
                 bool offload_inputs = false) {
  for (int64_t b = first; b <= last;) {
    const int64_t e = group - 1 >= last - b ? last : b + group - 1;
    plan.segments.push_back({b, e, offload_inputs});
    for (int64_t i = b; i <= e; ++i) plan.mode[i] = BlockMode::kCheckpoint;
    if (e == last) break;
    b = e + 1;
  }
}

}  // namespace

Strategy parse_strategy(std::string_view text) {
  std::string_view head = text, arg;
  size_t colon = text.find(':');
  bool has_arg = colon != std::string_view::npos;
  if (has_arg) head = text.substr(0, colon), arg = text.substr(colon + 1);
  for (const auto& e : kTable) {
    if (e.name != head) continue;
    Strategy s;
    s.kind = e.kind;
    if (e.kind == StrategyKind::kSacMm) {
      if (arg == "torchtitan") s.kind = StrategyKind::kSacTorchtitan;
      else if (arg != "mm") fail(text, "the selective-AC policies are sac:mm and sac:torchtitan");
    } else if (e.kind == StrategyKind::kBudget) {
      const std::optional<int64_t> bytes = parse_bytes(arg);
      if (!has_arg || !bytes || *bytes < 1)
        fail(text, "budget needs a peak in bytes, e.g. budget:60GiB or budget:64424509440");
      s.k = *bytes;
    } else if (e.kind == StrategyKind::kCustom) {
      if (!has_arg) fail(text, "custom needs a spec, e.g. custom:none@0-3+full@4-7");
      s.clauses = parse_clauses(text, arg);
    } else if (e.takes_k) {
      if (!has_arg) fail(text, std::string(e.name) + " needs a block count: " +
                                   std::string(e.name) + ":k");
      s.k = parse_int(text, arg, "k");
      if (s.k < 1) fail(text, "k must be at least 1");
    } else if (has_arg) {
      fail(text, std::string(e.name) + " takes no argument");
    }
    return s;
  }
  fail(text,
       "unknown strategy (none, full, every:k, block:k, sqrt, selective, sac:mm, sac:torchtitan, "
       "layer-sac:k, offload, offload+full, custom:<spec>, budget:<bytes>)");
}

std::string Strategy::canonical() const {
  switch (kind) {
    case StrategyKind::kEvery:
    case StrategyKind::kBlock:
    case StrategyKind::kLayerSac:
    case StrategyKind::kBudget: return std::string(kind_name(kind)) + ":" + std::to_string(k);
    case StrategyKind::kSacMm: return "sac:mm";
    case StrategyKind::kSacTorchtitan: return "sac:torchtitan";
    case StrategyKind::kCustom: {
      std::string s = "custom:";
      for (size_t i = 0; i < clauses.size(); ++i) {
        const Clause& c = clauses[i];
        if (i) s += '+';
        s += clause_name(c.mode);
        s += '@' + std::to_string(c.first);
        if (c.last != c.first) s += '-' + std::to_string(c.last);
        if (c.mode == ClauseMode::kSeg) s += '/' + std::to_string(c.group);
      }
      return s;
    }
    default: return std::string(kind_name(kind));
  }
}

std::optional<int64_t> parse_bytes(std::string_view text) {
  struct Suffix {
    std::string_view name;
    int64_t scale;
  };
  constexpr Suffix kSuffixes[] = {{"TiB", int64_t{1} << 40}, {"GiB", int64_t{1} << 30},
                                  {"MiB", int64_t{1} << 20}, {"KiB", int64_t{1} << 10},
                                  {"B", 1}};
  int64_t scale = 1;
  for (const Suffix& s : kSuffixes)
    if (text.size() > s.name.size() && text.substr(text.size() - s.name.size()) == s.name) {
      scale = s.scale;
      text.remove_suffix(s.name.size());
      break;
    }
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < 0) return std::nullopt;
  int64_t r = 0;
  if (__builtin_mul_overflow(v, scale, &r)) return std::nullopt;
  return r;
}

std::vector<Segment> even_segments(int64_t n, int64_t m) {
  std::vector<Segment> out;
  if (n <= 0 || m <= 0) return out;
  m = std::min(m, n);
  int64_t base = n / m, extra = n % m, b = 0;
  for (int64_t i = 0; i < m; ++i) {
    int64_t len = base + (i < extra ? 1 : 0);
    out.push_back({b, b + len - 1});
    b += len;
  }
  return out;
}

std::vector<Segment> sqrt_segments(int64_t n) {
  if (n <= 0) return {};
  // m = round(sqrt(n)) (Chen et al. 2016 §4.1: k = sqrt(n) segments).
  return even_segments(n, std::llround(std::sqrt(static_cast<double>(n))));
}

Plan resolve(const Strategy& s, int64_t n) {
  Plan plan;
  plan.mode.assign(static_cast<size_t>(n), BlockMode::kStore);
  const std::string text = s.canonical();
  switch (s.kind) {
    case StrategyKind::kNone: break;
    case StrategyKind::kFull: push_blocks(plan, 0, n - 1, 1); break;
    case StrategyKind::kEvery:
      if (s.k > n) fail(text, "k = " + std::to_string(s.k) + " exceeds the model's " +
                                  std::to_string(n) + " blocks");
      push_blocks(plan, 0, n - 1, s.k);
      break;
    case StrategyKind::kBlock:
      // Megatron "block": the first k blocks of the (single) pipeline stage are checkpointed.
      if (s.k > n) fail(text, "k = " + std::to_string(s.k) + " exceeds the model's " +
                                  std::to_string(n) + " blocks");
      push_blocks(plan, 0, s.k - 1, 1);
      break;
    case StrategyKind::kSqrt:
      for (const Segment& g : sqrt_segments(n)) push_blocks(plan, g.first, g.last, g.last - g.first + 1);
      break;
    case StrategyKind::kSelective: plan.mode.assign(static_cast<size_t>(n), BlockMode::kSelective); break;
    case StrategyKind::kSacMm: plan.mode.assign(static_cast<size_t>(n), BlockMode::kSacMm); break;
    case StrategyKind::kSacTorchtitan:
      // torchtitan parallelize_llama.py _apply_ac_to_transformer_block, selective_ac_option "op"
      plan.mode.assign(static_cast<size_t>(n), BlockMode::kSacMm);
      plan.sac_torchtitan = plan.torchtitan_ac = true;
      break;
    case StrategyKind::kLayerSac:
      // torchtitan (parallelize_llama.py @ 9dec370): ptd_checkpoint_wrapper._count counts the
      // blocks from 1 and wraps those with _count % k == 0 in a full checkpoint.
      if (s.k > n) fail(text, "k = " + std::to_string(s.k) + " exceeds the model's " +
                                  std::to_string(n) + " blocks");
      for (int64_t i = 0; i < n; ++i)
        if ((i + 1) % s.k == 0) push_blocks(plan, i, i, 1);
      plan.torchtitan_ac = true;
      break;
    case StrategyKind::kOffload: plan.mode.assign(static_cast<size_t>(n), BlockMode::kOffload); break;
    case StrategyKind::kOffloadFull: push_blocks(plan, 0, n - 1, 1, true); break;
    case StrategyKind::kBudget:
      fail(text, "budget: is planned on the model's graph (sim::concrete_strategy), not resolved");
    case StrategyKind::kCustom: {
      int64_t next = 0;
      for (const Clause& c : s.clauses) {
        if (c.first != next)
          fail(text, "blocks " + std::to_string(next) + "-" + std::to_string(c.first - 1) +
                         " are not covered by any clause");
        if (c.last >= n)
          fail(text, "block " + std::to_string(c.last) + " is beyond the model's last block " +
                         std::to_string(n - 1));
        switch (c.mode) {
          case ClauseMode::kNone: break;
          case ClauseMode::kFull: push_blocks(plan, c.first, c.last, 1); break;
          case ClauseMode::kSeg: push_blocks(plan, c.first, c.last, c.group); break;
          case ClauseMode::kSelective:
            for (int64_t i = c.first; i <= c.last; ++i) plan.mode[i] = BlockMode::kSelective;
            break;
          case ClauseMode::kSacMm:
            for (int64_t i = c.first; i <= c.last; ++i) plan.mode[i] = BlockMode::kSacMm;
            break;
          case ClauseMode::kOffload:
            for (int64_t i = c.first; i <= c.last; ++i) plan.mode[i] = BlockMode::kOffload;
            break;
          case ClauseMode::kOffloadFull: push_blocks(plan, c.first, c.last, 1, true); break;
        }
        next = c.last + 1;
      }
      if (next != n)
        fail(text, "blocks " + std::to_string(next) + "-" + std::to_string(n - 1) +
                       " are not covered by any clause");
      break;
    }
  }
  return plan;
}

}  // namespace sim
