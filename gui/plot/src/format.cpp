#include "gui_plot/format.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gui_plot/ticks.hpp"

namespace gui_plot {
namespace {

// Three significant digits of a value in [0, 1000) or [0, 1024): 1.23, 12.3, 123.
std::string three_digits(double v, const char* unit) {
  char buf[64];
  const double a = std::abs(v);
  const int decimals = a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2;
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
  return buf;
}

int decimals_for(double step) {
  if (!(step > 0)) return 0;
  const double d = std::ceil(-std::log10(step) - 1e-9);
  return d > 0 ? static_cast<int>(d) : 0;
}

}  // namespace

std::string human_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const double a = std::abs(static_cast<double>(bytes));
  if (a < 1024) return std::to_string(bytes) + " B";
  int i = 0;
  double unit = 1;
  while (i < 6 && a >= unit * 1024) unit *= 1024, ++i;
  // 1023.9 KiB would print as "1024 KiB": move to the next unit instead.
  if (a / unit >= 1023.5 && i < 6) unit *= 1024, ++i;
  return three_digits(static_cast<double>(bytes) / unit, kUnits[i]);
}

std::string compact_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T", "P", "E"};
  double v = std::abs(static_cast<double>(bytes));
  int i = 0;
  while (i < 6 && v >= 999.5) v /= 1024, ++i;  // 1000 KiB shows as 0.98M: three characters
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%.*f%s", bytes < 0 ? "-" : "", v < 9.95 && i > 0 ? 1 : 0, v,
                kUnits[i]);
  return buf;
}

std::string human_time_ns(int64_t ns) {
  const double a = std::abs(static_cast<double>(ns));
  if (a < 999.5) return std::to_string(ns) + " ns";
  if (a < 999.5e3) return three_digits(static_cast<double>(ns) / 1e3, "\xC2\xB5s");
  if (a < 999.5e6) return three_digits(static_cast<double>(ns) / 1e6, "ms");
  return three_digits(static_cast<double>(ns) / 1e9, "s");
}

std::string human_si(double value, const char* suffix) {
  static constexpr const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E", "Z"};
  const double a = std::abs(value);
  int i = 0;
  double unit = 1;
  while (i < 7 && a >= unit * 999.5) unit *= 1000, ++i;
  std::string u = std::string(kPrefix[i]) + suffix;
  if (i == 0 && a == std::floor(a)) return std::to_string(static_cast<long long>(value)) + " " + u;
  return three_digits(value / unit, u.c_str());
}

std::string format_tick(double v, double step, double max_abs, Unit unit) {
  char buf[64];
  if (std::abs(v) < step * 1e-9) v = 0;  // no "-0"
  switch (unit) {
    case Unit::kPlain:
      std::snprintf(buf, sizeof buf, "%.*f", decimals_for(step), v);
      return buf;
    case Unit::kBytes: {
      static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
      const double u = byte_unit(max_abs);
      const int i = static_cast<int>(std::lround(std::log2(u) / 10));
      std::snprintf(buf, sizeof buf, "%.*f %s", decimals_for(step / u), v / u, kUnits[i]);
      return buf;
    }
    case Unit::kTimeNs: {
      double u = 1;
      const char* name = "ns";
      if (max_abs >= 1e9) u = 1e9, name = "s";
      else if (max_abs >= 1e6) u = 1e6, name = "ms";
      else if (max_abs >= 1e3) u = 1e3, name = "\xC2\xB5s";
      std::snprintf(buf, sizeof buf, "%.*f %s", decimals_for(step / u), v / u, name);
      return buf;
    }
  }
  return {};
}

}  // namespace gui_plot
