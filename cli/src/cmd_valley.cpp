// actsim valley: for one model, set-up and device, peak memory against m evenly spaced checkpoints
// (DESIGN.md §4 "The valley"): Chen's unit-cost m + n/m, the model M(m) = m*c + ceil(n/m)*A +
// baseline, and the simulated peak of each plan, with m* and sqrt(n) marked.
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/valley.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

std::string render_csv(const std::string& model, const std::string& device,
                       const sim::Valley& v) {
  std::string out =
      "model,device,n,m,chen_units,model_bytes,simulated_bytes,step_time_ns,recompute_flops,"
      "is_m_star,is_m_star_simulated,is_sqrt_n,simulated_block_bytes\n";
  for (const sim::ValleyPoint& p : v.points) {
    // census12: model_bytes is empty where the closed form is refused (blocks differ)
    out += fmt::format("{},{},{},{},{:.6f},{},{},{},{},{},{},{},{}\n", sim_io::csv_quote(model),
                       sim_io::csv_quote(device), v.n, p.m, p.chen_units,
                       v.closed_form ? std::to_string(p.model_bytes) : std::string(),
                       p.simulated_bytes, p.step_time_ns, p.recompute_flops,
                       p.m == v.m_star ? 1 : 0, p.m == v.m_star_simulated ? 1 : 0,
                       p.m == v.sqrt_n ? 1 : 0, p.simulated_block_bytes);
  }
  return out;
}

std::string render_table(const std::string& model, const sim::Device& device,
                         const sim::TrainSetup& setup, const sim::Valley& v) {
  std::string out = fmt::format(
      "Valley of {} on {}: n = {} blocks, micro-batch {}, seq {}, {} profile, {}\n", model,
      device.name, v.n, setup.micro_batch, setup.seq, sim::name(setup.profile),
      sim::name(sim::resolved_precision(setup)));
  if (v.closed_form) {
    out += fmt::format(
        "  one checkpoint c = {} (a block's input), one block's activations A = {}, "
        "baseline {}\n",
        Bytes{v.c_bytes}, Bytes{v.a_bytes}, Bytes{v.baseline_bytes});
    out += fmt::format(
        "  Chen et al. assume c = A: m + n/m is least at sqrt(n) = {}; with these c and A, M(m) "
        "= m*c + ceil(n/m)*A + baseline is least at m* = {} (simulated: {})\n\n",
        v.sqrt_n, v.m_star, v.m_star_simulated);
  } else {  // census12: heterogeneous blocks
    out += fmt::format("  no closed form: {}; the simulated peaks stand alone (least at m = {})\n",
                       v.why, v.m_star_simulated);
    out += fmt::format("  Chen et al.'s m + n/m is least at sqrt(n) = {}\n\n", v.sqrt_n);
  }
  TextTable table({"m", "Chen m+n/m", "M(m)", "block phase", "simulated peak", "step time",
                   "recompute", ""},
                  "rrrrrrrl");
  for (const sim::ValleyPoint& p : v.points) {
    std::string marks;
    const auto mark = [&marks](bool on, const char* what) {
      if (!on) return;
      if (!marks.empty()) marks += ", ";
      marks += what;
    };
    mark(p.m == v.sqrt_n, "<- sqrt(n)");
    mark(p.m == v.m_star, p.m == v.sqrt_n ? "m* (model)" : "<- m* (model)");
    mark(p.m == v.m_star_simulated,
         p.m == v.sqrt_n || p.m == v.m_star ? "m* (simulated)" : "<- m* (simulated)");
    table.add({fmt::format("{}", p.m), fmt::format("{:.2f}", p.chen_units),
               v.closed_form ? fmt::format("{}", Bytes{p.model_bytes}) : std::string("-"),
               fmt::format("{}", Bytes{p.simulated_block_bytes}),
               fmt::format("{}", Bytes{p.simulated_bytes}),
               human_time_ns(p.step_time_ns), human_flops(p.recompute_flops), marks});
  }
  out += table.render("  ");
  // M(m) models the block phase only (the simulated "block phase" column: equal where m divides
  // n, M(m) - (m - n mod m) c otherwise, tests/test_valley.cpp). Where the step's peak is higher
  // it sits outside the blocks: in the head and loss (large vocabularies), where all m
  // checkpoints are live, or in the optimizer step. Say from which m on, so that m* (model) is
  // not read as the step's best m.
  int64_t outside_from = 0;
  for (const sim::ValleyPoint& p : v.points)
    if (p.simulated_bytes > p.simulated_block_bytes) {
      if (outside_from == 0) outside_from = p.m;
    } else {
      outside_from = 0;
    }
  if (outside_from > 0)
    out += fmt::format(
        "\n  From m = {} on, the step's peak sits outside the blocks (embedding, head and loss, or\n"
        "  the optimizer step), which M(m) does not model: there the simulated peak, not M(m),\n"
        "  says which m is best.\n",
        outside_from);
  out += fmt::format(
      "\n  m = {} is `full` (every block its own segment). Peaks are allocated bytes per GPU;\n"
      "  the {} offers {} to CUDA, before the CUDA context and communication buffers.\n",
      v.n, device.name, Bytes{device.hbm_bytes - device.driver_reserved_bytes});
  return out;
}

}  // namespace

int cmd_valley(const Invocation& inv) {
  using cli_common::Format;
  const Format format = cli_common::parse_format(inv.flags.format, "table|csv", Format::kTable);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "valley");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
  const cli_common::Point p = cli_common::point_at(axes, 0);
  const sim::Device& device = inputs.devices.front();
  const sim::Graph graph = sim::build_graph(inputs.models.front(), p.setup, device);
  const sim::Valley valley = sim::compute_valley(graph, device);

  const std::string text =
      format == Format::kCsv ? render_csv(axes.models.front(), axes.devices.front(), valley)
                             : render_table(axes.models.front(), device, p.setup, valley);
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
