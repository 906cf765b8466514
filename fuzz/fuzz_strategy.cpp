// libFuzzer target: the strategy parser and resolver. Properties: no crash or UB; a parsed
// strategy round-trips through its canonical string; a resolved plan covers the blocks with
// disjoint ascending segments that are exactly the checkpointed blocks.
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/error.hpp"
#include "sim/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sim::Strategy s;
  try {
    s = sim::parse_strategy(text);
  } catch (const sim::ConfigError&) {
    return 0;
  }
  const std::string canonical = s.canonical();
  const sim::Strategy again = sim::parse_strategy(canonical);  // must not throw
  if (!(again == s) || again.canonical() != canonical) __builtin_trap();
  for (int64_t n : {1, 2, 7, 96}) {
    sim::Plan p;
    try {
      p = sim::resolve(s, n);
    } catch (const sim::ConfigError&) {
      continue;
    }
    if (static_cast<int64_t>(p.mode.size()) != n) __builtin_trap();
    int64_t next = 0, checkpointed = 0;
    for (const sim::Segment& g : p.segments) {
      if (g.first < next || g.last < g.first || g.last >= n) __builtin_trap();
      for (int64_t b = g.first; b <= g.last; ++b)
        if (p.mode[static_cast<size_t>(b)] != sim::BlockMode::kCheckpoint) __builtin_trap();
      checkpointed += g.last - g.first + 1;
      next = g.last + 1;
    }
    for (sim::BlockMode m : p.mode) checkpointed -= m == sim::BlockMode::kCheckpoint;
    if (checkpointed != 0) __builtin_trap();
  }
  return 0;
}
