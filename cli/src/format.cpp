#include "format.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "sim/error.hpp"

namespace actsim_cli {

std::string human_bytes(int64_t bytes) {
  const char* sign = bytes < 0 ? "-" : "";
  // Magnitude as double: exact enough for display, and avoids negating INT64_MIN.
  const double v = std::fabs(static_cast<double>(bytes));
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (v < 1024) return fmt::format("{}{} B", sign, static_cast<int64_t>(v));
  double scaled = v / 1024;
  int unit = 0;
  while (scaled >= 1024 && unit < 4) {
    scaled /= 1024;
    ++unit;
  }
  return fmt::format("{}{:.2f} {}", sign, scaled, kUnits[unit]);
}

std::string human_flops(int64_t flops) {
  const double v = static_cast<double>(flops);
  if (v >= 1e15) return fmt::format("{:.1f} TFLOP", v / 1e12);
  return fmt::format("{:.3f} TFLOP", v / 1e12);
}

std::string human_time_ns(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} us", v / 1e3);
  if (ns < 10'000'000'000) return fmt::format("{:.2f} ms", v / 1e6);
  return fmt::format("{:.2f} s", v / 1e9);
}

std::string human_count(int64_t n) {
  const double v = static_cast<double>(n);
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{}", n);
}

std::string percent(double share) { return fmt::format("{:.1f} %", share * 100); }

std::string grouped(int64_t n) {
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  const std::string digits = fmt::format("{}", magnitude);
  std::string out;
  const std::size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  out.append(digits, 0, lead);
  for (std::size_t i = lead; i < digits.size(); i += 3) {
    out += ',';
    out.append(digits, i, 3);
  }
  return n < 0 ? "-" + out : out;
}

TextTable::TextTable(std::vector<std::string> header, std::string align)
    : align_(std::move(align)) {
  if (!header.empty()) rows_.push_back(std::move(header));
}

void TextTable::add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string TextTable::render(std::string_view indent) const {
  std::vector<std::size_t> width;
  // Display width in code points, so "µ" or "√" count as one column.
  const auto display = [](const std::string& s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display(row[i]));
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line(indent);
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::size_t pad = width[i] - display(row[i]);
      const bool right = i < align_.size() && align_[i] == 'r';
      if (i > 0) line += "  ";
      if (right) line.append(pad, ' ');
      line += row[i];
      if (!right && i + 1 < row.size()) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

Output::Output(std::string path, bool append, uint64_t keep) : path_(std::move(path)) {
  if (path_.empty()) {
    file_ = stdout;
    return;
  }
  partial_ = path_ + ".partial";
  if (append) {
    std::error_code ec;
    std::filesystem::resize_file(partial_, keep, ec);
    if (ec) throw sim::ConfigError("--output", partial_, "cannot cut to its last whole row: " + ec.message());
  }
  resumed_ = append;
  file_ = std::fopen(partial_.c_str(), append ? "ab" : "wb");
  if (file_ == nullptr)
    throw sim::ConfigError("--output", path_, std::string("cannot write: ") + std::strerror(errno));
}

Output::~Output() {
  if (path_.empty() || committed_) return;
  if (file_ != nullptr) std::fclose(file_);
  if (resumed_) return;
  std::error_code ec;
  std::filesystem::remove(partial_, ec);
}

void Output::write(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    throw sim::ConfigError("--output", path_.empty() ? "stdout" : path_,
                           std::string("write failed: ") + std::strerror(errno));
}

void Output::flush() {
  if (std::fflush(file_) != 0)
    throw sim::ConfigError("--output", path_.empty() ? "stdout" : path_,
                           std::string("write failed: ") + std::strerror(errno));
}

void Output::keep_partial() {
  flush();
  if (path_.empty()) return;
  const int rc = std::fclose(file_);
  file_ = nullptr;
  committed_ = true;  // nothing for the destructor to remove
  if (rc != 0)
    throw sim::ConfigError("--output", partial_, std::string("write failed: ") + std::strerror(errno));
}

void Output::commit() {
  flush();
  if (path_.empty()) return;
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0)
    throw sim::ConfigError("--output", path_, std::string("write failed: ") + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) throw sim::ConfigError("--output", path_, "cannot rename into place: " + ec.message());
  committed_ = true;
}

}  // namespace actsim_cli
