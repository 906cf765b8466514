// Reading CSV files (RFC 4180) for the verbs that take measured tables: validate, calibrate.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace actsim_cli {

using CsvRecord = std::vector<std::string>;

// RFC 4180 records of `text`, each with the line it starts on. Throws sim::ConfigError(path, ...)
// for an unterminated quote.
std::vector<std::pair<int64_t, CsvRecord>> read_csv(const std::string& path,
                                                    const std::string& text);

// A field that must be a whole integer; throws sim::ConfigError(where, column, ...) otherwise.
int64_t csv_integer(const std::string& where, const std::string& column, const std::string& v);

// The whole file; throws sim::ConfigError(path, "file", "cannot open").
std::string read_text_file(const std::string& path);

}  // namespace actsim_cli
