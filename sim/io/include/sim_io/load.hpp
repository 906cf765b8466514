// Loading models and devices (DESIGN.md §7): a name resolves to models/<name>.json or
// models/devices/<name>.json in the search folders; anything with a '/' or ending in .json is a
// path. Every error is a sim::ConfigError naming the file and the field.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sim/device.hpp"
#include "sim/model.hpp"

namespace sim_io {

// Folders searched for model names, in order: $ACTSIM_MODELS (':'-separated), the folder
// `models` beside the executable, then `../share/actsim/models` beside it.
std::vector<std::filesystem::path> model_search_dirs(const std::filesystem::path& exe_path);

// Loads actsim's own model JSON ("format": "actsim-model-v1") or a HuggingFace config.json as is.
// model.name is `name_or_path` exactly as given; model.source the file read.
sim::ModelConfig load_model(std::string_view name_or_path,
                            const std::vector<std::filesystem::path>& dirs);
// Parses JSON text already read; `source` is used in errors and as model.source.
sim::ModelConfig parse_model(std::string_view json_text, std::string_view name,
                             std::string_view source);

sim::Device load_device(std::string_view name_or_path,
                        const std::vector<std::filesystem::path>& dirs);
sim::Device parse_device(std::string_view json_text, std::string_view name,
                         std::string_view source);

struct CatalogEntry {
  std::string name;  // file stem
  std::filesystem::path path;
};
// Every models/*.json and models/devices/*.json in the search folders, first occurrence of a
// name wins, sorted by name.
std::vector<CatalogEntry> list_models(const std::vector<std::filesystem::path>& dirs);
std::vector<CatalogEntry> list_devices(const std::vector<std::filesystem::path>& dirs);

}  // namespace sim_io
