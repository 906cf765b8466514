// The validated error bands (models/error-bands.csv, written by scripts/error_bands.py from
// `actsim validate` over validation/): per implementation, model family and measured figure, the
// mean and largest |error| of the simulator against published GPU measurements and real code.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace actsim_cli {

struct ErrorBand {
  std::string impl, family, figure, sources;
  int64_t rows = 0;
  double mean_abs_pct = 0, max_abs_pct = 0;
};

// Reads error-bands.csv from the first search folder that has one; none found: empty. A file
// that does not parse throws ConfigError naming it and the line.
std::vector<ErrorBand> load_error_bands(const std::vector<std::filesystem::path>& dirs);

// What `actsim run` prints beside the peak: "allocated: mean 2.10 %, max 4.00 % over 19 rows
// (sources)" per figure validated for this implementation and family, or "not validated".
std::string describe_band(const std::vector<ErrorBand>& bands, std::string_view impl,
                          std::string_view family);

}  // namespace actsim_cli
