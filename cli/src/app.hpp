// The actsim command line: verbs, parsing (callable from tests with an argument vector) and the
// exit-status contract (DESIGN.md §7): 0 ok, 2 bad input (one line "actsim: error: ..." on
// stderr, no output file), 1 unexpected internal error; validate: 3 when a row's error exceeds
// the tolerance.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flags.hpp"

namespace actsim_cli {

enum class Verb : uint8_t { kRun, kSweep, kValley, kTrace, kModels, kMerge, kValidate, kPlan, kCalibrate,
                          kSnapshot, kCompare };

// actsim calibrate's own flags (cmd_calibrate.cpp); -o is flags.output.
struct CalibrateFlags {
  std::vector<std::string> tables;  // per-op timing tables
  std::string device = "h100-sxm";  // the device file to start from
  std::string validation_grid;      // the measured CSV actsim validate checks: refused grid points
  std::string provenance;           // where and when the tables were measured (GPU, date)
  bool in_place = false;            // rewrite the device file itself
  int64_t min_kind_rows = 8;        // --by-kind: rows a kind needs for its own efficiencies (0: none)
};

// A parsed command line, ready to run.
struct Invocation {
  Verb verb = Verb::kRun;
  cli_common::CommonFlags flags;
  int jobs = 0;  // sweep --jobs; 0: every hardware thread
  bool resume = false;  // sweep --resume: continue FILE.partial
  std::string shard;    // sweep --shard i/N; empty: the whole sweep
  std::vector<std::string> parts;   // merge: the files to join
  std::optional<int64_t> rows;      // merge --rows: the unsharded sweep's row count
  std::string validate_file;  // validate: the measured CSV
  double tolerance = 1.0;     // validate --tolerance, percent (0: exact)
  bool tolerance_given = false;  // validate: --tolerance was typed (else per-figure defaults)
  std::string budget;  // plan --budget, as typed (sim::parse_bytes)
  std::string validate_device;  // validate --device: re-simulate every row on this device
  CalibrateFlags calibrate;   // calibrate
  std::string snapshot_file;     // snapshot, compare --snapshot: the PyTorch snapshot (.pickle,
                                 // or the converter's .json)
  int64_t snapshot_device = -1;  // --cuda-device; -1: the first device with a trace
};

// What parsing gave: an invocation, or text to print with an exit status (help, usage errors).
struct Parsed {
  std::optional<Invocation> invocation;
  int exit_code = 0;    // without an invocation: 0 after --help/--version, 2 after a usage error
  std::string message;  // help text (for stdout) or the one-line error (for stderr)
};

Parsed parse_command_line(int argc, const char* const* argv);
// args[0] is the program name. Builds an argv: CLI11 2.1's parse(vector) wants reversed order.
Parsed parse_command_line(const std::vector<std::string>& args);

// Runs a parsed invocation; throws sim::ConfigError for bad input.
int run_invocation(const Invocation& invocation);

// The whole program: parse, run, report. Returns the exit status.
int actsim_main(int argc, const char* const* argv);

}  // namespace actsim_cli
