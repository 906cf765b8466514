#include "cuda_harness/timing.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "sim_io/output.hpp"

namespace cuda_harness {

sim::Phase PhaseTracker::forward_phase(int32_t op) {
  if (op < 0 || static_cast<size_t>(op) >= seen_.size())
    throw std::out_of_range("timing: op " + std::to_string(op) + " is not in the graph");
  if (seen_[static_cast<size_t>(op)]) return sim::Phase::kRecompute;
  seen_[static_cast<size_t>(op)] = 1;
  return sim::Phase::kForward;
}

TimingRow timing_row(const sim::Graph& g, int64_t row_index, int32_t op, sim::Phase phase,
                     int64_t measured_ns) {
  if (op < 0 || static_cast<size_t>(op) >= g.ops.size())
    throw std::out_of_range("timing: op " + std::to_string(op) + " is not in the graph");
  const sim::Op& o = g.ops[static_cast<size_t>(op)];
  const sim::OpCost& c = phase == sim::Phase::kBackward ? o.bwd : o.fwd;
  TimingRow r;
  r.row_index = row_index;
  r.op = op;
  r.kind = std::string(sim::op_kind_name(o.kind));
  r.block = o.block;
  r.phase = std::string(sim::phase_name(phase));
  r.name = o.name;
  r.flops = c.flops;
  r.bytes = c.bytes;
  r.kernels = c.kernels;
  // sim/src/engine.cpp kernel_ns: 16-bit peak unless the op is fp32 math or the regime is fp32.
  r.math16 = o.math16 && g.precision != sim::Precision::kFp32;
  r.measured_ns = measured_ns;
  return r;
}

TimingRow step_row(int64_t row_index, const std::vector<TimingRow>& calls, int64_t measured_ns) {
  TimingRow r;
  r.row_index = row_index;
  r.kind = "step";
  r.phase = "step";
  r.name = "step";
  for (const TimingRow& c : calls)
    if (c.row_index == row_index && c.op >= 0) {
      r.flops += c.flops;
      r.bytes += c.bytes;
    }
  r.measured_ns = measured_ns;
  return r;
}

int64_t elapsed_ns(float ms) {
  if (!(ms >= 0.0f) || !std::isfinite(ms)) throw std::domain_error("timing: bad event time");
  return std::llround(static_cast<double>(ms) * 1e6);
}

const std::vector<std::string>& timing_columns() {
  static const std::vector<std::string> cols = {
      "model", "precision", "attention", "batch", "seq",     "op",      "kind",       "block",
      "phase", "name",      "math16",    "flops", "bytes",   "kernels", "measured_ns"};
  return cols;
}

std::string timing_header() {
  std::string out;
  for (const std::string& c : timing_columns()) {
    if (!out.empty()) out += ',';
    out += c;
  }
  return out + '\n';
}

std::string timing_csv_row(const TimingRow& r) {
  std::string out = sim_io::csv_quote(r.model) + ',' + sim_io::csv_quote(r.precision) + ',' +
                    sim_io::csv_quote(r.attention) + ',' + std::to_string(r.batch) + ',' +
                    std::to_string(r.seq) + ',' + std::to_string(r.op) + ',' +
                    sim_io::csv_quote(r.kind) + ',' + std::to_string(r.block) + ',' +
                    sim_io::csv_quote(r.phase) + ',' + sim_io::csv_quote(r.name) + ',' +
                    (r.math16 ? "1" : "0") + ',' + std::to_string(r.flops) + ',' +
                    std::to_string(r.bytes) + ',' + std::to_string(r.kernels) + ',' +
                    std::to_string(r.measured_ns);
  return out + '\n';
}

}  // namespace cuda_harness
