// actsim models: the models and devices that names resolve to, from the search folders. A file
// that does not load is listed with its error rather than ending the listing.
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim_io/load.hpp"
#include "sweep.hpp"

namespace actsim_cli {

int cmd_models(const Invocation& /*inv*/) {
  const auto dirs = cli_common::search_dirs();
  std::string out;
  std::string problems;  // files that do not load, listed after the tables

  TextTable models({"model", "family", "layers", "hidden", "heads", "kv heads", "params"},
                   "llrrrrr");
  for (const sim_io::CatalogEntry& e : sim_io::list_models(dirs)) {
    try {
      const sim::ModelConfig m = sim_io::load_model(e.path.string(), dirs);
      models.add({e.name, m.family, fmt::format("{}", m.layers), fmt::format("{}", m.hidden),
                  fmt::format("{}", m.heads), fmt::format("{}", m.kv_heads),
                  human_count(sim::parameter_count(m))});
    } catch (const sim::ConfigError& err) {
      models.add({e.name, "(does not load, see below)"});
      problems += fmt::format("  {}: {}\n", e.name, err.what());
    }
  }
  out += models.render();

  TextTable devices({"device", "label", "HBM", "bf16 dense", "HBM bandwidth"}, "llrrr");
  for (const sim_io::CatalogEntry& e : sim_io::list_devices(dirs)) {
    try {
      const sim::Device d = sim_io::load_device(e.path.string(), dirs);
      devices.add({e.name, d.label, fmt::format("{}", Bytes{d.hbm_bytes}),
                   fmt::format("{:.0f} TFLOP/s", d.peak_bf16_flops_per_s / 1e12),
                   fmt::format("{:.2f} TB/s", d.hbm_bytes_per_s / 1e12)});
    } catch (const sim::ConfigError& err) {
      devices.add({e.name, "(does not load, see below)"});
      problems += fmt::format("  {}: {}\n", e.name, err.what());
    }
  }
  out += '\n' + devices.render();

  // Implementations (--impl): the code base, the release modeled, the families it runs and its
  // defaults (sim/src/impl/).
  // implver: one row per release (--impl NAME@VERSION; the first of a code base its default)
  TextTable impls({"impl", "code base", "modeled", "families", "precision", "attention",
                   "checkpoint", "optimizer"},
                  "llllllll");
  for (const sim::ImplSpec& s : sim::implementations()) {
    impls.add({std::string(s.name) + "@" + std::string(s.version_key), std::string(s.code),
               std::string(s.version), std::string(s.families),
               std::string(sim::name(s.precision)), std::string(sim::name(s.attention)),
               s.checkpoint == sim::CheckpointApi::kReentrant ? "reentrant" : "non-reentrant",
               s.optimizer == s.optimizer_eager
                   ? std::string(sim::name(s.optimizer))
                   : std::string(sim::name(s.optimizer)) + " (eager: " +
                         std::string(sim::name(s.optimizer_eager)) + ")"});
  }
  out += '\n' + impls.render();
  out += "Default --impl: megatron for actsim GPT files (family megatron-gpt) and with --tp or --pp "
         "> 1; hf for HuggingFace configs.\n";

  if (!problems.empty()) out += "\nFiles that do not load:\n" + problems;

  std::string searched;
  for (const auto& d : dirs) searched += (searched.empty() ? "" : ", ") + d.string();
  out += fmt::format("\nSearched: {} (set ACTSIM_MODELS to add folders).\n",
                     searched.empty() ? std::string("(no folders)") : searched);
  out += "A path to any HuggingFace config.json works as --model too.\n";
  Output sink("");
  sink.write(out);
  sink.commit();
  return 0;
}

}  // namespace actsim_cli
