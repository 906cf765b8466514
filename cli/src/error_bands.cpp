#include "error_bands.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "csv_read.hpp"
#include "sim/error.hpp"

namespace actsim_cli {

std::vector<ErrorBand> load_error_bands(const std::vector<std::filesystem::path>& dirs) {
  std::vector<ErrorBand> out;
  for (const auto& d : dirs) {
    const std::filesystem::path file = d / "error-bands.csv";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string path = file.string();
    const auto records = read_csv(path, ss.str());
    if (records.empty()) return out;
    const CsvRecord want = {"impl",     "family",   "figure", "rows", "mean_abs_error_pct",
                            "max_abs_error_pct", "sources"};
    if (records[0].second != want) throw sim::ConfigError(path, "header", "not error-bands.csv's");
    for (size_t r = 1; r < records.size(); ++r) {
      const auto& f = records[r].second;
      const std::string where = path + ":" + std::to_string(records[r].first);
      if (f.size() != want.size()) throw sim::ConfigError(where, "row", "7 fields expected");
      ErrorBand b;
      b.impl = f[0], b.family = f[1], b.figure = f[2], b.sources = f[6];
      b.rows = csv_integer(where, "rows", f[3]);
      try {
        b.mean_abs_pct = std::stod(f[4]);
        b.max_abs_pct = std::stod(f[5]);
      } catch (const std::exception&) {
        throw sim::ConfigError(where, "mean_abs_error_pct", "not a number");
      }
      out.push_back(std::move(b));
    }
    return out;
  }
  return out;
}

std::string describe_band(const std::vector<ErrorBand>& bands, std::string_view impl,
                          std::string_view family) {
  std::string out;
  for (const ErrorBand& b : bands) {
    if (b.impl != impl || b.family != family) continue;
    out += fmt::format("{}{}: mean {:.2f} %, max {:.2f} % over {} rows ({})",
                       out.empty() ? "" : "; ", b.figure, b.mean_abs_pct, b.max_abs_pct, b.rows,
                       b.sources);
  }
  return out.empty() ? fmt::format("not validated ({} on the {} family)", impl, family) : out;
}

}  // namespace actsim_cli
