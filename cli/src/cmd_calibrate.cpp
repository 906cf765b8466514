// actsim calibrate: fits a device's compute efficiency, memory efficiency and launch overhead to
// per-op timing tables (the CUDA harness's, or the PyTorch reference's --profile table; format in
// harness/README.md) by least squares on the roofline of DESIGN.md §5 (calibrate.hpp), and writes
// them with their provenance into a device file.
//
// Calibration and validation use separate grids (DESIGN.md §6): --validation-grid names the
// measured CSV that `actsim validate` will check, and a timing row whose grid point (model,
// precision, attention, batch, seq) appears in it is refused, so no error is ever reported on a
// configuration the efficiencies were fitted to.
//
// Output: -o FILE (refused when FILE exists: never a silent overwrite) or --in-place (the device
// file itself). Everything is checked before anything is written, and the written file must load
// as a device. Same inputs, same bytes: no date is added; --provenance says where and when the
// tables were measured.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "calibrate.hpp"
#include "commands.hpp"
#include "csv_read.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim_io/load.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

// Grid points of a measured CSV (schema v1 key columns).
std::set<std::string> validation_grid(const std::string& path) {
  const auto records = read_csv(path, read_text_file(path));
  if (records.empty()) throw sim::ConfigError(path, "header", "empty file");
  const CsvRecord& header = records[0].second;
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"model", "precision", "attention", "batch", "seq"})
    if (!col.count(need)) throw sim::ConfigError(path, need, "column missing from the header");
  std::set<std::string> keys;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r].second;
    if (rec.size() != header.size())
      throw sim::ConfigError(path + ":" + std::to_string(records[r].first), "row",
                             fmt::format("{} fields, the header has {}", rec.size(), header.size()));
    keys.insert(fmt::format("{},{},{},{},{}", rec[col["model"]], rec[col["precision"]],
                            rec[col["attention"]], rec[col["batch"]], rec[col["seq"]]));
  }
  return keys;
}

// Four significant digits (far below the fit's own error), never rounded to 0: a device whose
// kernels reach a tiny share of its peak (a CPU table against a GPU's figures) keeps a valid,
// positive efficiency.
double rounded(double v) { return std::stod(fmt::format("{:.4g}", v)); }

}  // namespace

int cmd_calibrate(const Invocation& inv) {
  const CalibrateFlags& c = inv.calibrate;
  if (c.tables.empty()) throw sim::ConfigError("calibrate", "tables", "name one or more timing tables");
  if (c.validation_grid.empty())
    throw sim::ConfigError("--validation-grid", "validation_grid",
                           "required: the measured CSV that actsim validate checks (calibration "
                           "and validation use separate grids, DESIGN.md §6)");
  if (c.in_place == !inv.flags.output.empty())
    throw sim::ConfigError("-o", "output", "give exactly one of -o FILE and --in-place");
  if (c.provenance.empty() || c.provenance.find('\n') != std::string::npos)
    throw sim::ConfigError("--provenance", "provenance",
                           "required, one line: the GPU and date the tables were measured on");
  const auto dirs = cli_common::search_dirs();
  const sim::Device device = sim_io::load_device(c.device, dirs);
  const std::string out_path = c.in_place ? device.source : inv.flags.output;
  if (!c.in_place && std::filesystem::exists(out_path))
    throw sim::ConfigError("-o", out_path, "exists: remove it first, or use --in-place to "
                                           "rewrite the device file itself");

  const std::set<std::string> grid = validation_grid(c.validation_grid);
  std::vector<TimingRow> rows;
  std::string names;
  for (const std::string& path : c.tables) {
    std::vector<TimingRow> part = parse_timing_table(path, read_text_file(path));
    for (const TimingRow& r : part)
      if (grid.count(r.grid_key()))
        throw sim::ConfigError(path + ":" + std::to_string(r.line), "grid",
                               "(" + r.grid_key() + ") is on the validation grid of " +
                                   c.validation_grid + ": calibrate on other configurations");
    rows.insert(rows.end(), part.begin(), part.end());
    names += (names.empty() ? "" : ", ") + std::filesystem::path(path).filename().string();
  }
  const FitReport rep = fit_efficiencies(rows, device, names, c.min_kind_rows);
  // Kinds the simulator knows (sim::op_kind_name) and fitted: the device's per-kind table.
  std::vector<const KindFit*> by_kind;
  for (const KindFit& k : rep.kinds) {
    bool known = false;
    for (int j = 0; j < sim::kOpKindCount; ++j)
      known = known || sim::op_kind_name(static_cast<sim::OpKind>(j)) == k.kind;
    if (k.fitted && known) by_kind.push_back(&k);
  }
  std::sort(by_kind.begin(), by_kind.end(),
            [](const KindFit* a, const KindFit* b) { return a->kind < b->kind; });
  const double launch_ns = by_kind.empty() ? rep.fit.launch_ns : rep.by_kind_launch_ns;

  // The device file with the three fields and their provenance replaced; key order kept.
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(read_text_file(device.source));
  } catch (const nlohmann::json::exception& e) {
    throw sim::ConfigError(device.source, "json", e.what());
  }
  const std::string how = fmt::format(
      "measured: actsim calibrate, relative least squares on the roofline of DESIGN.md §5 over "
      "{} op timings ({} compute-bound, {} memory-bound; RMS relative error {:.1f} %) from {}; {}",
      rep.rows, rep.compute_bound, rep.memory_bound, 100 * rep.rms_rel_error, names, c.provenance);
  if (rep.compute_fitted) {
    doc["compute_efficiency"] = rounded(rep.fit.compute);
    doc["provenance"]["compute_efficiency"] = how;
  }
  if (rep.memory_fitted) {
    doc["memory_efficiency"] = rounded(rep.fit.memory);
    doc["provenance"]["memory_efficiency"] = how;
  }
  doc["launch_overhead_ns"] = static_cast<int64_t>(std::llround(launch_ns));
  doc["provenance"]["launch_overhead_ns"] =
      by_kind.empty() ? how
                      : how + fmt::format(" (shared by the per-kind fit, RMS relative error "
                                          "{:.1f} %)", 100 * rep.by_kind_rms_rel_error);
  // A per-kind table from an earlier calibration would no longer match: replaced or removed.
  doc.erase("efficiency_by_kind");
  doc["provenance"].erase("efficiency_by_kind");
  if (!by_kind.empty()) {
    nlohmann::ordered_json table = nlohmann::ordered_json::object();
    for (const KindFit* k : by_kind)
      table[k->kind] = {{"compute_efficiency", rounded(k->compute)},
                        {"memory_efficiency", rounded(k->memory)}};
    doc["efficiency_by_kind"] = table;
    doc["provenance"]["efficiency_by_kind"] = fmt::format(
        "{}; per op kind with at least {} rows, launch overhead shared (RMS relative error "
        "{:.1f} %)", how, c.min_kind_rows, 100 * rep.by_kind_rms_rel_error);
  }
  const std::string text = doc.dump(2) + "\n";
  (void)sim_io::parse_device(text, device.name, out_path);  // it must load (throws otherwise)

  std::string report = fmt::format(
      "{} rows fitted ({} skipped: no kernel time), {} compute-bound, {} memory-bound\n"
      "compute_efficiency {}  memory_efficiency {}  launch_overhead_ns {}\n"
      "RMS relative error {:.2f} %\n\n",
      rep.rows, rep.skipped, rep.compute_bound, rep.memory_bound,
      rep.compute_fitted ? fmt::format("{:.4g}", rep.fit.compute) : "not fitted (kept)",
      rep.memory_fitted ? fmt::format("{:.4g}", rep.fit.memory) : "not fitted (kept)",
      std::llround(rep.fit.launch_ns), 100 * rep.rms_rel_error);
  // One efficiency pair cannot fit every kind: the per-kind ratio shows where it misses.
  TextTable kinds({"op kind", "rows", "measured / fitted", "own compute", "own memory"}, "lrrrr");
  for (const KindFit& k : rep.kinds) {
    const bool own = std::find(by_kind.begin(), by_kind.end(), &k) != by_kind.end();
    kinds.add({k.kind, fmt::format("{}", k.rows), fmt::format("{:.3f}", k.mean_ratio),
               own ? fmt::format("{:.4g}", k.compute) : "-",
               own ? fmt::format("{:.4g}", k.memory) : "-"});
  }
  report += kinds.render();
  if (!by_kind.empty())
    report += fmt::format("per-kind fit: launch_overhead_ns {} (written), RMS relative error "
                          "{:.2f} %\n", std::llround(launch_ns), 100 * rep.by_kind_rms_rel_error);
  report += fmt::format("\nwrote {}\n", out_path);

  Output file(out_path);
  file.write(text);
  file.commit();
  Output sink("");
  sink.write(report);
  sink.commit();
  return 0;
}

}  // namespace actsim_cli
