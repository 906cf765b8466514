// Timing tables and the least-squares fit of calibrate.hpp.
#include "calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "csv_read.hpp"
#include "sim/error.hpp"

namespace actsim_cli {
namespace {

// Per row, in nanoseconds at efficiency 1: a = compute time, b = memory time; k kernels; t the
// measured time.
struct Point {
  double a, b, k, t;
};

constexpr int kX = 0, kY = 1, kL = 2;  // unknowns: 1/compute eff., 1/memory eff., launch ns

// The relative residual's sum of squares at (x, y, l).
double objective(const std::vector<Point>& pts, const std::array<double, 3>& th) {
  double s = 0;
  for (const Point& p : pts) {
    const double r = (std::max(p.a * th[kX], p.b * th[kY]) + p.k * th[kL] - p.t) / p.t;
    s += r * r;
  }
  return s;
}

// Least squares for the unknowns marked in `free` with the others held at th; rows assigned
// compute-bound (bound[i]) contribute a*x, the others b*y. Returns false when singular.
bool solve(const std::vector<Point>& pts, const std::vector<char>& bound,
           const std::array<bool, 3>& free, std::array<double, 3>& th) {
  std::array<int, 3> idx{};
  int n = 0;
  for (int j = 0; j < 3; ++j)
    if (free[j]) idx[n++] = j;
  if (n == 0) return true;
  double m[3][4] = {};
  for (size_t i = 0; i < pts.size(); ++i) {
    const Point& p = pts[i];
    const double w = 1.0 / (p.t * p.t);
    const std::array<double, 3> u = {bound[i] ? p.a : 0.0, bound[i] ? 0.0 : p.b, p.k};
    double rhs = p.t;
    for (int j = 0; j < 3; ++j)
      if (!free[j]) rhs -= u[j] * th[j];
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) m[r][c] += w * u[idx[r]] * u[idx[c]];
      m[r][n] += w * u[idx[r]] * rhs;
    }
  }
  for (int c = 0; c < n; ++c) {  // Gaussian elimination, partial pivoting
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
    if (!(std::abs(m[piv][c]) > 1e-300)) return false;
    for (int k = 0; k <= n; ++k) std::swap(m[c][k], m[piv][k]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int k = c; k <= n; ++k) m[r][k] -= f * m[c][k];
    }
  }
  for (int r = 0; r < n; ++r) th[idx[r]] = m[r][n] / m[r][r];
  return true;
}

// From one start: alternate the bound assignment and the linear solution until the assignment
// is stable. The launch overhead is kept >= 0 (re-solved at 0 when negative), and x, y > 0.
bool descend(const std::vector<Point>& pts, std::array<double, 3>& th) {
  std::vector<char> bound(pts.size(), 0), next(pts.size(), 0);
  for (size_t i = 0; i < pts.size(); ++i) bound[i] = pts[i].a * th[kX] >= pts[i].b * th[kY];
  for (int iter = 0; iter < 100; ++iter) {
    bool any_c = false, any_m = false;
    for (size_t i = 0; i < pts.size(); ++i) (bound[i] ? any_c : any_m) = true;
    std::array<double, 3> t = th;
    if (!solve(pts, bound, {any_c, any_m, true}, t)) return false;
    if (t[kL] < 0) {
      t = th;
      t[kL] = 0;
      if (!solve(pts, bound, {any_c, any_m, false}, t)) return false;
    }
    if (!(t[kX] > 0) || !(t[kY] > 0) || !std::isfinite(t[kX]) || !std::isfinite(t[kY]))
      return false;
    th = t;
    for (size_t i = 0; i < pts.size(); ++i) next[i] = pts[i].a * th[kX] >= pts[i].b * th[kY];
    if (next == bound) return true;
    bound.swap(next);
  }
  return true;
}

int64_t parse_int(const std::string& where, const std::string& column, const std::string& v) {
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

}  // namespace

std::string TimingRow::grid_key() const {
  return fmt::format("{},{},{},{},{}", model, precision, attention, batch, seq);
}

const std::vector<std::string>& timing_columns() {
  static const std::vector<std::string> c = {
      "model", "precision", "attention", "batch", "seq", "op", "kind", "block",
      "phase", "name", "math16", "flops", "bytes", "kernels", "measured_ns"};
  return c;
}

std::vector<TimingRow> parse_timing_table(const std::string& path, const std::string& text) {
  const auto records = read_csv(path, text);
  if (records.empty()) throw sim::ConfigError(path, "header", "empty file");
  const CsvRecord& header = records[0].second;
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const std::string& need : timing_columns())
    if (!col.count(need))
      throw sim::ConfigError(path, need, "column missing from the header (a timing table: " +
                                             fmt::format("{}", fmt::join(timing_columns(), ",")) +
                                             ")");
  std::vector<TimingRow> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& [line, rec] = records[r];
    const std::string where = path + ":" + std::to_string(line);
    if (rec.size() != header.size())
      throw sim::ConfigError(where, "row",
                             fmt::format("{} fields, the header has {}", rec.size(), header.size()));
    auto get = [&](const char* name) -> const std::string& { return rec[col.at(name)]; };
    auto count = [&](const char* name) {
      const int64_t v = parse_int(where, name, get(name));
      if (v < 0) throw sim::ConfigError(where, name, "must not be negative");
      return v;
    };
    TimingRow t;
    t.line = line;
    t.model = get("model");
    t.precision = get("precision");
    t.attention = get("attention");
    if (t.model.empty()) throw sim::ConfigError(where, "model", "must not be empty");
    t.batch = count("batch");
    t.seq = count("seq");
    t.op = count("op");
    t.kind = get("kind");
    t.block = parse_int(where, "block", get("block"));
    t.phase = get("phase");
    if (t.phase != "forward" && t.phase != "backward" && t.phase != "recompute")
      throw sim::ConfigError(where, "phase",
                             "'" + t.phase + "' is not forward, backward or recompute");
    t.name = get("name");
    const std::string& m16 = get("math16");
    if (m16 != "0" && m16 != "1") throw sim::ConfigError(where, "math16", "'" + m16 + "' is not 0 or 1");
    t.math16 = m16 == "1";
    t.flops = count("flops");
    t.bytes = count("bytes");
    t.kernels = count("kernels");
    t.measured_ns = count("measured_ns");
    rows.push_back(std::move(t));
  }
  if (rows.empty()) throw sim::ConfigError(path, "rows", "the table has no rows");
  return rows;
}

double roofline_ns(const TimingRow& row, const sim::Device& d, const Efficiencies& e) {
  // sim/src/engine.cpp kernel_ns: an op with neither FLOPs nor bytes takes no time at all.
  if (row.flops == 0 && row.bytes == 0) return 0;
  const double peak = row.math16 ? d.peak_bf16_flops_per_s : d.peak_fp32_flops_per_s;
  const double compute_s = static_cast<double>(row.flops) / (peak * e.compute);
  const double memory_s = static_cast<double>(row.bytes) / (d.hbm_bytes_per_s * e.memory);
  return std::max(compute_s, memory_s) * 1e9 + static_cast<double>(row.kernels) * e.launch_ns;
}

FitReport fit_efficiencies(const std::vector<TimingRow>& rows, const sim::Device& d,
                           const std::string& source) {
  FitReport rep;
  std::vector<Point> pts;
  std::vector<const TimingRow*> used;
  for (const TimingRow& r : rows) {
    // No kernel ran (a view, an identity) or nothing the model can time: nothing to fit.
    if (r.measured_ns == 0 || r.kernels == 0 || (r.flops == 0 && r.bytes == 0)) {
      ++rep.skipped;
      continue;
    }
    const double peak = r.math16 ? d.peak_bf16_flops_per_s : d.peak_fp32_flops_per_s;
    pts.push_back({static_cast<double>(r.flops) / peak * 1e9,
                   static_cast<double>(r.bytes) / d.hbm_bytes_per_s * 1e9,
                   static_cast<double>(r.kernels), static_cast<double>(r.measured_ns)});
    used.push_back(&r);
  }
  if (pts.size() < 3)
    throw sim::ConfigError(source, "rows",
                           fmt::format("{} rows with a measured time, FLOPs or bytes: at least 3 "
                                       "are needed to fit three parameters", pts.size()));
  // Starts: efficiencies from 1 down to 0.1 for both, the launch overhead at the device's value.
  std::array<double, 3> best{};
  double best_obj = std::numeric_limits<double>::infinity();
  for (double x0 : {1.0, 1.25, 2.0, 4.0, 10.0}) {
    for (double y0 : {1.0, 1.25, 2.0, 4.0, 10.0}) {
      std::array<double, 3> th = {x0, y0, static_cast<double>(d.launch_overhead_ns)};
      if (!descend(pts, th)) continue;
      const double obj = objective(pts, th);
      if (obj < best_obj) best_obj = obj, best = th;
    }
  }
  if (!std::isfinite(best_obj))
    throw sim::ConfigError(source, "rows", "the fit did not converge (degenerate table)");
  for (const Point& p : pts) (p.a * best[kX] >= p.b * best[kY] ? rep.compute_bound : rep.memory_bound)++;
  rep.compute_fitted = rep.compute_bound > 0;
  rep.memory_fitted = rep.memory_bound > 0;
  rep.fit.compute = rep.compute_fitted ? 1.0 / best[kX] : d.compute_efficiency;
  rep.fit.memory = rep.memory_fitted ? 1.0 / best[kY] : d.memory_efficiency;
  rep.fit.launch_ns = best[kL];
  // An efficiency above 1 means a row runs faster than the device's peak allows: its FLOPs or
  // bytes are overstated, or the device file's peak is too low. Refuse rather than write it.
  if (rep.fit.compute > 1)
    throw sim::ConfigError(source, "compute_efficiency",
                           fmt::format("fitted {:.4f} > 1: the table's FLOPs or the device's peak "
                                       "FLOP/s are wrong", rep.fit.compute));
  if (rep.fit.memory > 1)
    throw sim::ConfigError(source, "memory_efficiency",
                           fmt::format("fitted {:.4f} > 1: the table's bytes or the device's "
                                       "bandwidth are wrong", rep.fit.memory));
  rep.rows = static_cast<int64_t>(pts.size());
  rep.rms_rel_error = std::sqrt(best_obj / static_cast<double>(pts.size()));
  std::map<std::string, size_t> at;
  std::vector<double> sums;
  for (const TimingRow* r : used) {
    auto [it, fresh] = at.emplace(r->kind, rep.kinds.size());
    if (fresh) rep.kinds.push_back({r->kind, 0, 0}), sums.push_back(0);
    KindFit& k = rep.kinds[it->second];
    ++k.rows;
    sums[it->second] += static_cast<double>(r->measured_ns) / roofline_ns(*r, d, rep.fit);
  }
  for (size_t i = 0; i < rep.kinds.size(); ++i)
    rep.kinds[i].mean_ratio = sums[i] / static_cast<double>(rep.kinds[i].rows);
  return rep;
}

}  // namespace actsim_cli
