// actsim trace: one configuration's step as a Chrome / Perfetto trace (sim_io/trace.hpp): op spans
// per stream and the memory counter. Open it in ui.perfetto.dev or chrome://tracing.
#include <fmt/format.h>

#include "commands.hpp"
#include "format.hpp"
#include "sim/planner.hpp"
#include "sim/simulate.hpp"
#include "sim_io/trace.hpp"
#include "sweep.hpp"

namespace actsim_cli {

int cmd_trace(const Invocation& inv) {
  cli_common::parse_format(inv.flags.format, "json", cli_common::Format::kJson);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "trace");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
  const cli_common::Point p = cli_common::point_at(axes, 0);
  const sim::Device& device = inputs.devices.front();
  const sim::Graph graph = sim::build_graph(inputs.models.front(), p.setup, device);
  const sim::Strategy strategy = sim::concrete_strategy(axes.strategies.front(), graph, device);
  const sim::Plan plan = sim::resolve(strategy, graph.n_blocks);
  sim::SimOptions options = cli_common::sim_options(axes);
  options.record_timeline = true;
  const sim::Result result = sim::simulate_plan(graph, plan, device, options);

  const std::string title = fmt::format("{} on {}, strategy {}, {} allocator",
                                        axes.models.front(), axes.devices.front(),
                                        strategy.canonical(),
                                        sim::name(p.setup.allocator));
  // Rendered before the output is opened; Output writes OUT.partial and renames it on commit.
  const std::string text = sim_io::trace_json(graph, result, title);
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
