// The Python package's C++ side without Python: keyword arguments arrive as the CLI's argument
// vector (python/actsim/__init__.py turns batch=4 into "--batch=4"), are parsed by the CLI's own
// parser (actsim_cli::parse_command_line), and the verbs' results come back as CSV rows split into
// fields, so every value a Python user sees is the text the CLI's CSV holds (DESIGN.md §7).
// Any flag the CLI gains (--impl, ...) is therefore a keyword argument with no change here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app.hpp"
#include "sweep.hpp"

namespace actsim_py {

// A command line the CLI refuses before any verb runs (unknown flag, missing --budget): what()
// is the CLI's one-line message, without the "actsim: error: " prefix.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One row of CSV schema v1 as its fields (csv_columns() order), the text the CLI writes.
using Fields = std::vector<std::string>;

// Splits one RFC 4180 line (as sim_io::csv_row writes it) into fields (actsim_cli::read_csv).
Fields split_csv_line(std::string_view line);

// Parses args = {"actsim", verb, "--flag=value", ...}; throws UsageError or sim::ConfigError.
actsim_cli::Invocation parse(const std::vector<std::string>& args);

// Folders searched for model and device names: $ACTSIM_MODELS, then <package>/models (the
// package's copy of models/, with devices/ in it), as sim_io::model_search_dirs lays them out.
std::vector<std::filesystem::path> search_dirs(const std::filesystem::path& package_dir);

// actsim run: every configuration's row; the first configuration that cannot be simulated throws
// its ConfigError, as the CLI's run does. Rows computed on `jobs` threads (0: all cores).
std::vector<Fields> run(const actsim_cli::Invocation& inv,
                        const std::vector<std::filesystem::path>& dirs);

// A CSV's header and rows (the valley CSV, plan's CSV: not schema v1 alone).
struct Table {
  std::vector<std::string> columns;
  std::vector<Fields> rows;
};

// actsim plan --format csv: the plan's row (its strategy the custom: spec), schema v1 then the
// implementation-settings columns (native_*), as the CLI writes it (actsim_cli::plan_output).
Table plan(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs);

// actsim valley --format csv: its header and rows (the valley CSV, not schema v1).
Table valley(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs);

// The largest storages live at one configuration's peak (the table `actsim run` prints).
struct PeakEntry {
  int64_t bytes = 0;
  int64_t count = 0;
  std::string category;
  int32_t block = -1;
  std::string what;
  std::string why;
};
std::vector<PeakEntry> explain_peak(const actsim_cli::Invocation& inv,
                                    const std::vector<std::filesystem::path>& dirs, int items);

// actsim models: each catalog file with what it loads to, or its error.
struct CatalogRow {
  std::string kind;  // "model" or "device"
  std::string name;
  std::string path;
  std::string error;  // empty when it loads
  std::string family, label;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, params = 0, hbm_bytes = 0;
  double peak_bf16_flops_per_s = 0, hbm_bytes_per_s = 0;
};
std::vector<CatalogRow> catalog(const std::vector<std::filesystem::path>& dirs);

// actsim sweep as a stream: a thread runs cli_common::run_sweep and hands rows, in configuration
// order, through a bounded queue; next() blocks for the following one. Destroying the stream
// cancels the sweep and joins its thread. next() and the destructor never touch Python: callers
// may release the GIL around them.
class SweepStream {
 public:
  SweepStream(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs);
  SweepStream(const SweepStream&) = delete;
  SweepStream& operator=(const SweepStream&) = delete;
  ~SweepStream();
  // The next row; false after the last. Rethrows what stopped the sweep.
  bool next(Fields& row);
  int64_t rows() const { return end_ - first_; }  // rows this stream delivers

 private:
  static constexpr std::size_t kQueueRows = 4096;  // rows held ahead of the reader
  cli_common::Axes axes_;
  cli_common::Inputs inputs_;
  cli_common::SweepOptions options_;
  int64_t first_ = 0, end_ = 0;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Fields> queue_;
  bool done_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace actsim_py
