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
// measured time; g its group (one efficiency pair per group).
struct Point {
  double a, b, k, t;
  int g;
};

// Unknowns: per group g, x = 1/compute efficiency at 2g and y = 1/memory efficiency at 2g + 1;
// the launch overhead (ns, shared) last.
using Theta = std::vector<double>;

bool compute_bound(const Point& p, const Theta& th) {
  return p.a * th[2 * p.g] >= p.b * th[2 * p.g + 1];
}

// The relative residuals' sum of squares.
double objective(const std::vector<Point>& pts, const Theta& th) {
  double s = 0;
  for (const Point& p : pts) {
    const double r =
        (std::max(p.a * th[2 * p.g], p.b * th[2 * p.g + 1]) + p.k * th.back() - p.t) / p.t;
    s += r * r;
  }
  return s;
}

// Least squares for the unknowns marked free with the others held at th, rows assigned
// compute-bound (bound[i]) contributing a x, the others b y. Returns false when singular.
bool solve(const std::vector<Point>& pts, const std::vector<char>& bound,
           const std::vector<char>& free, Theta& th) {
  std::vector<int> idx, pos(th.size(), -1);
  for (size_t j = 0; j < th.size(); ++j)
    if (free[j]) pos[j] = static_cast<int>(idx.size()), idx.push_back(static_cast<int>(j));
  const size_t n = idx.size();
  if (n == 0) return true;
  std::vector<double> m(n * (n + 1), 0.0);  // [n x n | rhs]
  auto at = [&](size_t r, size_t c) -> double& { return m[r * (n + 1) + c]; };
  for (size_t i = 0; i < pts.size(); ++i) {
    const Point& p = pts[i];
    const double w = 1.0 / (p.t * p.t);
    const int jv = bound[i] ? 2 * p.g : 2 * p.g + 1;
    const double uv = bound[i] ? p.a : p.b;
    const int jl = static_cast<int>(th.size()) - 1;
    double rhs = p.t;
    if (!free[jv]) rhs -= uv * th[jv];
    if (!free[jl]) rhs -= p.k * th[jl];
    // the row's two non-zero entries
    const std::pair<int, double> u[2] = {{pos[jv], uv}, {pos[jl], p.k}};
    for (const auto& [r, ur] : u) {
      if (r < 0) continue;
      for (const auto& [c, uc] : u)
        if (c >= 0) at(r, c) += w * ur * uc;
      at(r, n) += w * ur * rhs;
    }
  }
  for (size_t c = 0; c < n; ++c) {  // Gauss-Jordan, partial pivoting
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(at(r, c)) > std::abs(at(piv, c))) piv = r;
    if (!(std::abs(at(piv, c)) > 1e-300)) return false;
    for (size_t k = 0; k <= n; ++k) std::swap(at(c, k), at(piv, k));
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = at(r, c) / at(c, c);
      if (f != 0)
        for (size_t k = c; k <= n; ++k) at(r, k) -= f * at(c, k);
    }
  }
  for (size_t r = 0; r < n; ++r) th[idx[r]] = at(r, n) / at(r, r);
  return true;
}

// From one start: alternate the bound assignment and the linear solution until the assignment
// is stable. The launch overhead is kept >= 0 (re-solved at 0 when negative); x, y > 0. A
// group's x (y) is free only while it has compute-bound (memory-bound) rows.
bool descend(const std::vector<Point>& pts, Theta& th) {
  std::vector<char> bound(pts.size(), 0), next(pts.size(), 0);
  for (size_t i = 0; i < pts.size(); ++i) bound[i] = compute_bound(pts[i], th);
  for (int iter = 0; iter < 100; ++iter) {
    std::vector<char> free(th.size(), 0);
    for (size_t i = 0; i < pts.size(); ++i) free[bound[i] ? 2 * pts[i].g : 2 * pts[i].g + 1] = 1;
    free.back() = 1;
    Theta t = th;
    if (!solve(pts, bound, free, t)) return false;
    if (t.back() < 0) {
      t = th;
      t.back() = 0;
      free.back() = 0;
      if (!solve(pts, bound, free, t)) return false;
    }
    for (size_t j = 0; j + 1 < t.size(); ++j)
      if (!(t[j] > 0) || !std::isfinite(t[j])) return false;
    th = t;
    for (size_t i = 0; i < pts.size(); ++i) next[i] = compute_bound(pts[i], th);
    if (next == bound) return true;
    bound.swap(next);
  }
  return true;
}

// The best of 25 starts (efficiencies 1 down to 0.1, the same for every group).
Theta best_fit(const std::vector<Point>& pts, int groups, double launch0, double* best_obj) {
  Theta best;
  *best_obj = std::numeric_limits<double>::infinity();
  for (double x0 : {1.0, 1.25, 2.0, 4.0, 10.0}) {
    for (double y0 : {1.0, 1.25, 2.0, 4.0, 10.0}) {
      Theta th(2 * static_cast<size_t>(groups) + 1);
      for (int g = 0; g < groups; ++g) th[2 * g] = x0, th[2 * g + 1] = y0;
      th.back() = launch0;
      if (!descend(pts, th)) continue;
      const double obj = objective(pts, th);
      if (obj < *best_obj) *best_obj = obj, best = th;
    }
  }
  return best;
}

int64_t parse_int(const std::string& where, const std::string& column, const std::string& v) {
  return csv_integer(where, column, v);
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
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const auto& line = records[r].first;
    const auto& rec = records[r].second;
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
  const double peak = (row.math16 ? d.peak_bf16_flops_per_s : d.peak_fp32_flops_per_s) *
                      row.shape_efficiency;
  const double compute_s = static_cast<double>(row.flops) / (peak * e.compute);
  const double memory_s = static_cast<double>(row.bytes) / (d.hbm_bytes_per_s * e.memory);
  return std::max(compute_s, memory_s) * 1e9 + static_cast<double>(row.kernels) * e.launch_ns;
}

FitReport fit_efficiencies(const std::vector<TimingRow>& rows, const sim::Device& d,
                           const std::string& source, int64_t min_kind_rows) {
  FitReport rep;
  std::vector<Point> pts;
  std::vector<const TimingRow*> used;
  for (const TimingRow& r : rows) {
    // No kernel ran (a view, an identity) or nothing the model can time: nothing to fit.
    if (r.measured_ns == 0 || r.kernels == 0 || (r.flops == 0 && r.bytes == 0)) {
      ++rep.skipped;
      continue;
    }
    const double peak =
        (r.math16 ? d.peak_bf16_flops_per_s : d.peak_fp32_flops_per_s) * r.shape_efficiency;
    pts.push_back({static_cast<double>(r.flops) / peak * 1e9,
                   static_cast<double>(r.bytes) / d.hbm_bytes_per_s * 1e9,
                   static_cast<double>(r.kernels), static_cast<double>(r.measured_ns), 0});
    used.push_back(&r);
  }
  if (pts.size() < 3)
    throw sim::ConfigError(source, "rows",
                           fmt::format("{} rows with a measured time, FLOPs or bytes: at least 3 "
                                       "are needed to fit three parameters", pts.size()));
  // 1. One efficiency pair for every op and the launch overhead: the device's two fields.
  double obj = 0;
  const Theta th = best_fit(pts, 1, static_cast<double>(d.launch_overhead_ns), &obj);
  if (th.empty()) throw sim::ConfigError(source, "rows", "the fit did not converge (degenerate table)");
  for (const Point& p : pts) (compute_bound(p, th) ? rep.compute_bound : rep.memory_bound)++;
  rep.compute_fitted = rep.compute_bound > 0;
  rep.memory_fitted = rep.memory_bound > 0;
  rep.fit.compute = rep.compute_fitted ? 1.0 / th[0] : d.compute_efficiency;
  rep.fit.memory = rep.memory_fitted ? 1.0 / th[1] : d.memory_efficiency;
  rep.fit.launch_ns = th.back();
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
  rep.rms_rel_error = std::sqrt(obj / static_cast<double>(pts.size()));

  // 2. Per op kind (sim::op_kind_name): kinds with at least min_kind_rows rows get their own
  // pair, the rest share one; the launch overhead stays shared. Kinds in order of appearance.
  std::map<std::string, size_t> at;
  for (const TimingRow* r : used)
    if (at.emplace(r->kind, rep.kinds.size()).second) rep.kinds.push_back({r->kind});
  for (const TimingRow* r : used) ++rep.kinds[at[r->kind]].rows;
  std::vector<int> group_of(rep.kinds.size(), -1);
  int groups = 0;
  for (size_t k = 0; k < rep.kinds.size(); ++k)
    if (min_kind_rows > 0 && rep.kinds[k].rows >= min_kind_rows) group_of[k] = groups++;
  const int rest = groups;
  std::vector<Point> kp = pts;
  for (size_t i = 0; i < kp.size(); ++i) {
    const int g = group_of[at[used[i]->kind]];
    kp[i].g = g < 0 ? rest : g;
  }
  double kobj = 0;
  const Theta kth = groups > 0 ? best_fit(kp, groups + 1, rep.fit.launch_ns, &kobj) : Theta{};
  if (!kth.empty()) {
    rep.by_kind_launch_ns = kth.back();
    rep.by_kind_rms_rel_error = std::sqrt(kobj / static_cast<double>(kp.size()));
  }
  std::vector<double> sums(rep.kinds.size(), 0.0);
  std::vector<char> any_c(rep.kinds.size(), 0), any_m(rep.kinds.size(), 0);
  for (size_t i = 0; i < used.size(); ++i) {
    const size_t k = at[used[i]->kind];
    sums[k] += static_cast<double>(used[i]->measured_ns) / roofline_ns(*used[i], d, rep.fit);
    if (!kth.empty()) (compute_bound(kp[i], kth) ? any_c : any_m)[k] = 1;
  }
  for (size_t k = 0; k < rep.kinds.size(); ++k) {
    KindFit& kf = rep.kinds[k];
    kf.mean_ratio = sums[k] / static_cast<double>(kf.rows);
    if (kth.empty() || group_of[k] < 0) continue;
    const int g = group_of[k];
    // a side with no bound row is not determined by this kind: the device-wide value
    kf.compute = any_c[k] ? 1.0 / kth[2 * g] : rep.fit.compute;
    kf.memory = any_m[k] ? 1.0 / kth[2 * g + 1] : rep.fit.memory;
    kf.fitted = kf.compute <= 1 && kf.memory <= 1;  // above 1: the kind's FLOPs or bytes are off
  }
  return rep;
}

}  // namespace actsim_cli
