// actsim calibrate's fit (cli/src/calibrate.hpp): timing tables made by the simulator's own time
// model (the engine's per-op spans) on a device with KNOWN efficiencies, with and without
// deterministic noise, must give those efficiencies back.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "sim_io/load.hpp"

namespace {

using actsim_cli::Efficiencies;
using actsim_cli::TimingRow;

std::vector<std::filesystem::path> dirs() { return {std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"}; }

// A device whose efficiencies and launch overhead are the known truth.
sim::Device truth_device() {
  sim::Device d = sim_io::load_device("h100-sxm", dirs());
  d.compute_efficiency = 0.62;
  d.memory_efficiency = 0.83;
  d.launch_overhead_ns = 4200;
  return d;
}

// Deterministic uniform noise in [-1, 1): a 64-bit LCG (Knuth MMIX constants), top 53 bits.
struct Lcg {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  double next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  }
};

// The engine's compute spans of one simulated step, as timing rows: each op's cost as the graph
// declares it (forward and recompute spans: Op::fwd; backward: Op::bwd) and the engine's
// duration times (1 + sigma u), u uniform in [-1, 1).
void append_rows(std::vector<TimingRow>& rows, const std::string& model, int64_t b, int64_t s,
                 sim::Precision prec, const sim::Device& dev, double sigma, Lcg& rng) {
  const sim::ModelConfig m = sim_io::load_model(model, dirs());
  sim::TrainSetup setup;
  setup.micro_batch = b;
  setup.seq = s;
  setup.precision = prec;
  setup.attention = sim::AttentionKind::kStandard;  // the rows say so (attention kernels have
                                                    // their own curves, not the roofline)
  const sim::Strategy st = sim::parse_strategy("full");  // recompute spans too
  sim::SimOptions opt;
  opt.record_timeline = true;
  const sim::Result r = sim::simulate(m, setup, dev, st, opt);
  const sim::Graph g = sim::build_graph(m, setup, dev);
  for (const sim::OpSpan& sp : r.spans) {
    if (sp.stream != 0 || sp.op < 0 || sp.op >= static_cast<int32_t>(g.ops.size())) continue;
    const sim::Op& op = g.ops[static_cast<size_t>(sp.op)];
    const bool bwd = sp.phase == sim::Phase::kBackward;
    const sim::OpCost& c = bwd ? op.bwd : op.fwd;
    TimingRow t;
    t.model = model;
    t.precision = std::string(sim::name(prec));
    t.attention = "standard";
    t.batch = b;
    t.seq = s;
    t.op = sp.op;
    t.kind = std::string(sim::op_kind_name(op.kind));
    t.block = op.block;
    t.phase = bwd ? "backward" : sp.phase == sim::Phase::kRecompute ? "recompute" : "forward";
    t.name = op.name;
    t.math16 = op.math16 && prec != sim::Precision::kFp32;
    t.flops = c.flops;
    t.bytes = c.bytes;
    t.kernels = c.kernels;
    t.shape_efficiency = sim::shape_efficiency(op, bwd, dev);
    t.measured_ns = std::llround(static_cast<double>(sp.duration_ns) * (1.0 + sigma * rng.next()));
    rows.push_back(t);
  }
}

std::vector<TimingRow> grid(const sim::Device& dev, double sigma) {
  Lcg rng;
  std::vector<TimingRow> rows;
  // Small shapes (launch-bound elementwise ops) and large ones (compute-bound matmuls), 16-bit
  // and fp32 peaks: every parameter is identified.
  append_rows(rows, "gpt2-small", 1, 128, sim::Precision::kBf16Amp, dev, sigma, rng);
  append_rows(rows, "gpt2-small", 8, 1024, sim::Precision::kBf16Amp, dev, sigma, rng);
  append_rows(rows, "llama-2-7b", 1, 2048, sim::Precision::kBf16Amp, dev, sigma, rng);
  append_rows(rows, "gpt2-medium", 4, 512, sim::Precision::kFp32, dev, sigma, rng);
  return rows;
}

}  // namespace

TEST_CASE("calibrate: roofline_ns is the engine's duration for the engine's own efficiencies") {
  const sim::Device dev = truth_device();
  const std::vector<TimingRow> rows = grid(dev, 0.0);
  REQUIRE(rows.size() > 1000);
  const Efficiencies e{dev.compute_efficiency, dev.memory_efficiency,
                       static_cast<double>(dev.launch_overhead_ns)};
  for (const TimingRow& r : rows)  // the engine rounds once to whole nanoseconds
    REQUIRE(std::abs(actsim_cli::roofline_ns(r, dev, e) - static_cast<double>(r.measured_ns)) <= 0.5 + 1e-6);
}

TEST_CASE("calibrate: exact timings give the efficiencies back") {
  const sim::Device truth = truth_device();
  sim::Device start = truth;  // the fit must not depend on the device file's old values
  start.compute_efficiency = 0.8;
  start.memory_efficiency = 0.9;
  start.launch_overhead_ns = 3000;
  const actsim_cli::FitReport rep = actsim_cli::fit_efficiencies(grid(truth, 0.0), start, "synthetic");
  REQUIRE(rep.compute_fitted);
  REQUIRE(rep.memory_fitted);
  REQUIRE(rep.compute_bound > 100);
  REQUIRE(rep.memory_bound > 100);
  // Only the engine's rounding to whole nanoseconds perturbs the table: relative 0.5 ns / t,
  // under 1e-4 for every op of 5 us and more, and the launch term is 4,200 ns per op.
  CHECK(rep.fit.compute == doctest::Approx(truth.compute_efficiency).epsilon(1e-4));
  CHECK(rep.fit.memory == doctest::Approx(truth.memory_efficiency).epsilon(1e-4));
  CHECK(rep.fit.launch_ns == doctest::Approx(4200).epsilon(1e-4));
  CHECK(rep.rms_rel_error < 1e-4);
}

TEST_CASE("calibrate: noisy timings give the efficiencies back within the noise's standard error") {
  const sim::Device truth = truth_device();
  const double sigma = 0.05;  // +-5 % multiplicative, uniform
  const std::vector<TimingRow> rows = grid(truth, sigma);
  const actsim_cli::FitReport rep = actsim_cli::fit_efficiencies(rows, truth, "synthetic");
  // The relative residuals are the noise u_i sigma, of standard deviation sd = sigma / sqrt(3).
  // Linearized at the truth (x = 1/compute eff., y = 1/memory eff., launch l), residual i has
  // gradient J_i = (a_i or 0, 0 or b_i, k_i) / t_i, and the least-squares estimate has the
  // covariance sd^2 (J^T J)^-1 (Gauss-Markov). Allow 5 standard errors per parameter.
  const sim::Device& d = truth;
  double jtj[3][3] = {};
  for (const TimingRow& r : rows) {
    if (r.measured_ns == 0 || (r.flops == 0 && r.bytes == 0)) continue;
    const double peak = r.math16 ? d.peak_bf16_flops_per_s : d.peak_fp32_flops_per_s;
    const double a = static_cast<double>(r.flops) / peak * 1e9;
    const double b = static_cast<double>(r.bytes) / d.hbm_bytes_per_s * 1e9;
    const bool cb = a / d.compute_efficiency >= b / d.memory_efficiency;
    const double t = static_cast<double>(r.measured_ns);
    const double u[3] = {cb ? a / t : 0, cb ? 0 : b / t, static_cast<double>(r.kernels) / t};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) jtj[i][j] += u[i] * u[j];
  }
  const double det = jtj[0][0] * (jtj[1][1] * jtj[2][2] - jtj[1][2] * jtj[2][1]) -
                     jtj[0][1] * (jtj[1][0] * jtj[2][2] - jtj[1][2] * jtj[2][0]) +
                     jtj[0][2] * (jtj[1][0] * jtj[2][1] - jtj[1][1] * jtj[2][0]);
  REQUIRE(det > 0);
  auto minor = [&](int i) {  // cofactor of the diagonal element i
    const int p = (i + 1) % 3, q = (i + 2) % 3;
    return jtj[p][p] * jtj[q][q] - jtj[p][q] * jtj[q][p];
  };
  const double sd = sigma / std::sqrt(3.0);
  const double se_x = sd * std::sqrt(minor(0) / det), se_y = sd * std::sqrt(minor(1) / det),
               se_l = sd * std::sqrt(minor(2) / det);
  // Relative errors (of 1/x as of x, to first order), plus the weighting's bias: the residuals
  // are divided by the noisy measurement t(1 + e), so r = -e / (1 + e) = -e + e^2 - ..., whose
  // mean is E[e^2] = sd^2, not 0: the fitted scale shifts by about sd^2 (relative).
  const double bias = sd * sd;
  const double tol_c = 5 * se_x * truth.compute_efficiency + bias;
  const double tol_m = 5 * se_y * truth.memory_efficiency + bias;
  const double tol_l = 5 * se_l / 4200.0 + bias;
  INFO(fmt::format("fit {} {} {} rows {} C {} M {}; tolerances {} {} {}", rep.fit.compute,
                   rep.fit.memory, rep.fit.launch_ns, rep.rows, rep.compute_bound,
                   rep.memory_bound, tol_c, tol_m, tol_l));
  CHECK(std::abs(rep.fit.compute / truth.compute_efficiency - 1) < tol_c);
  CHECK(std::abs(rep.fit.memory / truth.memory_efficiency - 1) < tol_m);
  CHECK(std::abs(rep.fit.launch_ns / 4200.0 - 1) < tol_l);
  // The residual is the noise: RMS sigma / sqrt(3) within 10 %.
  CHECK(rep.rms_rel_error == doctest::Approx(sd).epsilon(0.1));
}

TEST_CASE("calibrate: a table faster than the device's peak is refused") {
  sim::Device truth = truth_device();
  std::vector<TimingRow> rows = grid(truth, 0.0);
  for (TimingRow& r : rows) r.flops *= 4;  // FLOPs overstated: compute efficiency 2.48
  CHECK_THROWS_WITH_AS(actsim_cli::fit_efficiencies(rows, truth, "t.csv"),
                       doctest::Contains("compute_efficiency"), sim::ConfigError);
}

TEST_CASE("calibrate: timing table parsing") {
  const std::string head =
      "model,precision,attention,batch,seq,op,kind,block,phase,name,math16,flops,bytes,kernels,"
      "measured_ns\n";
  const auto rows = actsim_cli::parse_timing_table(
      "t.csv", head + "gpt2-small,bf16-amp,standard,1,128,4,linear,0,forward,qkv,1,10,20,1,300\n");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].grid_key() == "gpt2-small,bf16-amp,standard,1,128");
  CHECK(rows[0].flops == 10);
  CHECK(rows[0].line == 2);
  auto bad = [&](const std::string& text, const char* what) {
    CHECK_THROWS_WITH_AS(actsim_cli::parse_timing_table("t.csv", text), doctest::Contains(what),
                         sim::ConfigError);
  };
  bad("model,op\nx,1\n", "precision");
  bad(head, "no rows");
  bad(head + "m,bf16-amp,standard,1,128,4,linear,0,forward,qkv,1,10,20,1,-3\n", "measured_ns");
  bad(head + "m,bf16-amp,standard,1,128,4,linear,0,sideways,qkv,1,10,20,1,3\n", "phase");
  bad(head + "m,bf16-amp,standard,1,128,4,linear,0,forward,qkv,2,10,20,1,3\n", "math16");
  bad(head + "m,bf16-amp,standard,1,12x,4,linear,0,forward,qkv,1,10,20,1,3\n", "seq");
  bad(head + "m,bf16-amp,standard,1,128,4,linear,0,forward,qkv,1,10,20,1\n", "fields");
}

TEST_CASE("calibrate: the engine times each op kind with its own efficiencies when given") {
  const sim::Device base = truth_device();
  sim::Device slow = base;
  slow.kind_efficiencies = {{"linear", base.compute_efficiency / 2, base.memory_efficiency}};
  const std::vector<TimingRow> a = grid(base, 0.0), b = grid(slow, 0.0);
  REQUIRE(a.size() == b.size());
  int64_t slower = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].name == b[i].name);
    const double fa = static_cast<double>(a[i].flops) / (a[i].math16 ? base.peak_bf16_flops_per_s
                                                                      : base.peak_fp32_flops_per_s);
    const double ma = static_cast<double>(a[i].bytes) / base.hbm_bytes_per_s;
    const bool compute_bound = fa / base.compute_efficiency > ma / base.memory_efficiency;
    if (a[i].kind == "linear" && compute_bound) {
      // at half the efficiency the compute term doubles (and still dominates)
      const double want = 2 * (static_cast<double>(a[i].measured_ns) -
                               static_cast<double>(base.launch_overhead_ns * a[i].kernels)) +
                          static_cast<double>(base.launch_overhead_ns * a[i].kernels);
      CHECK(std::abs(static_cast<double>(b[i].measured_ns) - want) <= 1.0);
      ++slower;
    } else if (a[i].kind != "linear") {
      CHECK(b[i].measured_ns == a[i].measured_ns);
    }
  }
  CHECK(slower > 100);
}

TEST_CASE("calibrate: per-kind efficiencies are recovered from the engine's own timings") {
  sim::Device truth = truth_device();
  truth.kind_efficiencies = {{"bmm", 0.41, 0.77}, {"linear", 0.71, 0.66}, {"softmax", 0.62, 0.52}};
  const std::vector<TimingRow> rows = grid(truth, 0.0);
  const actsim_cli::FitReport rep = actsim_cli::fit_efficiencies(rows, truth_device(), "t", 8);
  CHECK(rep.by_kind_launch_ns == doctest::Approx(4200).epsilon(1e-4));
  CHECK(rep.by_kind_rms_rel_error < 1e-4);
  int checked = 0;
  for (const actsim_cli::KindFit& k : rep.kinds) {
    INFO(k.kind);
    if (k.rows < 8) {
      CHECK(!k.fitted);
      continue;
    }
    REQUIRE(k.fitted);
    double c = truth.compute_efficiency, m = truth.memory_efficiency;
    for (const sim::KindEfficiency& e : truth.kind_efficiencies)
      if (e.kind == k.kind) c = e.compute_efficiency, m = e.memory_efficiency;
    // A kind whose rows are all memory-bound does not determine its compute side (and the
    // reverse): that side reports the device-wide fit. linear and bmm have both.
    if (k.kind == "linear" || k.kind == "bmm") CHECK(k.compute == doctest::Approx(c).epsilon(1e-3));
    if (k.kind != "linear") CHECK(k.memory == doctest::Approx(m).epsilon(1e-3));
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("calibrate: device files with a per-kind table") {
  std::ifstream in(std::filesystem::path(ACTSIM_SOURCE_DIR) / "models" / "devices" / "h100-sxm.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::ordered_json base = nlohmann::ordered_json::parse(ss.str());
  auto with = [&](const nlohmann::ordered_json& table, bool provenance) {
    nlohmann::ordered_json doc = base;
    doc["efficiency_by_kind"] = table;
    if (provenance) doc["provenance"]["efficiency_by_kind"] = "test";
    return doc.dump(2);
  };
  const nlohmann::ordered_json good = {{"bmm", {{"compute_efficiency", 0.4}, {"memory_efficiency", 0.7}}},
                                       {"linear", {{"compute_efficiency", 0.75}, {"memory_efficiency", 0.8}}}};
  const sim::Device d = sim_io::parse_device(with(good, true), "h100-sxm", "d.json");
  REQUIRE(d.kind_efficiencies.size() == 2);
  CHECK(d.kind_efficiencies[0] == sim::KindEfficiency{"bmm", 0.4, 0.7});
  CHECK(d.kind_efficiencies[1] == sim::KindEfficiency{"linear", 0.75, 0.8});
  CHECK(sim_io::parse_device(base.dump(2), "h100-sxm", "d.json").kind_efficiencies.empty());
  auto bad = [&](const std::string& text, const char* what) {
    CHECK_THROWS_WITH_AS(sim_io::parse_device(text, "h100-sxm", "d.json"), doctest::Contains(what),
                         sim::ConfigError);
  };
  bad(with(good, false), "efficiency_by_kind: no provenance");
  bad(with({{"matmul", {{"compute_efficiency", 0.4}, {"memory_efficiency", 0.7}}}}, true),
      "efficiency_by_kind.matmul: not an op kind");
  bad(with({{"bmm", {{"compute_efficiency", 1.4}, {"memory_efficiency", 0.7}}}}, true),
      "efficiency_by_kind.bmm: efficiencies must be in (0, 1]");
  bad(with({{"bmm", {{"compute_efficiency", 0.4}}}}, true),
      "efficiency_by_kind.bmm.memory_efficiency: missing");
  bad(with({{"bmm", {{"compute_efficiency", 0.4}, {"memory_efficiency", 0.7}, {"x", 1}}}}, true),
      "efficiency_by_kind.bmm.x: unknown key");
  bad(with(7, true), "efficiency_by_kind: expected an object");
}
