// libFuzzer target: the model and device loaders (actsim JSON and HuggingFace config.json) and,
// for a config that loads, building its graph and simulating one step. Properties: no crash,
// no UB, no unbounded allocation; every rejection is a sim::ConfigError.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"
#include "../tests/fixtures.hpp"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)sim_io::parse_device(text, "fuzz", "fuzz.json");
  } catch (const sim::ConfigError&) {
  }
  sim::ModelConfig m;
  try {
    m = sim_io::parse_model(text, "fuzz", "fuzz.json");
  } catch (const sim::ConfigError&) {
    return 0;
  }
  // Keep each run fast: the graph grows with the blocks (at most sim::kMaxLayers of them).
  if (m.layers > 64) return 0;
  sim::TrainSetup setup;
  setup.seq = m.max_positions > 0 ? std::min<int64_t>(m.max_positions, 64) : 64;
  for (const char* st : {"none", "full", "selective"}) {
    try {
      const sim::Result r = sim::simulate(m, setup, fixtures::h100(), sim::parse_strategy(st));
      if (r.end_bytes != r.baseline_bytes) __builtin_trap();
    } catch (const sim::ConfigError&) {
    }
  }
  return 0;
}
