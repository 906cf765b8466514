// Names and paths → files (DESIGN.md §7): the model search folders, reading a file with errors
// that name it, and the catalogue of shipped models and devices.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sim/error.hpp"
#include "sim_io/load.hpp"

namespace sim_io {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDevicesFolder = "devices";

// A '/' or a .json suffix means the user gave a file, not a catalogue name.
bool is_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(".json");
}

// The whole file; errors name the file as where and `field` ("model" or "device").
std::string read_file(const fs::path& path, std::string_view field) {
  const std::string where = path.string();
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw sim::ConfigError(where, std::string(field), "no such file");
  if (fs::is_directory(status))
    throw sim::ConfigError(where, std::string(field), "is a directory, not a JSON file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw sim::ConfigError(where, std::string(field), "cannot be read");
  return text.str();
}

std::vector<CatalogEntry> list_in(const std::vector<fs::path>& dirs, std::string_view subfolder) {
  std::map<std::string, fs::path> first;  // name → path; the first folder that has it wins
  for (const fs::path& dir : dirs) {
    const fs::path folder = subfolder.empty() ? dir : dir / subfolder;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& file = it->path();
      std::error_code file_ec;
      if (file.extension() == ".json" && it->is_regular_file(file_ec))
        first.emplace(file.stem().string(), file);
    }
  }
  std::vector<CatalogEntry> entries;
  entries.reserve(first.size());
  for (auto& [name, path] : first) entries.push_back({name, path});
  return entries;
}

// The file a catalogue name or a path stands for. `field` is "model" or "device".
fs::path resolve(std::string_view name_or_path, const std::vector<fs::path>& dirs,
                 std::string_view subfolder, std::string_view field) {
  if (is_path(name_or_path)) return fs::path(name_or_path);
  const std::string file_name = std::string(name_or_path) + ".json";
  for (const fs::path& dir : dirs) {
    const fs::path candidate = subfolder.empty() ? dir / file_name : dir / subfolder / file_name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  std::string searched;
  for (const fs::path& dir : dirs)
    searched +=
        (searched.empty() ? "" : ", ") + (subfolder.empty() ? dir : dir / subfolder).string();
  std::string known;
  for (const CatalogEntry& e : list_in(dirs, subfolder))
    known += (known.empty() ? "" : ", ") + e.name;
  throw sim::ConfigError(std::string(name_or_path), std::string(field),
                         "no " + std::string(field) + " of that name; searched " +
                             (searched.empty() ? "no folders (set ACTSIM_MODELS)" : searched) +
                             "; known " + std::string(field) +
                             "s: " + (known.empty() ? "none" : known) +
                             " (or give a path to a .json file)");
}

}  // namespace

std::vector<fs::path> model_search_dirs(const fs::path& exe_path) {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("ACTSIM_MODELS"); env != nullptr) {
    std::string_view list(env);
    while (!list.empty()) {
      const size_t colon = list.find(':');
      const std::string_view entry = list.substr(0, colon);
      if (!entry.empty()) dirs.emplace_back(entry);
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  // Beside the executable (the build tree copies models/ there), then an installed layout
  // <prefix>/bin/actsim with <prefix>/share/actsim/models. exe_path should be the executable's
  // real path (e.g. /proc/self/exe), not argv[0] as typed.
  const fs::path bin = exe_path.parent_path();
  dirs.push_back(bin / "models");
  dirs.push_back((bin / ".." / "share" / "actsim" / "models").lexically_normal());
  return dirs;
}

sim::ModelConfig load_model(std::string_view name_or_path, const std::vector<fs::path>& dirs) {
  const fs::path file = resolve(name_or_path, dirs, "", "model");
  return parse_model(read_file(file, "model"), name_or_path, file.string());
}

sim::Device load_device(std::string_view name_or_path, const std::vector<fs::path>& dirs) {
  const fs::path file = resolve(name_or_path, dirs, kDevicesFolder, "device");
  return parse_device(read_file(file, "device"), name_or_path, file.string());
}

std::vector<CatalogEntry> list_models(const std::vector<fs::path>& dirs) {
  return list_in(dirs, "");
}

std::vector<CatalogEntry> list_devices(const std::vector<fs::path>& dirs) {
  return list_in(dirs, kDevicesFolder);
}

}  // namespace sim_io
