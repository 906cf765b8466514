// actsim compare --snapshot FILE [common flags]: a real step's PyTorch memory snapshot against the
// simulation of the configuration the flags name (issue 14): the peaks (allocated, requested,
// reserved) measured and simulated with the error, the step's phases side by side (measured
// from the frames' phase hints, simulated from the schedule; recompute counts as backward, as
// the autograd engine runs it), and the tensors live at both peaks matched (snapshot_compare.hpp)
// so that what actsim missed or invented is listed. --format csv writes the snapshot's row
// (source `snapshot`, keyed by the flags), the row `actsim validate` re-simulates.
#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/simulate.hpp"
#include "snapshot.hpp"
#include "snapshot_compare.hpp"
#include "snapshot_overlay.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using cli_common::Format;

constexpr std::size_t kListed = 10;  // rows of each unmatched list

std::string error_pct(int64_t predicted, int64_t measured) {
  if (measured <= 0) return "-";
  return fmt::format("{:+.1f} %", 100.0 * static_cast<double>(predicted - measured) /
                                      static_cast<double>(measured));
}

// The phase names of both sides: recompute runs inside the autograd engine's backward.
std::string aligned(sim::Phase p) {
  return p == sim::Phase::kRecompute ? "backward" : std::string(sim::phase_name(p));
}

struct Simulated {
  sim::Result result;
  std::string strategy;
  std::vector<SimTensor> tensors;
  std::map<std::string, int64_t> phase_peak;  // allocated bytes, by aligned phase
};

Simulated simulate(const cli_common::Axes& axes, const cli_common::Inputs& inputs,
                   const cli_common::Point& p) {
  if (p.setup.pp > 1 || p.setup.microbatches > 1)
    throw sim::Unsupported("--pp", "pp", "compare with a pipeline or several micro-batches");
  const sim::ModelConfig& model = inputs.models.front();
  const sim::Device& device = inputs.devices.front();
  const sim::Strategy& strategy = axes.strategies.front();
  sim::validate(device);
  const sim::Graph graph = sim::build_graph(model, p.setup, device);
  Simulated s;
  sim::Plan plan;
  s.strategy = strategy.canonical();
  if (strategy.kind == sim::StrategyKind::kBudget) {
    sim::BudgetPlan planned = sim::plan_budget(graph, device, strategy.k);
    plan = std::move(planned.plan);
    s.strategy = planned.strategy.canonical();
  } else {
    plan = sim::resolve(strategy, graph.n_blocks);
  }
  sim::SimOptions options;
  options.record_timeline = true;
  s.result = sim::simulate_plan(graph, plan, device, options);
  for (const sim::MemorySample& m : s.result.timeline) {
    int64_t& peak = s.phase_peak[aligned(m.phase)];
    peak = std::max(peak, m.allocated_bytes);
  }
  s.tensors = simulated_at_peak(graph, plan, s.result);
  return s;
}

std::string when_us(int64_t us) { return us < 0 ? std::string("-") : human_time_ns(us * 1000); }

}  // namespace

int cmd_compare(const Invocation& inv) {
  const Format format = cli_common::parse_format(inv.flags.format, "table|csv|json", Format::kTable);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "compare");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
  const cli_common::Point p = cli_common::point_at(axes, 0);
  const Simulated sim = simulate(axes, inputs, p);
  const Snapshot snap = load_snapshot(inv.snapshot_file);
  const SnapshotDevice& device = pick_snapshot_device(snap, inv.snapshot_device, inv.snapshot_file);
  const SnapshotPeaks peaks = analyze_snapshot(device, inv.snapshot_file);
  const TensorMatch match = match_tensors(sim.tensors, peaks.at_peak);

  std::string text;
  if (format == Format::kCsv) {
    text = sim_io::csv_header() + sim_io::csv_row(snapshot_row(axes, inputs, p, sim.result, peaks));
  } else if (format == Format::kJson) {
    using J = nlohmann::ordered_json;
    J obj{{"snapshot", snap.file},
          {"model", axes.models.front()},
          {"device", axes.devices.front()},
          {"strategy", sim.strategy}};
    obj["peaks"] = J{
        {"allocated", {{"measured", peaks.allocated.bytes}, {"simulated", sim.result.peak_allocated_bytes}}},
        {"requested", {{"measured", peaks.requested.bytes}, {"simulated", sim.result.peak_requested_bytes}}},
        {"reserved", {{"measured", peaks.reserved.bytes}, {"simulated", sim.result.peak_reserved_bytes}}}};
    J matched = J::array();
    for (const auto& [s, m] : match.matched)
      matched.push_back({{"bytes", sim.tensors[s].bytes}, {"simulated", sim.tensors[s].label},
                         {"block", sim.tensors[s].block},
                         {"measured_frame", peaks.at_peak[m].frame}});
    J sim_only = J::array();
    for (std::size_t s : match.simulated_only)
      sim_only.push_back({{"bytes", sim.tensors[s].bytes}, {"simulated", sim.tensors[s].label},
                          {"block", sim.tensors[s].block}, {"category", sim.tensors[s].category}});
    J measured_only = J::array();
    for (std::size_t m : match.measured_only)
      measured_only.push_back({{"bytes", peaks.at_peak[m].allocated_bytes},
                               {"frame", peaks.at_peak[m].frame},
                               {"phase", peaks.at_peak[m].phase}});
    obj["matched"] = matched;
    obj["simulated_only"] = sim_only;
    obj["measured_only"] = measured_only;
    text = obj.dump(2) + "\n";
  } else {
    const sim::Result& r = sim.result;
    text = fmt::format("Snapshot {} (CUDA device {}) against {} on {}, strategy {}\n",
                       snap.file, peaks.device, axes.models.front(), axes.devices.front(),
                       sim.strategy);
    text += fmt::format("  micro-batch {}, seq {}, {} allocator\n\n", p.setup.micro_batch,
                        p.setup.seq, sim::name(p.setup.allocator));
    TextTable t({"", "measured", "simulated", "error"}, "lrrr");
    const auto row = [&](const char* what, int64_t measured, int64_t simulated) {
      t.add({what, fmt::format("{}", Bytes{measured}), fmt::format("{}", Bytes{simulated}),
             error_pct(simulated, measured)});
    };
    row("peak allocated", peaks.allocated.bytes, r.peak_allocated_bytes);
    row("peak requested", peaks.requested.bytes, r.peak_requested_bytes);
    row("peak reserved", peaks.reserved.bytes, r.peak_reserved_bytes);
    text += t.render("  ");
    text += fmt::format("  measured peak in {}, simulated peak in {}\n",
                        peaks.allocated.phase.empty() ? std::string("?") : peaks.allocated.phase,
                        aligned(r.peak_phase));
    if (p.setup.allocator == sim::AllocatorKind::kExact)
      text += "  (simulated with --allocator exact: allocated and reserved are the exact ledger's;"
              " --allocator caching models PyTorch's allocator)\n";

    TextTable ph({"phase", "measured span", "simulated time", "measured peak", "simulated peak"},
                 "lrrrr");
    const std::map<std::string, int64_t> sim_time = {
        {"forward", r.fwd_time_ns},
        {"backward", r.bwd_time_ns + r.recompute_time_ns},
        {"optimizer", r.optimizer_time_ns}};
    for (const PhaseSpan& s : peaks.phases) {
      if (s.phase.empty()) continue;  // events without frames (segments): no phase to tell
      const std::string& name = s.phase;
      const auto st = sim_time.find(s.phase);
      const auto sp = sim.phase_peak.find(s.phase);
      ph.add({name,
              s.first_us < 0 ? fmt::format("events {}-{}", s.first_event, s.last_event)
                             : when_us(s.last_us - s.first_us),
              st == sim_time.end() ? "-" : human_time_ns(st->second),
              fmt::format("{}", Bytes{s.peak_allocated_bytes}),
              sp == sim.phase_peak.end() ? "-" : fmt::format("{}", Bytes{sp->second})});
    }
    text += "\nPhases (measured: from the frames of each event; simulated: recompute in backward)\n";
    text += ph.render("  ");

    int64_t matched_bytes = 0;  // simulated storages: their sum is the ledger's, within 64 bits
    for (const auto& [s, m] : match.matched) matched_bytes += sim.tensors[s].bytes;
    text += fmt::format(
        "\nTensors live at the peaks: {} matched ({}), {} simulated only, {} measured only\n",
        match.matched.size(), Bytes{matched_bytes}, match.simulated_only.size(),
        match.measured_only.size());
    std::vector<std::pair<int64_t, std::string>> items;
    for (std::size_t s : match.simulated_only)
      items.emplace_back(sim.tensors[s].bytes, sim.tensors[s].label);
    TextTable so({"bytes", "count", "simulated storage"}, "rrl");
    for (const auto& [bytes, n, label] : grouped_by_label(items, kListed))
      so.add({fmt::format("{}", Bytes{bytes}), fmt::format("{}", n), label});
    text += "\nSimulated only (no measured block of the same size: actsim invented it, or "
            "PyTorch laid it out differently)\n" + so.render("  ");
    items.clear();
    for (std::size_t m : match.measured_only)
      items.emplace_back(peaks.at_peak[m].allocated_bytes,
                         peaks.at_peak[m].frame.empty() ? "(no user frame)" : peaks.at_peak[m].frame);
    TextTable mo({"bytes", "count", "deepest user frame"}, "rrl");
    for (const auto& [bytes, n, label] : grouped_by_label(items, kListed))
      mo.add({fmt::format("{}", Bytes{bytes}), fmt::format("{}", n), label});
    text += "\nMeasured only (no simulated storage of the same size: actsim missed it)\n" +
            mo.render("  ");
  }
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
