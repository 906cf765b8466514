// libFuzzer target: the snapshot converter's JSON (cli/snapshot/snapshot.hpp) read and replayed, and
// its blocks at the peak matched against a few storages. Bad input must be a sim::ConfigError,
// never a crash, an overflow (UBSan) or another exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/error.hpp"
#include "snapshot.hpp"
#include "snapshot_compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const actsim_cli::Snapshot s = actsim_cli::parse_snapshot_json(text, "fuzz.json");
    for (const actsim_cli::SnapshotDevice& d : s.devices) {
      const actsim_cli::SnapshotPeaks p = actsim_cli::analyze_snapshot(d, "fuzz.json");
      const std::vector<actsim_cli::SimTensor> simulated = {
          {512, "a (bf16)", 0, "softmax", "activations"},
          {1 << 20, "b (fp32)", 1, "fc1", "activations"}};
      (void)actsim_cli::match_tensors(simulated, p.at_peak);
    }
  } catch (const sim::ConfigError&) {
  }
  return 0;
}
