// actsim validate: re-simulates every row of a measured CSV (schema v1, from actsim-harness or the
// PyTorch reference) from its key columns and prints predicted, measured and error per row, then
// the mean and largest |error| per strategy (DESIGN.md §6). Exit status 3 when any |error|
// exceeds --tolerance (percent; 0: exact to the byte), after printing everything.
//
// Which measured figure is compared: rows of the executor (source cpu or cuda) count exact bytes,
// so their peak_requested_bytes against the simulated exact ledger's peak; rows of PyTorch (and of
// the simulator itself) on the figure matching the row's allocator: exact <-> requested bytes
// (peak_requested_bytes, requested_bytes.all.peak), caching <-> allocated bytes
// (peak_allocated_bytes, allocated_bytes.all.peak).
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "csv_read.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using Record = CsvRecord;

struct Checked {
  int64_t index = 0;
  std::string source, model, strategy;
  int64_t predicted = 0, measured = 0;
  double error_pct = 0;
  bool pass = true;
  int64_t time_predicted = 0, time_measured = 0;  // step_time_ns; measured 0: not measured
};

}  // namespace

int cmd_validate(const Invocation& inv) {
  const std::string& path = inv.validate_file;
  if (!(inv.tolerance >= 0) || !std::isfinite(inv.tolerance))
    throw sim::ConfigError("--tolerance", "tolerance", "must be a percentage >= 0");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::ConfigError(path, "file", "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto records = read_csv(path, ss.str());
  if (records.empty()) throw sim::ConfigError(path, "header", "empty file");
  const Record& header = records[0].second;
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need :
       {"schema_version", "source", "row_index", "model", "device", "strategy", "profile",
        "precision", "attention", "dropout", "batch", "seq", "tp", "sp", "dp", "zero", "optimizer",
        "allocator", "peak_allocated_bytes", "error", "peak_requested_bytes"})
    if (!col.count(need)) throw sim::ConfigError(path, need, "column missing from the header");

  const auto dirs = cli_common::search_dirs();
  std::map<std::string, sim::ModelConfig> models;
  std::map<std::string, sim::Device> devices;
  std::vector<Checked> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const auto& line = records[r].first;
    const auto& rec = records[r].second;
    const std::string where = path + ":" + std::to_string(line);
    if (rec.size() != header.size())
      throw sim::ConfigError(where, "row", fmt::format("{} fields, the header has {}", rec.size(),
                                                       header.size()));
    auto get = [&](const char* name) -> const std::string& { return rec[col.at(name)]; };
    auto integer = [&](const char* name) { return csv_integer(where, name, get(name)); };
    if (get("schema_version") != "1")
      throw sim::ConfigError(where, "schema_version", "'" + get("schema_version") + "' is not 1");
    if (!get("error").empty()) continue;  // a row that could not be measured: nothing to compare
    const std::string& source = get("source");
    // snapshot: a PyTorch memory snapshot's row (actsim snapshot/compare), read as torch's.
    if (source != "sim" && source != "cpu" && source != "cuda" && source != "torch" &&
        source != "snapshot")
      throw sim::ConfigError(where, "source",
                             "'" + source + "' is not sim, cpu, cuda, torch or snapshot");

    sim::TrainSetup s;
    auto parsed = [&](const char* name, auto opt) {
      if (!opt) throw sim::ConfigError(where, name, "'" + get(name) + "' is not known");
      return *opt;
    };
    s.profile = parsed("profile", sim::parse_profile(get("profile")));
    s.precision = parsed("precision", sim::parse_precision(get("precision")));
    s.attention = parsed("attention", sim::parse_attention(get("attention")));
    if (!get("dropout").empty()) {
      try {
        s.dropout = std::stod(get("dropout"));
      } catch (const std::exception&) {
        throw sim::ConfigError(where, "dropout", "'" + get("dropout") + "' is not a number");
      }
    }
    s.micro_batch = integer("batch");
    s.seq = integer("seq");
    s.tp = integer("tp");
    if (get("sp") != "on" && get("sp") != "off")
      throw sim::ConfigError(where, "sp", "'" + get("sp") + "' is not on or off");
    s.sp = get("sp") == "on";
    s.dp = integer("dp");
    s.zero = static_cast<int>(integer("zero"));
    s.optimizer = parsed("optimizer", sim::parse_optimizer(get("optimizer")));
    s.allocator = parsed("allocator", sim::parse_allocator(get("allocator")));
    const sim::Strategy strategy = sim::parse_strategy(get("strategy"));

    const std::string& mname = get("model");
    // --device: every row on that device file instead (e.g. one actsim calibrate wrote)
    const std::string& dname = inv.validate_device.empty() ? get("device") : inv.validate_device;
    if (!models.count(mname)) models.emplace(mname, sim_io::load_model(mname, dirs));
    if (!devices.count(dname)) devices.emplace(dname, sim_io::load_device(dname, dirs));
    sim::Result res;
    try {
      res = sim::simulate(models.at(mname), s, devices.at(dname), strategy);
    } catch (const sim::ConfigError& e) {
      throw sim::ConfigError(where, "row", e.what());
    }
    // The figure matching what was measured (see the file comment).
    const bool ledger = source == "cpu" || source == "cuda" || s.allocator == sim::AllocatorKind::kExact;
    Checked c;
    c.index = integer("row_index");
    c.source = source;
    c.model = mname;
    c.strategy = strategy.canonical();
    c.measured = integer(ledger ? "peak_requested_bytes" : "peak_allocated_bytes");
    c.predicted = ledger ? res.peak_requested_bytes : res.peak_allocated_bytes;
    if (c.measured <= 0)
      throw sim::ConfigError(where, ledger ? "peak_requested_bytes" : "peak_allocated_bytes",
                             "must be > 0");
    c.error_pct = 100.0 * static_cast<double>(c.predicted - c.measured) /
                  static_cast<double>(c.measured);
    c.pass = inv.tolerance == 0 ? c.predicted == c.measured
                                : std::abs(c.error_pct) <= inv.tolerance;
    if (col.count("step_time_ns") && !get("step_time_ns").empty() && source != "sim") {
      c.time_measured = integer("step_time_ns");
      c.time_predicted = res.step_time_ns;
      if (c.time_measured <= 0) throw sim::ConfigError(where, "step_time_ns", "must be > 0");
    }
    rows.push_back(std::move(c));
  }

  TextTable table({"row", "source", "model", "strategy", "predicted", "measured", "error", ""},
                  "rlllrrrl");
  for (const Checked& c : rows)
    table.add({fmt::format("{}", c.index), c.source, c.model, c.strategy, grouped(c.predicted),
               grouped(c.measured), fmt::format("{:+.4f} %", c.error_pct),
               c.pass ? "" : "exceeds tolerance"});
  std::string out = table.render();
  // Per strategy, in order of first appearance: mean and largest |error|.
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> by;
  for (const Checked& c : rows) {
    if (!by.count(c.strategy)) order.push_back(c.strategy);
    by[c.strategy].push_back(std::abs(c.error_pct));
  }
  TextTable summary({"strategy", "rows", "mean |error|", "max |error|"}, "lrrr");
  for (const std::string& st : order) {
    const auto& v = by[st];
    double sum = 0, mx = 0;
    for (double e : v) sum += e, mx = std::max(mx, e);
    summary.add({st, fmt::format("{}", v.size()),
                 fmt::format("{:.4f} %", sum / static_cast<double>(v.size())),
                 fmt::format("{:.4f} %", mx)});
  }
  out += "\n" + summary.render();
  // Step time, where rows measured it (the PyTorch reference, the CUDA harness): reported on the
  // device the rows name (or --device), not gated by --tolerance, which is about memory.
  TextTable times({"row", "strategy", "predicted", "measured", "error"}, "rlrrr");
  std::vector<std::string> time_order;
  std::map<std::string, std::vector<double>> time_by;
  for (const Checked& c : rows) {
    if (c.time_measured == 0) continue;
    const double e = 100.0 * static_cast<double>(c.time_predicted - c.time_measured) /
                     static_cast<double>(c.time_measured);
    times.add({fmt::format("{}", c.index), c.strategy,
               fmt::format("{:.3f} ms", static_cast<double>(c.time_predicted) / 1e6),
               fmt::format("{:.3f} ms", static_cast<double>(c.time_measured) / 1e6),
               fmt::format("{:+.2f} %", e)});
    if (!time_by.count(c.strategy)) time_order.push_back(c.strategy);
    time_by[c.strategy].push_back(std::abs(e));
  }
  if (!time_order.empty()) {
    TextTable tsum({"strategy", "rows", "mean |time error|", "max |time error|"}, "lrrr");
    for (const std::string& st : time_order) {
      const auto& v = time_by[st];
      double sum = 0, mx = 0;
      for (double e : v) sum += e, mx = std::max(mx, e);
      tsum.add({st, fmt::format("{}", v.size()),
                fmt::format("{:.2f} %", sum / static_cast<double>(v.size())),
                fmt::format("{:.2f} %", mx)});
    }
    out += "\nStep time (not gated by --tolerance)\n" + times.render() + "\n" + tsum.render();
  }
  int64_t failed = 0;
  for (const Checked& c : rows) failed += c.pass ? 0 : 1;
  out += fmt::format("\n{} rows, {} within the tolerance of {} %{}\n", rows.size(),
                     static_cast<int64_t>(rows.size()) - failed, inv.tolerance,
                     inv.tolerance == 0 ? " (exact)" : "");
  Output sink("");
  sink.write(out);
  sink.commit();
  return failed > 0 ? 3 : 0;
}

}  // namespace actsim_cli
