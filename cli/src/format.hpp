// Human units for tables, a plain text table, and where a verb's output goes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace actsim_cli {

// Bytes in binary units ("3.21 GiB", "512 B", "-1.50 GiB"); formatted with fmt as "{}".
struct Bytes {
  int64_t value = 0;
};

std::string human_bytes(int64_t bytes);     // "3.21 GiB"
std::string human_flops(int64_t flops);     // "1.234 TFLOP"
std::string human_time_ns(int64_t ns);      // "12.35 ms" (or µs / s as fits)
std::string human_count(int64_t n);         // "124.4 M", "1.56 B" (parameters)
std::string percent(double share);          // 0.3521 -> "35.2 %"
std::string grouped(int64_t n);             // 1234567 -> "1,234,567" (no locale)

// A text table: an optional header row and left- or right-aligned columns, two spaces apart.
class TextTable {
 public:
  // `align` has one character per column: 'l' or 'r'. An empty header prints no header row.
  TextTable(std::vector<std::string> header, std::string align);
  void add(std::vector<std::string> row);
  std::string render(std::string_view indent = "") const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::string align_;
};

// Where a verb's output goes: stdout, or FILE.partial renamed to FILE by commit(). Destroyed
// before commit(), it removes the partial file, so an error leaves no output file (DESIGN.md §7);
// a partial file that was resumed (rows of an earlier run) is kept.
class Output {
 public:
  // Empty path: stdout. Throws sim::ConfigError("--output", path, reason) when it cannot open.
  // append: continue FILE.partial from byte `keep` (what was there after is cut off).
  explicit Output(std::string path, bool append = false, uint64_t keep = 0);
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output();

  void write(std::string_view text);  // throws ConfigError on a write error
  void flush();
  void commit();                      // flush, close and rename into place
  // Flush and close, leaving FILE.partial in place (an interrupted sweep, for --resume).
  void keep_partial();
  const std::string& partial_path() const { return partial_; }

 private:
  std::string path_;
  std::string partial_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  bool resumed_ = false;  // FILE.partial held rows before we opened it: never remove it
};

}  // namespace actsim_cli

template <>
struct fmt::formatter<actsim_cli::Bytes> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(actsim_cli::Bytes b, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(actsim_cli::human_bytes(b.value), ctx);
  }
};
