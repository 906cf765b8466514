// actsim sweep: every configuration of the flags' lists, simulated on all cores, written as CSV
// rows (or a JSON array) in configuration order to FILE.partial, flushed per row and renamed to
// FILE when complete. A configuration that cannot be simulated is a row with its error (exit 0);
// a bad flag, an unknown model or device file or an unwritable output is exit 2 with no file.
// SIGINT or SIGTERM stops it after a whole row: FILE is absent, FILE.partial holds the header and
// every row written, and --resume continues from there (exit 130 or 143). --shard i/N writes only
// the i-th of N contiguous row_index ranges.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sweep.hpp"
#include "sweep_file.hpp"

namespace actsim_cli {
namespace {

using Clock = std::chrono::steady_clock;

// A one-line progress bar with ETA, redrawn at most ten times a second on stderr. Callers create
// it only when stderr is a terminal, so pipes and logs never see it.
class ProgressBar {
 public:
  // `done`: rows already there (a resumed sweep); the ETA counts only this run's rate.
  ProgressBar(int64_t total, int64_t done)
      : total_(total), done_before_(done), start_(Clock::now()) {}

  void update(int64_t done) {
    const auto now = Clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = seconds(now);
    const double share = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(share * kWidth);
    std::string eta = "--";
    if (done > done_before_)
      eta = duration(elapsed / static_cast<double>(done - done_before_) *
                     static_cast<double>(total_ - done));
    fmt::print(stderr, "\r[{}{}] {}/{} {:3.0f} %  elapsed {}  ETA {}\x1b[K",
               std::string(static_cast<std::size_t>(filled), '#'),
               std::string(static_cast<std::size_t>(kWidth - filled), '.'), done, total_,
               share * 100, duration(elapsed), eta);
    std::fflush(stderr);
  }

  void finish(int64_t errors, const std::string& path) {
    fmt::print(stderr, "\r\x1b[K{} rows ({} with errors) in {} to {}\n", total_ - done_before_,
               errors, duration(seconds(Clock::now())), path.empty() ? "stdout" : path);
  }
  void clear() { fmt::print(stderr, "\r\x1b[K"); }

 private:
  double seconds(Clock::time_point now) const {
    return std::chrono::duration<double>(now - start_).count();
  }
  static std::string duration(double s) {
    if (s < 60) return fmt::format("{:.1f} s", s);
    const auto total = static_cast<int64_t>(s);
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  }

  int64_t total_;
  int64_t done_before_;
  Clock::time_point start_;
  Clock::time_point last_{};
};

// SIGINT and SIGTERM set a flag that the sweep polls; the handlers are reset on the first signal
// (SA_RESETHAND), so a second Ctrl-C kills at once. The previous handlers come back afterwards.
std::atomic<bool> g_interrupted{false};
volatile std::sig_atomic_t g_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

extern "C" void on_signal(int sig) {
  g_signal = sig;
  g_interrupted.store(true, std::memory_order_relaxed);
}

class SignalGuard {
 public:
  SignalGuard() {
    g_interrupted.store(false);
    g_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

int cmd_sweep(const Invocation& inv) {
  using cli_common::Format;
  const Format format = cli_common::parse_format(inv.flags.format, "csv|json", Format::kCsv);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  const int64_t total = cli_common::point_count(axes);
  cli_common::RowRange range{0, total};
  if (!inv.shard.empty()) {
    const auto [index, count] = cli_common::parse_shard(inv.shard);
    range = cli_common::shard_range(total, index, count);
  }
  if (format != Format::kCsv && (inv.resume || !inv.shard.empty()))
    throw sim::ConfigError(inv.resume ? "--resume" : "--shard", inv.flags.format,
                           "works with --format csv only");
  if (inv.resume && inv.flags.output.empty())
    throw sim::ConfigError("--resume", "-o", "missing: --resume continues FILE.partial of -o FILE");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());

  std::optional<ResumePoint> resume;
  if (inv.resume) resume = find_resume_point(inv.flags.output, axes, inputs, range);
  const bool append = resume && resume->keep_bytes > 0;
  Output out(inv.flags.output, append, append ? resume->keep_bytes : 0);
  const int64_t first = resume ? resume->next_row : range.first;

  std::optional<ProgressBar> progress;
  // Rows on the same terminal as the bar would tear it: then no bar.
  const bool rows_on_terminal = inv.flags.output.empty() && isatty(STDOUT_FILENO) != 0;
  if (isatty(STDERR_FILENO) != 0 && !rows_on_terminal)
    progress.emplace(range.end - range.first, first - range.first);

  if (!append) out.write(format == Format::kCsv ? sim_io::csv_header() : std::string("[\n"));
  int64_t errors = 0;
  SignalGuard signals;
  cli_common::SweepOptions options;
  options.jobs = inv.jobs;
  options.first = first;
  options.end = range.end;
  options.cancel = &g_interrupted;
  try {
    cli_common::run_sweep(axes, inputs, options, [&](const sim_io::Row& row) {
      if (!row.error.empty()) ++errors;
      if (format == Format::kCsv) {
        out.write(sim_io::csv_row(row));
      } else {
        out.write((row.row_index > 0 ? ",\n" : "") + sim_io::result_json(row));
      }
      out.flush();
      if (progress) progress->update(row.row_index + 1 - range.first);
    });
  } catch (const cli_common::Cancelled&) {
    if (progress) progress->clear();
    const int sig = g_signal != 0 ? static_cast<int>(g_signal) : SIGINT;
    if (inv.flags.output.empty() || format != Format::kCsv) {
      fmt::print(stderr, "actsim: interrupted; no output file written\n");
      return 128 + sig;  // Output's destructor removes FILE.partial
    }
    out.keep_partial();
    fmt::print(stderr,
               "actsim: interrupted; {} holds the header and every row written; run the same "
               "command with --resume to continue\n",
               out.partial_path());
    return 128 + sig;
  }
  if (format == Format::kJson) out.write("\n]\n");
  out.commit();
  if (progress) progress->finish(errors, inv.flags.output);
  return 0;
}

}  // namespace actsim_cli
