// actsim sweep: every configuration of the flags' lists, simulated on all cores, written as CSV
// rows (or a JSON array) in configuration order to FILE.partial, flushed per row and renamed to
// FILE when complete. A configuration that cannot be simulated is a row with its error (exit 0);
// a bad flag, an unknown model or device file or an unwritable output is exit 2 with no file.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using Clock = std::chrono::steady_clock;

// A one-line progress bar with ETA, redrawn at most ten times a second on stderr. Callers create
// it only when stderr is a terminal, so pipes and logs never see it.
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total) : total_(total), start_(Clock::now()) {}

  void update(int64_t done) {
    const auto now = Clock::now();
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = seconds(now);
    const double share = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(share * kWidth);
    std::string eta = "--";
    if (done > 0) eta = duration(elapsed / static_cast<double>(done) *
                                 static_cast<double>(total_ - done));
    fmt::print(stderr, "\r[{}{}] {}/{} {:3.0f} %  elapsed {}  ETA {}\x1b[K",
               std::string(static_cast<std::size_t>(filled), '#'),
               std::string(static_cast<std::size_t>(kWidth - filled), '.'), done, total_,
               share * 100, duration(elapsed), eta);
    std::fflush(stderr);
  }

  void finish(int64_t errors, const std::string& path) {
    fmt::print(stderr, "\r\x1b[K{} rows ({} with errors) in {} to {}\n", total_, errors,
               duration(seconds(Clock::now())), path.empty() ? "stdout" : path);
  }

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
  Clock::time_point start_;
  Clock::time_point last_{};
};

}  // namespace

int cmd_sweep(const Invocation& inv) {
  using cli_common::Format;
  const Format format = cli_common::parse_format(inv.flags.format, "csv|json", Format::kCsv);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  const int64_t total = cli_common::point_count(axes);
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());

  Output out(inv.flags.output);
  std::optional<ProgressBar> progress;
  // Rows on the same terminal as the bar would tear it: then no bar.
  const bool rows_on_terminal = inv.flags.output.empty() && isatty(STDOUT_FILENO) != 0;
  if (isatty(STDERR_FILENO) != 0 && !rows_on_terminal) progress.emplace(total);

  out.write(format == Format::kCsv ? sim_io::csv_header() : std::string("[\n"));
  int64_t errors = 0;
  cli_common::run_sweep(axes, inputs, {inv.jobs, 0}, [&](const sim_io::Row& row) {
    if (!row.error.empty()) ++errors;
    if (format == Format::kCsv) {
      out.write(sim_io::csv_row(row));
    } else {
      out.write((row.row_index > 0 ? ",\n" : "") + sim_io::result_json(row));
    }
    out.flush();
    if (progress) progress->update(row.row_index + 1);
  });
  if (format == Format::kJson) out.write("\n]\n");
  out.commit();
  if (progress) progress->finish(errors, inv.flags.output);
  return 0;
}

}  // namespace actsim_cli
