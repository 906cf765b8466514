#include "app.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <sstream>

#include "commands.hpp"
#include "sim/error.hpp"

namespace actsim_cli {
namespace {

// The parser, bound to `inv`. Each verb's subcommand binds the same CommonFlags: one verb runs.
void build_app(CLI::App& app, Invocation& inv, Verb& verb) {
  app.name("actsim");
  app.description(
      "actsim: peak memory, recompute cost and fit of one transformer training step under an\n"
      "activation-checkpointing strategy, simulated op by op.");
  app.set_version_flag("--version", "actsim 0.1.0");
  app.require_subcommand(1);

  CLI::App* run = app.add_subcommand(
      "run", "simulate each configuration and print its memory, time and fit; a configuration "
             "that cannot be simulated is an error (sweep makes it a row instead)");
  cli_common::add_common_flags(*run, inv.flags, {true, true, "table|csv|json (default table)"});
  run->callback([&verb] { verb = Verb::kRun; });

  CLI::App* sweep = app.add_subcommand(
      "sweep", "simulate every configuration of the flags' lists on all cores, as CSV rows");
  cli_common::add_common_flags(*sweep, inv.flags, {true, true, "csv|json (default csv)"});
  sweep->add_option("-j,--jobs", inv.jobs, "worker threads (default: every hardware thread)")
      ->check(CLI::NonNegativeNumber);
  sweep->add_flag("--resume", inv.resume,
                  "continue -o FILE's FILE.partial (left by an interrupted sweep with the same "
                  "flags) from its last whole row; without one, start afresh");
  sweep->add_option("--shard", inv.shard,
                    "i/N: only the i-th of N contiguous row_index ranges (1-based); join the "
                    "parts with actsim merge");
  sweep->callback([&verb] { verb = Verb::kSweep; });

  CLI::App* valley = app.add_subcommand(
      "valley", "peak memory against m evenly spaced checkpoints (Chen's m + n/m and the real one)");
  cli_common::add_common_flags(*valley, inv.flags, {false, true, "table|csv (default table)"});
  valley->callback([&verb] { verb = Verb::kValley; });

  CLI::App* trace = app.add_subcommand(
      "trace", "one configuration's step as a Chrome/Perfetto trace (JSON): op spans per stream "
               "and the memory counter; open it in ui.perfetto.dev");
  cli_common::add_common_flags(*trace, inv.flags, {true, true, "json (the only one)"});
  trace->callback([&verb] { verb = Verb::kTrace; });

  CLI::App* merge = app.add_subcommand(
      "merge", "join the CSV files of a sharded sweep (sweep --shard) into the unsharded sweep's "
               "file, refusing gaps, overlaps and different headers");
  merge->add_option("parts", inv.parts, "the parts' CSV files, in any order")->required();
  merge->add_option("-o,--output", inv.flags.output, "write to FILE (default: stdout)");
  merge->add_option("--rows", inv.rows,
                    "the unsharded sweep's number of rows: refuse parts that end early")
      ->check(CLI::NonNegativeNumber);
  merge->callback([&verb] { verb = Verb::kMerge; });
  CLI::App* plan = app.add_subcommand(
      "plan", "the plan with the least recompute time whose simulated peak fits --budget "
              "(per block: store, selective, sac:mm, offload, offload+full or checkpointed segments), "
              "beside the best "
              "fixed strategy that fits");
  cli_common::add_common_flags(*plan, inv.flags, {false, true, "table|csv|json (default table)"});
  plan->add_option("--budget", inv.budget,
                   "peak memory per GPU: bytes, or with KiB/MiB/GiB/TiB, e.g. 60GiB")
      ->required();
  plan->callback([&verb] { verb = Verb::kPlan; });

  CLI::App* models = app.add_subcommand("models", "list the models and devices names resolve to");
  models->callback([&verb] { verb = Verb::kModels; });

  CLI::App* validate = app.add_subcommand(
      "validate", "re-simulate each row of a measured CSV (actsim-harness, the PyTorch reference) "
                  "and print predicted, measured and error; exit 3 when an error exceeds the "
                  "tolerance");
  validate->add_option("file", inv.validate_file, "the measured CSV (schema v1)")->required();
  CLI::Option* tolerance =
      validate
          ->add_option("--tolerance", inv.tolerance,
                       "largest |error| in percent, every row; 0: exact. Default: 1, and for "
                       "published rows per figure: allocated 3, reserved 7, nvidia-smi 6")
          ->capture_default_str();
  validate->add_option("--device", inv.validate_device,
                       "re-simulate every row on this device (name or file) instead of the "
                       "row's, e.g. one actsim calibrate wrote");
  validate->add_option("--format", inv.flags.format,
                       "table (default) or csv: one record per row with its model family, "
                       "implementation, figure and error (scripts/error_bands.py reads them)");
  validate->add_option("-o,--output", inv.flags.output, "write to this file instead of stdout");
  validate->callback([&verb, &inv, tolerance] {
    verb = Verb::kValidate;
    inv.tolerance_given = tolerance->count() > 0;
  });

  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "fit a device's compute and memory efficiencies and launch overhead to per-op "
                   "timing tables (CUDA harness, torch_reference.py --profile) and write them, "
                   "with their provenance, into a device file");
  calibrate->add_option("tables", inv.calibrate.tables, "timing tables (harness/README.md)")
      ->required();
  calibrate->add_option("--device", inv.calibrate.device, "device file to start from")
      ->capture_default_str();
  calibrate->add_option("--validation-grid", inv.calibrate.validation_grid,
                        "the measured CSV actsim validate checks: its grid points are refused")
      ->required();
  calibrate->add_option("--provenance", inv.calibrate.provenance,
                        "where and when the tables were measured (GPU, date)")
      ->required();
  calibrate->add_option("-o,--output", inv.flags.output, "new device file (must not exist)");
  calibrate->add_flag("--in-place", inv.calibrate.in_place, "rewrite the device file itself");
  calibrate->add_option("--by-kind", inv.calibrate.min_kind_rows,
                        "rows an op kind needs for efficiencies of its own (0: one pair for all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  calibrate->callback([&verb] { verb = Verb::kCalibrate; });

  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot): the "
                  "measured peaks, when they happen, and the largest blocks live at the peak; "
                  "csv/json: a row of the CSV schema (source snapshot) keyed by the common flags");
  snapshot->add_option("file", inv.snapshot_file, "the snapshot pickle (or its converted .json)")
      ->required();
  snapshot->add_option("--cuda-device", inv.snapshot_device,
                       "the CUDA device whose trace is read (default: the first with one)")
      ->check(CLI::NonNegativeNumber);
  cli_common::add_common_flags(*snapshot, inv.flags, {true, true, "table|csv|json (default table)"});
  snapshot->callback([&verb] { verb = Verb::kSnapshot; });

  CLI::App* compare = app.add_subcommand(
      "compare", "a PyTorch memory snapshot against the simulated step of the common flags' "
                 "configuration: peaks measured and simulated, phases side by side, and the "
                 "tensors live at both peaks matched (the rest listed as missed or invented)");
  compare->add_option("--snapshot", inv.snapshot_file,
                      "the snapshot pickle (or its converted .json)")
      ->required();
  compare->add_option("--cuda-device", inv.snapshot_device,
                      "the CUDA device whose trace is read (default: the first with one)")
      ->check(CLI::NonNegativeNumber);
  cli_common::add_common_flags(*compare, inv.flags, {true, true, "table|csv|json (default table)"});
  compare->callback([&verb] { verb = Verb::kCompare; });
}

}  // namespace

Parsed parse_command_line(int argc, const char* const* argv) {
  Invocation inv;
  Verb verb = Verb::kRun;
  CLI::App app;
  build_app(app, inv, verb);
  Parsed parsed;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out;
    std::ostringstream err;
    parsed.exit_code = app.exit(e, out, err);
    if (parsed.exit_code == 0) {
      parsed.message = out.str();
    } else {
      parsed.exit_code = 2;
      parsed.message = e.get_name() == "RequiredError" && app.get_subcommands().empty()
                           ? "a verb is required: run, sweep, merge, valley, plan, trace, models, validate, calibrate, snapshot or compare (see --help)"
                           : e.what();
    }
    return parsed;
  }
  inv.verb = verb;
  parsed.invocation = std::move(inv);
  return parsed;
}

Parsed parse_command_line(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return parse_command_line(static_cast<int>(args.size()), argv.data());
}

int run_invocation(const Invocation& inv) {
  switch (inv.verb) {
    case Verb::kRun: return cmd_run(inv);
    case Verb::kSweep: return cmd_sweep(inv);
    case Verb::kValley: return cmd_valley(inv);
    case Verb::kTrace: return cmd_trace(inv);
    case Verb::kModels: return cmd_models(inv);
    case Verb::kMerge: return cmd_merge(inv);
    case Verb::kValidate: return cmd_validate(inv);
    case Verb::kPlan: return cmd_plan(inv);
    case Verb::kCalibrate: return cmd_calibrate(inv);
    case Verb::kSnapshot: return cmd_snapshot(inv);
    case Verb::kCompare: return cmd_compare(inv);
  }
  return 1;
}

int actsim_main(int argc, const char* const* argv) {
  try {
    const Parsed parsed = parse_command_line(argc, argv);
    if (!parsed.invocation) {
      if (parsed.exit_code == 0) {
        std::fputs(parsed.message.c_str(), stdout);
      } else {
        fmt::print(stderr, "actsim: error: {}\n", parsed.message);
      }
      return parsed.exit_code;
    }
    return run_invocation(*parsed.invocation);
  } catch (const sim::ConfigError& e) {
    fmt::print(stderr, "actsim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "actsim: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace actsim_cli
