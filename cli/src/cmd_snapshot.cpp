// actsim snapshot FILE.pickle: a PyTorch CUDA memory snapshot's measured peaks (allocated,
// requested, reserved), when each happens, and the largest blocks live at the allocated peak with
// the deepest user frame of each (snapshot.hpp states how the trace is replayed). --format csv
// gives one row of CSV schema v1 with source `snapshot`: the key columns are the common flags (the
// configuration the snapshot ran, as the user states it), the measured peaks in
// peak_allocated_bytes, peak_requested_bytes and peak_reserved_bytes; json gives that row as an
// object keyed by the columns, with the peaks' details beside it.
#include <nlohmann/json.hpp>

#include <string>

#include "commands.hpp"
#include "csv_read.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "snapshot.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using cli_common::Format;

constexpr std::size_t kLargestBlocks = 10;

std::string when(const SnapshotPeak& p) {
  if (p.event < 0) return "before the trace";
  std::string out = fmt::format("event {}", p.event);
  if (p.time_us >= 0) out += fmt::format(", t = {}", human_time_ns(p.time_us * 1000));
  if (!p.phase.empty()) out += fmt::format(" ({})", p.phase);
  if (!p.frame.empty()) out += fmt::format(", {}", p.frame);
  return out;
}

std::string render_table(const Snapshot& s, const SnapshotPeaks& p) {
  std::string out = fmt::format("Snapshot {} (PyTorch layout: {}), CUDA device {}\n", s.file,
                                s.layout, p.device);
  out += fmt::format("  {} events, {} allocations{}{}\n", grouped(p.events), grouped(p.allocs),
                     p.duration_us >= 0
                         ? fmt::format(" over {}", human_time_ns(p.duration_us * 1000))
                         : std::string(" (no times recorded: PyTorch before 2.1)"),
                     p.ooms > 0 ? fmt::format(", {} out-of-memory events", p.ooms) : "");
  TextTable t({}, "lrl");
  t.add({"peak allocated", fmt::format("{}", Bytes{p.allocated.bytes}), when(p.allocated)});
  t.add({"peak requested", fmt::format("{}", Bytes{p.requested.bytes}), when(p.requested)});
  t.add({"peak reserved", fmt::format("{}", Bytes{p.reserved.bytes}), when(p.reserved)});
  t.add({"before the trace", fmt::format("{}", Bytes{p.start_allocated_bytes}),
         fmt::format("allocated in {} blocks; reserved {}", p.start_blocks,
                     Bytes{p.start_reserved_bytes})});
  out += "\nMeasured peaks\n" + t.render("  ");
  out += "  allocated: requested sizes rounded to 512 B as the caching allocator rounds them; "
         "blocks it leaves unsplit are larger, so this is a lower bound of max_memory_allocated\n";

  TextTable blocks({"bytes", "requested", "allocated at", "phase", "deepest user frame"}, "rrlll");
  int64_t shown = 0;
  for (const LiveAtPeak& b : p.at_peak) {
    if (shown >= static_cast<int64_t>(kLargestBlocks)) break;
    blocks.add({fmt::format("{}", Bytes{b.allocated_bytes}), grouped(b.requested_bytes),
                b.since_event < 0 ? std::string("before the trace")
                                  : fmt::format("event {}", b.since_event),
                b.phase.empty() ? "-" : b.phase, b.frame.empty() ? "(no user frame)" : b.frame});
    ++shown;
  }
  out += fmt::format("\nLargest blocks live at the allocated peak ({} of {})\n", shown,
                     p.at_peak.size());
  out += blocks.render("  ");
  return out;
}

sim::Phase phase_of(const std::string& hint) {
  if (hint == "backward") return sim::Phase::kBackward;
  if (hint == "optimizer") return sim::Phase::kOptimizer;
  return sim::Phase::kForward;
}

}  // namespace

sim_io::Row snapshot_row(const cli_common::Axes& axes, const cli_common::Inputs& inputs,
                         const cli_common::Point& point,
                         const sim::Result& model_size, const SnapshotPeaks& peaks) {
  sim_io::Row row;
  row.source = "snapshot";
  row.key = cli_common::row_key(axes, inputs, point);
  row.peak_only = true;
  sim::Result r;
  r.layers = model_size.layers;
  r.params = model_size.params;
  r.params_per_rank = model_size.params_per_rank;
  r.peak_allocated_bytes = peaks.allocated.bytes;
  r.peak_requested_bytes = peaks.requested.bytes;
  r.peak_reserved_bytes = peaks.reserved.bytes;
  r.peak_phase = phase_of(peaks.allocated.phase);
  row.result = r;
  return row;
}

int cmd_snapshot(const Invocation& inv) {
  const Format format = cli_common::parse_format(inv.flags.format, "table|csv|json", Format::kTable);
  // The configuration the row names is checked before the (slow) conversion.
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "snapshot");
  const Snapshot snap = load_snapshot(inv.snapshot_file);
  const SnapshotDevice& device =
      pick_snapshot_device(snap, inv.snapshot_device, inv.snapshot_file);
  const SnapshotPeaks peaks = analyze_snapshot(device, inv.snapshot_file);

  std::string text;
  if (format == Format::kTable) {
    text = render_table(snap, peaks);
  } else {
    const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
    const cli_common::Point p = cli_common::point_at(axes, 0);
    // Model size columns of the stated configuration, as actsim-harness fills them.
    const sim::Graph g =
        sim::build_graph(inputs.models.front(), p.setup, inputs.devices.front());
    sim::Result size;
    size.layers = g.n_blocks;
    size.params = g.params;
    size.params_per_rank = g.params_per_rank;
    const sim_io::Row row = snapshot_row(axes, inputs, p, size, peaks);
    if (format == Format::kCsv) {
      text = sim_io::csv_header() + sim_io::csv_row(row);
    } else {
      nlohmann::ordered_json obj;
      const auto fields = read_csv("row", sim_io::csv_row(row)).front().second;
      const auto& columns = sim_io::csv_columns();
      for (std::size_t i = 0; i < columns.size() && i < fields.size(); ++i)
        obj[columns[i]] = fields[i];
      const auto peak = [](const SnapshotPeak& pk) {
        return nlohmann::ordered_json{{"bytes", pk.bytes}, {"event", pk.event},
                                      {"time_us", pk.time_us}, {"phase", pk.phase},
                                      {"frame", pk.frame}};
      };
      nlohmann::ordered_json detail{{"file", snap.file},
                                    {"layout", snap.layout},
                                    {"cuda_device", peaks.device},
                                    {"events", peaks.events},
                                    {"duration_us", peaks.duration_us},
                                    {"allocated", peak(peaks.allocated)},
                                    {"requested", peak(peaks.requested)},
                                    {"reserved", peak(peaks.reserved)},
                                    {"start_allocated_bytes", peaks.start_allocated_bytes},
                                    {"start_reserved_bytes", peaks.start_reserved_bytes}};
      nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
      for (std::size_t i = 0; i < peaks.at_peak.size() && i < kLargestBlocks; ++i) {
        const LiveAtPeak& b = peaks.at_peak[i];
        blocks.push_back({{"allocated_bytes", b.allocated_bytes},
                          {"requested_bytes", b.requested_bytes},
                          {"event", b.since_event},
                          {"phase", b.phase},
                          {"frame", b.frame}});
      }
      detail["largest_at_peak"] = blocks;
      obj["snapshot"] = detail;
      text = obj.dump(2) + "\n";
    }
  }
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
