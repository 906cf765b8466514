// RFC 4180 reading shared by validate and calibrate (csv_read.hpp).
#include "csv_read.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/error.hpp"

namespace actsim_cli {

// RFC 4180 records with the line each starts on; throws ConfigError for an unterminated quote.
std::vector<std::pair<int64_t, CsvRecord>> read_csv(const std::string& path, const std::string& text) {
  std::vector<std::pair<int64_t, CsvRecord>> out;
  CsvRecord rec;
  std::string field;
  bool quoted = false, any = false;
  int64_t line = 1, start = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      quoted = any = true;
    } else if (c == ',') {
      rec.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        rec.push_back(std::move(field));
        out.emplace_back(start, std::move(rec));
      }
      rec.clear();
      field.clear();
      any = false;
      start = ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw sim::ConfigError(path, "line " + std::to_string(start), "unterminated quote");
  if (any || !field.empty()) {
    rec.push_back(std::move(field));
    out.emplace_back(start, std::move(rec));
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::ConfigError(path, "file", "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t csv_integer(const std::string& where, const std::string& column, const std::string& v) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size())
    throw sim::ConfigError(where, column, "'" + v + "' is not an integer");
  return x;
}

}  // namespace actsim_cli
