#include "args.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "flags.hpp"
#include "sim/error.hpp"
#include "sweep.hpp"
#include "update.hpp"

namespace gui_app {

std::optional<int> parse_args(int argc, char** argv, GuiArgs& out) {
  CLI::App app{"actsim-gui: the memory valley, memory over the step, the op timeline, a fit map "
               "and a comparison of activation-checkpointing strategies"};
  cli_common::CommonFlags flags;
  flags.strategy = "none,full,selective";  // several at once: the GUI compares
  cli_common::FlagOptions options;
  options.output = false;
  cli_common::add_common_flags(app, flags, options);
  std::string view = gui::view_name(out.view);
  app.add_option("--screenshot", out.screenshot,
                 "render a few frames without interaction, save this PNG and exit")
      ->group("Headless");
  app.add_option("--width", out.width, "window width in pixels")
      ->check(CLI::Range(320, 8192))->capture_default_str()->group("Headless");
  app.add_option("--height", out.height, "window height in pixels")
      ->check(CLI::Range(240, 8192))->capture_default_str()->group("Headless");
  app.add_option("--view", view, "the view shown first: valley|memory|timeline|fitmap|compare")
      ->capture_default_str()->group("Headless");
  app.add_flag("--stacked", out.stacked, "memory view stacked by category (focused strategy)")
      ->group("Headless");
  app.add_flag("--fit-curves", out.fit_curves,
               "memory view: the y axis fits the curves instead of the device capacity")
      ->group("Headless");
  app.add_option("--snapshot", out.snapshot,
                 "a real step's PyTorch memory snapshot (torch.cuda.memory._dump_snapshot pickle, "
                 "or the converter's JSON), overlaid on the focused strategy's memory curve and "
                 "matched tensor by tensor in the comparison");
  std::string fit_x = "b", fit_y = "s";
  app.add_option("--fit-x", fit_x,
                 "fit map columns: KNOB[:LO:HI[:STEP]], KNOB b|s|tp|dp|zero|etp, powers of two "
                 "without STEP (e.g. tp:1:64, b:1:8:1)")
      ->capture_default_str()->group("Headless");
  app.add_option("--fit-y", fit_y, "fit map rows, as --fit-x (e.g. s:512:16k)")
      ->capture_default_str()->group("Headless");
  // gui_pp: which pipeline stage the memory and timeline views show (--pp > 1)
  app.add_option("--stage", out.stage,
                 "with --pp > 1 or --num-microbatches > 1: the stage whose graph and simulation the "
                 "memory and timeline views show (-1: each strategy's worst)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 20))->capture_default_str()->group("Headless");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "actsim-gui: error: %s\n", e.what());
    return 2;
  }
  try {
    const auto v = gui::parse_view(view);
    if (!v) throw sim::ConfigError("--view", view, "expected valley, memory, timeline, fitmap or compare");
    out.view = *v;
    const auto fx = gui::parse_fit_axis(fit_x), fy = gui::parse_fit_axis(fit_y);
    if (!fx) throw sim::ConfigError("--fit-x", fit_x, "expected KNOB[:LO:HI[:STEP]] with KNOB b, s, tp, dp, zero or etp");
    if (!fy) throw sim::ConfigError("--fit-y", fit_y, "expected KNOB[:LO:HI[:STEP]] with KNOB b, s, tp, dp, zero or etp");
    if (fx->knob == fy->knob) throw sim::ConfigError("--fit-y", fit_y, "must vary another knob than --fit-x");
    out.fit_x = *fx;
    out.fit_y = *fy;
    const cli_common::Axes axes = cli_common::parse_axes(flags);
    // The GUI edits one configuration: the first value of each list (strategies: all of them).
    cli_common::Axes first = axes;
    first.models.resize(1);
    first.devices.resize(1);
    out.dirs = cli_common::search_dirs();
    const cli_common::Inputs inputs = cli_common::load_inputs(first, out.dirs);
    out.model = inputs.models.front();
    out.model_label = first.models.front();
    out.device = inputs.devices.front();
    out.device_label = first.devices.front();
    out.setup = cli_common::point_at(axes, 0).setup;
    for (const sim::Strategy& s : axes.strategies) out.strategies.push_back(s.canonical());
    if (out.stage >= out.setup.pp)  // gui_pp
      throw sim::ConfigError("--stage", std::to_string(out.stage),
                             "must be below --pp (" + std::to_string(out.setup.pp) + " stages)");
    if (!out.snapshot.empty()) out.snapshot_data = gui::load_snapshot_data(out.snapshot);
  } catch (const sim::ConfigError& e) {
    std::fprintf(stderr, "actsim-gui: error: %s\n", e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace gui_app
