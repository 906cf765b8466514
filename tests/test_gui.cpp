// The GUI without a window (DESIGN.md §8, STYLE.md rule 11): its model layer (re-simulation,
// categories, phases, comparison, worker) against the simulator, and a windowless smoke test that
// draws every panel and view on three models and all strategies with Dear ImGui's null loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include <unistd.h>

#include "categories.hpp"
#include "compare.hpp"
#include "fit_axes.hpp"
#include "fitmap.hpp"
#include "impl_fields.hpp"  // polish
#include "jobs.hpp"
#include "phases.hpp"
#include "session.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/planner.hpp"
#include "sim/valley.hpp"
#include "snapshot_overlay.hpp"
#include "sim_io/load.hpp"
#include "sim_io/output.hpp"
#include "update.hpp"
#include "windowless.hpp"

namespace {

const std::vector<std::filesystem::path>& dirs() {
  static const std::vector<std::filesystem::path> d{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
  return d;
}

const std::vector<std::string> kAllStrategies{"none", "full", "every:4", "sqrt", "selective", "sac:mm"};

gui::AppState state_for(const std::string& model, const std::vector<std::string>& strategies,
                        int64_t seq = 1024, int64_t tp = 1) {
  sim::TrainSetup setup;
  setup.seq = seq;
  setup.tp = tp;
  return gui::make_state(gui::make_catalog(dirs()), sim_io::load_model(model, dirs()), model, setup,
                         sim_io::load_device("h100-sxm", dirs()), "h100-sxm", strategies);
}

// Updates until every strategy is simulated and the worker is done (or 20 s passed).
void settle(gui::AppState& st, gui::Worker& worker) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    gui::update(st, worker, 1e9);
    if (st.stats.pending == 0 && worker.idle() && st.valley && st.fitmap &&
        st.valley->key == st.valley_key && st.valley->complete && st.fitmap->key == st.fitmap_key &&
        st.fitmap->complete)
      return;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) FAIL("worker did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

TEST_CASE("re-simulation: one run per strategy with timeline, lanes and phase bands") {
  gui::AppState st = state_for("gpt2-small", kAllStrategies);
  gui::apply_edits(st);
  gui::resimulate(st, 1e9);
  REQUIRE(st.runs.size() == kAllStrategies.size());
  for (size_t i = 0; i < st.runs.size(); ++i) {
    CAPTURE(kAllStrategies[i]);
    const gui::Run& run = st.runs[i];
    REQUIRE(run.data);
    CHECK(run.error.empty());
    const sim::Result direct = sim::simulate(st.inputs.model, st.inputs.setup, st.inputs.device,
                                             sim::parse_strategy(kAllStrategies[i]));
    CHECK(run.data->result.peak_allocated_bytes == direct.peak_allocated_bytes);
    CHECK(run.data->result.step_time_ns == direct.step_time_ns);
    CHECK(!run.data->result.timeline.empty());
    size_t in_lanes = 0;
    for (int s = 0; s < static_cast<int>(run.data->lanes.size()); ++s) {
      const auto& lane = run.data->lanes[static_cast<size_t>(s)];
      in_lanes += lane.size();
      for (size_t k = 1; k < lane.size(); ++k) {
        const sim::OpSpan& a = run.data->result.spans[lane[k - 1]];
        const sim::OpSpan& b = run.data->result.spans[lane[k]];
        CHECK(a.stream == s);
        CHECK(a.start_ns + a.duration_ns <= b.start_ns);  // one op at a time per stream
      }
    }
    CHECK(in_lanes == run.data->result.spans.size());
    const auto& bands = run.data->bands;
    REQUIRE(!bands.empty());
    CHECK(bands.front().t0_ns == 0);
    CHECK(bands.back().t1_ns == run.data->result.step_time_ns);
    for (size_t k = 1; k < bands.size(); ++k) {
      CHECK(bands[k - 1].t1_ns == bands[k].t0_ns);
      CHECK(bands[k - 1].phase != bands[k].phase);
    }
    bool recompute = false;
    for (const gui::PhaseBand& b : bands) recompute |= b.phase == sim::Phase::kRecompute;
    // Recompute of pointwise ops only (sac:mm under flash attention) costs time but no FLOPs.
    CHECK(recompute == (run.data->result.recompute_time_ns > 0));
  }
  // An edit makes every run stale; a tiny budget re-simulates at least one per frame.
  st.inputs.setup.micro_batch = 2;
  ++st.revision;
  gui::apply_edits(st);
  gui::resimulate(st, 0);
  CHECK(st.stats.resimulated == 1);
  CHECK(st.stats.pending == static_cast<int>(kAllStrategies.size()) - 1);
}

TEST_CASE("per-sample categories replay the engine's ledger exactly") {
  for (const char* model : {"gpt2-small", "llama-2-7b"}) {
    gui::AppState st = state_for(model, kAllStrategies, 512, 2);
    gui::apply_edits(st);
    gui::resimulate(st, 1e9);
    for (size_t i = 0; i < st.runs.size(); ++i) {
      CAPTURE(model);
      CAPTURE(kAllStrategies[i]);
      const gui::RunData& d = *st.runs[i].data;
      const gui::CategorySeries cats = gui::category_series(*d.graph, d.plan, d.result);
      REQUIRE(cats.at.size() == d.result.timeline.size());
      bool peak_seen = false;
      for (size_t k = 0; k < cats.at.size(); ++k) {
        int64_t sum = 0;
        for (int64_t b : cats.at[k]) {
          CHECK(b >= 0);
          sum += b;
        }
        const sim::MemorySample& m = d.result.timeline[k];
        CHECK(sum == m.allocated_bytes);
        if (!peak_seen && m.event_index == d.result.peak_event_index &&
            m.allocated_bytes == d.result.peak_allocated_bytes) {
          peak_seen = true;
          CHECK(cats.at[k] == d.result.peak_breakdown);
        }
      }
      CHECK(peak_seen);
    }
  }
}

// polish: the set-up is resolved once per edit (apply_edits), not every frame, and the status line
// and the set-up panel read that; the comparison carries MFU's peak and the fp8 figures.
TEST_CASE("the resolved set-up is computed once per revision, the MFU peak reaches the comparison") {
  gui::AppState st = state_for("llama-3-8b", {"none"}, 1024);
  st.inputs.setup.impl = sim::Impl::kTorchtitan;
  st.inputs.setup.dp = 8;
  st.inputs.setup.zero_default = true;  // --zero not given (as the GUI's args leave it)
  ++st.revision;
  gui::apply_edits(st);
  REQUIRE(st.resolved_revision == st.revision);
  CHECK(st.resolved_setup.zero == 3);     // torchtitan shards under --dp by default
  CHECK(st.inputs.setup.zero == 0);       // the edited set-up keeps what the user gave
  CHECK(st.resolved_setup.impl_version == "v0.2.2");
  st.inputs.setup.dp = 1;                 // an edit not yet counted: nothing is re-resolved
  gui::apply_edits(st);
  CHECK(st.resolved_setup.zero == 3);
  ++st.revision;
  gui::apply_edits(st);
  CHECK(st.resolved_revision == st.revision);
  CHECK(st.resolved_setup.zero == 0);
  st.inputs.setup.norm_kernel = sim::NormKernel::kTriton;  // not in torchtitan v0.2.2
  ++st.revision;
  gui::apply_edits(st);
  CHECK(st.resolved_revision == 0);
  CHECK(st.graph_error.find("--norm-kernel") == 0);
  st.inputs.setup.norm_kernel = sim::NormKernel::kDefault;
  st.inputs.setup.fp8 = sim::Fp8Recipe::kTorchaoTensorwise;
  st.inputs.setup.dp = 8;
  ++st.revision;
  gui::apply_edits(st);
  gui::resimulate(st, 1e9);
  const auto rows = gui::compare_rows(st);
  REQUIRE(rows.size() == 1);
  const sim::Result& r = st.runs[0].data->result;
  CHECK(rows[0].mfu_peak_flops_per_s == r.mfu_peak_flops_per_s);
  CHECK(rows[0].mfu_peak_flops_per_s == st.inputs.device.peak_bf16_flops_per_s);
  CHECK(rows[0].fp8_model_flops > 0);
  CHECK(rows[0].fp8_model_flops < r.model_flops);
  CHECK(rows[0].mfu_fp8_mixed == r.mfu_fp8_mixed);
  CHECK(rows[0].mfu_fp8_mixed > 0);
  CHECK(rows[0].mfu_fp8_mixed < rows[0].mfu);
}

TEST_CASE("comparison rows sort by any column and export as CSV schema v1") {
  gui::AppState st = state_for("gpt2-small", {"none", "full", "selective"});
  gui::apply_edits(st);
  gui::resimulate(st, 1e9);
  auto rows = gui::compare_rows(st);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].strategy == "none");
  CHECK(rows[0].recompute_flops == 0);
  CHECK(rows[1].recompute_share > 0);
  gui::sort_rows(rows, gui::CompareColumn::kPeak, false);
  CHECK(rows.front().peak_bytes <= rows.back().peak_bytes);
  gui::sort_rows(rows, gui::CompareColumn::kStepTime, true);
  CHECK(rows.front().step_time_ns >= rows.back().step_time_ns);
  gui::sort_rows(rows, gui::CompareColumn::kStrategy, false);
  CHECK(rows.front().strategy == "full");
  const std::string csv = gui::compare_csv(st);
  CHECK(csv.rfind(sim_io::csv_header(), 0) == 0);
  size_t lines = 0;
  for (char c : csv) lines += c == '\n';
  CHECK(lines == 4);
  CHECK(csv.find(",selective,") != std::string::npos);
}

TEST_CASE("budget: in the comparison CSV is the plan made, as actsim run writes it") {
  gui::AppState probe = state_for("gpt2-small", {"none", "full"});
  gui::apply_edits(probe);
  gui::resimulate(probe, 1e9);
  const int64_t budget = (probe.runs[0].data->result.peak_allocated_bytes +
                          probe.runs[1].data->result.peak_allocated_bytes) / 2;
  gui::AppState st = state_for("gpt2-small", {"budget:" + std::to_string(budget)});
  gui::apply_edits(st);
  gui::resimulate(st, 1e9);
  REQUIRE(st.runs[0].data);
  const sim::BudgetPlan plan = sim::plan_budget(*st.graph, st.inputs.device, budget);
  CHECK(st.runs[0].data->planned == plan.strategy.canonical());
  CHECK(plan.strategy.canonical().rfind("budget:", 0) != 0);
  const std::string csv = gui::compare_csv(st);
  CHECK(csv.find(plan.strategy.canonical()) != std::string::npos);
  CHECK(csv.find("budget:") == std::string::npos);
}

TEST_CASE("the worker's valley and fit map agree with the simulator") {
  gui::AppState st = state_for("gpt2-small", {"none", "full"});
  st.view.fit_x = {gui::FitKnob::kMicroBatch, 1, 4, 0};  // 1, 2, 4
  st.view.fit_y = {gui::FitKnob::kSeq, 256, 2048, 0};    // gpt2: 1024 positions, so 2048 is refused
  st.view.valley_n = 6;
  gui::Worker worker;
  settle(st, worker);
  const gui::ValleyData& v = *st.valley;
  CHECK(v.error.empty());
  CHECK(v.complete);
  sim::ModelConfig six = st.inputs.model;
  six.layers = 6;
  const sim::Valley direct =
      sim::compute_valley(sim::build_graph(six, st.inputs.setup, st.inputs.device), st.inputs.device);
  CHECK(v.valley.n == 6);
  CHECK(v.valley == direct);

  const gui::FitMapData& f = *st.fitmap;
  CHECK(f.xs == std::vector<int64_t>{1, 2, 4});
  CHECK(f.ys == std::vector<int64_t>{256, 512, 1024, 2048});
  CHECK(f.done == f.total);
  CHECK(f.total == 24);
  REQUIRE(f.errors.size() == 1);  // seq 2048 > gpt2's 1024 positions, for 3 cells x 2 strategies
  CHECK(f.errors[0].find("exceeds") != std::string::npos);
  CHECK(f.error_cells[0] == 6);
  for (const auto& grid : f.grids)
    for (int i = 0; i < 12; ++i) CHECK(grid[static_cast<size_t>(i)].ok == (i / 3 != 3));
  sim::TrainSetup s = st.inputs.setup;
  s.micro_batch = 2;
  s.seq = 512;
  const sim::Result r = sim::simulate(st.inputs.model, s, st.inputs.device, sim::parse_strategy("full"));
  const gui::FitCell& c = f.grids[1][1 * 3 + 1];
  CHECK(c.ok);
  CHECK(c.peak_bytes == r.peak_allocated_bytes);
  CHECK(c.fits == r.fits);
  CHECK(c.capacity_bytes == gui::capacity_bytes(r));
  const auto best = gui::largest_fit(f, 1);
  REQUIRE(best);
  CHECK(*best == 2 * 3 + 2);  // b 4 x s 1024 fits gpt2-small on an H100
  CHECK(gui::color_position(gui::peak_range(f).lo, gui::peak_range(f)) == doctest::Approx(0));
}

TEST_CASE("fit map axes: powers of two, additive steps, ZeRO by one, clamping and the cap") {
  using gui::FitKnob;
  CHECK(gui::axis_values(gui::default_axis(FitKnob::kMicroBatch)) == std::vector<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(gui::axis_values(gui::default_axis(FitKnob::kSeq)).front() == 512);
  CHECK(gui::axis_values(gui::default_axis(FitKnob::kZero)) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(gui::axis_values({FitKnob::kTp, 3, 20, 0}) == std::vector<int64_t>{2, 4, 8, 16});  // lo rounded down
  CHECK(gui::axis_values({FitKnob::kMicroBatch, 2, 9, 3}) == std::vector<int64_t>{2, 5, 8});
  CHECK(gui::axis_values({FitKnob::kZero, 5, -1, 0}) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(gui::axis_values({FitKnob::kDp, 8, 2, 0}) == std::vector<int64_t>{2, 4, 8});  // ordered
  const gui::FitAxis wide{FitKnob::kSeq, 1, 100000, 1};
  CHECK(gui::axis_values(wide).size() == static_cast<size_t>(gui::kMaxAxisValues));
  CHECK(gui::axis_truncated(wide));
  CHECK_FALSE(gui::axis_truncated(gui::default_axis(FitKnob::kSeq)));
  sim::TrainSetup s;
  for (int k = 0; k < static_cast<int>(FitKnob::kCount); ++k) {
    const auto knob = static_cast<FitKnob>(k);
    gui::set_knob(s, knob, 3);
    CHECK(gui::knob_value(s, knob) == 3);
  }
  CHECK(gui::knob_value_label(FitKnob::kSeq, 16384) == "16k");
  CHECK(gui::knob_value_label(FitKnob::kMicroBatch, 16384) == "16384");
  // feat13 (issue 13): --etp is a fit map axis as tp is; unset (0) reads as --tp
  const std::optional<gui::FitAxis> etp = gui::parse_fit_axis("etp:1:8");
  REQUIRE(etp.has_value());
  CHECK(etp->knob == FitKnob::kEtp);
  CHECK(gui::axis_values(*etp) == std::vector<int64_t>{1, 2, 4, 8});
  sim::TrainSetup unset;
  unset.tp = 4;
  CHECK(gui::knob_value(unset, FitKnob::kEtp) == 4);
  // Choosing the other axis's knob swaps the two.
  gui::FitAxis x = gui::default_axis(FitKnob::kMicroBatch), y{FitKnob::kSeq, 1024, 4096, 0};
  gui::choose_knob(x, y, FitKnob::kTp);
  CHECK(x == gui::default_axis(FitKnob::kTp));
  CHECK(y == gui::FitAxis{FitKnob::kSeq, 1024, 4096, 0});
  gui::choose_knob(x, y, FitKnob::kSeq);
  CHECK(x == gui::default_axis(FitKnob::kSeq));
  CHECK(y == gui::default_axis(FitKnob::kTp));
  // The --fit-x / --fit-y syntax.
  CHECK(gui::parse_fit_axis("tp") == gui::default_axis(FitKnob::kTp));
  CHECK(gui::parse_fit_axis("seq:1k:16k") == gui::FitAxis{FitKnob::kSeq, 1024, 16384, 0});
  CHECK(gui::parse_fit_axis("b:1:8:1") == gui::FitAxis{FitKnob::kMicroBatch, 1, 8, 1});
  CHECK(gui::parse_fit_axis("zero:1:3") == gui::FitAxis{FitKnob::kZero, 1, 3, 1});
  for (const char* bad : {"", "pp", "tp:4", "tp:8:4", "tp:0:4", "b:1:8:0", "s:1:x", "zero:0:4", "b:1:2:3:4"}) {
    CAPTURE(bad);
    CHECK_FALSE(gui::parse_fit_axis(bad));
  }
}

TEST_CASE("fit map: every knob pair simulates its cells and draws") {
  gui::Windowless ui(1600, 1000);
  using gui::FitKnob;
  // Small ranges, so 20 pairs stay quick; dp 2 in the set-up so that ZeRO stages apply.
  const std::array<gui::FitAxis, 5> axes{{{FitKnob::kMicroBatch, 1, 2, 0},
                                          {FitKnob::kSeq, 256, 512, 0},
                                          {FitKnob::kTp, 1, 4, 0},
                                          {FitKnob::kDp, 2, 4, 0},
                                          {FitKnob::kZero, 0, 3, 1}}};
  gui::AppState st = state_for("gpt2-small", {"none", "full"}, 512);
  st.inputs.setup.dp = 2;
  st.view.active = gui::View::kFitMap;
  gui::Worker worker;
  for (const gui::FitAxis& x : axes) {
    for (const gui::FitAxis& y : axes) {
      if (x.knob == y.knob) continue;
      CAPTURE(gui::knob_name(x.knob));
      CAPTURE(gui::knob_name(y.knob));
      st.view.fit_x = x;
      st.view.fit_y = y;
      settle(st, worker);
      const gui::FitMapData& f = *st.fitmap;
      CHECK(f.xs == gui::axis_values(x));
      CHECK(f.ys == gui::axis_values(y));
      CHECK(f.errors.empty());
      for (size_t i = 0; i < f.grids[0].size(); ++i) {
        const sim::TrainSetup cs = f.cell_setup(static_cast<int>(i));
        CHECK(gui::knob_value(cs, x.knob) == f.xs[i % f.xs.size()]);
        CHECK(gui::knob_value(cs, y.knob) == f.ys[i / f.xs.size()]);
        const sim::Result r = sim::simulate(st.inputs.model, cs, st.inputs.device, sim::parse_strategy("full"));
        CHECK(f.grids[1][i].ok);
        CHECK(f.grids[1][i].peak_bytes == r.peak_allocated_bytes);
      }
      CHECK(gui::largest_fit(f, 0));
      st.view.select_active = true;
      ui.frame(st, worker);
      ui.frame(st, worker, {1000, 600});  // hover a cell
      CHECK(ui.vertices() > 1000);
    }
  }
}

TEST_CASE("fit map: values the model refuses grey their cells with the reason") {
  using gui::FitKnob;
  gui::AppState st = state_for("gpt2-small", {"none", "full", "every:4"}, 512);  // 12 heads
  st.view.fit_x = {FitKnob::kTp, 1, 16, 0};   // 8 and 16 do not divide 12 heads
  st.view.fit_y = {FitKnob::kZero, 0, 3, 1};  // dp 1: ZeRO 1-3 refused
  st.view.active = gui::View::kFitMap;
  gui::Worker worker;
  settle(st, worker);
  const gui::FitMapData& f = *st.fitmap;
  REQUIRE(f.xs == std::vector<int64_t>{1, 2, 4, 8, 16});
  const auto reason = [&](const gui::FitCell& c) { return c.error >= 0 ? f.errors[static_cast<size_t>(c.error)] : ""; };
  for (const auto& grid : f.grids) {
    for (int i = 0; i < static_cast<int>(grid.size()); ++i) {
      const int64_t tp = f.xs[static_cast<size_t>(i % 5)], zero = f.ys[static_cast<size_t>(i / 5)];
      CAPTURE(tp);
      CAPTURE(zero);
      const gui::FitCell& c = grid[static_cast<size_t>(i)];
      CHECK(c.done);
      CHECK(c.ok == (zero == 0 && tp <= 4));
      if (tp > 4) CHECK(reason(c).find("heads (12) must divide by tp") != std::string::npos);  // checked first
      else if (zero > 0) CHECK(reason(c).find("ZeRO needs") != std::string::npos);
      else CHECK(c.error == -1);
    }
  }
  int64_t refused = 0;
  for (int64_t n : f.error_cells) refused += n;
  CHECK(refused == 3 * (20 - 3));
  // Largest: equal tokens per step everywhere, so the fewest GPUs: tp 1, ZeRO 0.
  CHECK(gui::largest_fit(f, 0) == 0);
  gui::Windowless ui(1600, 1000);
  st.view.select_active = true;
  ui.frame(st, worker);
  ui.frame(st, worker, {1400, 400});  // over a refused cell of the first map
  CHECK(ui.vertices() > 1000);
}

TEST_CASE("a valley filling in: every snapshot is a prefix of the final one, which is compute_valley") {
  gui::AppState st = state_for("llama-2-7b", {"none"}, 512);
  sim::ModelConfig model = st.inputs.model;
  model.layers = 12;
  const sim::Graph g = sim::build_graph(model, st.inputs.setup, st.inputs.device);
  const sim::Valley direct = sim::compute_valley(g, st.inputs.device);
  gui::ValleyJob job(gui::ValleyRequest{{1, 12}, model, st.inputs.setup, st.inputs.device});
  std::vector<std::shared_ptr<const gui::ValleyData>> snaps;
  while (job.step()) snaps.push_back(job.snapshot());
  snaps.push_back(job.snapshot());
  REQUIRE(snaps.size() == 13);  // the head, then one plan per step
  CHECK(snaps.back()->complete);
  CHECK(snaps.back()->valley == direct);
  for (size_t k = 0; k < snaps.size(); ++k) {
    const sim::Valley& v = snaps[k]->valley;
    CHECK(v.points.size() == k);
    CHECK(v.m_star == direct.m_star);  // analytic: final from the head on
    CHECK(v.c_bytes == direct.c_bytes);
    CHECK(std::equal(v.points.begin(), v.points.end(), direct.points.begin()));
    CHECK(snaps[k]->complete == (k == 12));
  }
  // Through the worker, publishing after every step: whatever the GUI sees is such a prefix.
  gui::Worker worker(0);
  gui::ValleyRequest r{{2, 12}, model, st.inputs.setup, st.inputs.device};
  worker.request(std::move(r));
  size_t seen = 0, partial = 0;
  for (const auto t0 = std::chrono::steady_clock::now();;) {
    const auto v = worker.valley();
    if (v) {
      ++seen;
      partial += !v->complete;
      CHECK(std::equal(v->valley.points.begin(), v->valley.points.end(), direct.points.begin()));
      if (v->complete) {
        CHECK(v->valley == direct);
        break;
      }
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) FAIL("valley did not finish");
    std::this_thread::yield();
  }
  CHECK(seen > partial);  // the complete one, after any partial ones
}

TEST_CASE("a fit map filling in: done cells never change, the rest follow in scan order") {
  gui::AppState st = state_for("gpt2-small", {"none", "selective"});
  gui::FitMapRequest r;
  r.key = {1, {gui::FitKnob::kMicroBatch, 1, 8, 0}, {gui::FitKnob::kSeq, 256, 2048, 0}};
  r.model = st.inputs.model;
  r.setup = st.inputs.setup;
  r.device = st.inputs.device;
  r.strategies = {sim::parse_strategy("none"), sim::parse_strategy("selective")};
  r.entries = {0, 1};
  gui::FitMapJob job(r);
  std::vector<std::shared_ptr<const gui::FitMapData>> snaps{job.snapshot()};
  while (job.step()) snaps.push_back(job.snapshot());
  snaps.push_back(job.snapshot());
  const gui::FitMapData& last = *snaps.back();
  REQUIRE(last.complete);
  CHECK(last.done == last.total);
  CHECK(snaps.size() == 16 + 1);  // 4 x 4 cells
  for (size_t k = 0; k < snaps.size(); ++k) {
    const gui::FitMapData& d = *snaps[k];
    CHECK(d.done == static_cast<int64_t>(k) * 2);
    for (size_t g = 0; g < 2; ++g)
      for (size_t i = 0; i < 16; ++i) {
        if (i < k) CHECK(d.grids[g][i] == last.grids[g][i]);
        else CHECK_FALSE(d.grids[g][i].done);
      }
  }
}

TEST_CASE("partial valley and fit map snapshots draw, hover included") {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = state_for("llama-2-7b", {"none", "full"}, 512);
  gui::Worker worker;
  settle(st, worker);  // the worker is idle: the snapshots set below stay
  gui::ValleyJob valley(gui::ValleyRequest{st.valley_key, st.inputs.model, st.inputs.setup, st.inputs.device});
  for (int i = 0; i < 4; ++i) valley.step();  // the head and 3 of 32 plans
  gui::FitMapRequest r;
  r.key = st.fitmap_key;
  r.model = st.inputs.model;
  r.setup = st.inputs.setup;
  r.device = st.inputs.device;
  r.strategies = {sim::parse_strategy("none"), sim::parse_strategy("full")};
  r.entries = {0, 1};
  gui::FitMapJob fitmap(r);
  for (int i = 0; i < 7; ++i) fitmap.step();  // 7 of 36 cells
  for (gui::View v : {gui::View::kValley, gui::View::kFitMap}) {
    CAPTURE(gui::view_name(v));
    st.valley = valley.snapshot();
    st.fitmap = fitmap.snapshot();
    REQUIRE_FALSE(st.valley->complete);
    REQUIRE_FALSE(st.fitmap->complete);
    st.view.active = v;
    st.view.select_active = true;
    // A worker with nothing published: frame()'s update() keeps the partial snapshots (the keys
    // are current, so it requests nothing).
    gui::Worker quiet;
    for (float x : {600.0f, 1000.0f, 1400.0f}) {
      ui.frame(st, quiet, {x, 400});
      CHECK(ui.vertices() > 1000);
    }
    CHECK(st.valley->valley.points.size() == 3);
    CHECK(st.fitmap->done == 14);
    CHECK(quiet.idle());
  }
}

TEST_CASE("a superseding fit map request replaces the one in progress") {
  gui::AppState st = state_for("llama-2-7b", {"none", "full", "selective"});
  gui::Worker worker;
  gui::update(st, worker);
  st.view.fit_x = {gui::FitKnob::kMicroBatch, 1, 2, 0};
  st.view.fit_y = {gui::FitKnob::kSeq, 512, 1024, 0};
  settle(st, worker);
  CHECK(st.fitmap->xs.size() == 2);
  CHECK(st.fitmap->ys.size() == 2);
  CHECK(st.fitmap->complete);
}

TEST_CASE("windowless smoke: every panel and view on three models and all strategies") {
  gui::Windowless ui(1600, 1000);
  for (const char* model : {"gpt2-small", "llama-2-7b", "korthikanti-175b"}) {
    CAPTURE(model);
    gui::AppState st = state_for(model, kAllStrategies, 1024, model[0] == 'k' ? 8 : 1);
    gui::Worker worker;
    settle(st, worker);
    for (int v = 0; v < static_cast<int>(gui::View::kCount); ++v) {
      CAPTURE(gui::view_name(static_cast<gui::View>(v)));
      st.view.active = static_cast<gui::View>(v);
      st.view.select_active = true;
      for (bool stacked : {false, true}) {
        st.view.stacked = stacked;
        for (int f = 0; f < 3; ++f) ui.frame(st, worker);
        // The mouse over the middle of the view and over the left panel: hover paths run.
        ui.frame(st, worker, {1000, 500});
        ui.frame(st, worker, {900, 250});
        ui.frame(st, worker, {150, 300});
        CHECK(ui.vertices() > 1000);
        CHECK(st.view.active == static_cast<gui::View>(v));
      }
    }
    for (const gui::Run& r : st.runs) CHECK(r.data);
    CHECK(st.runs[st.view.focused].categories != nullptr);  // stacked mode computed them
    CHECK(st.runs[st.view.focused + 1].categories == nullptr);  // only for the focused one
  }
}

// famenc (issue 12): T5's two stacks and ViT's token count through the GUI's model layer and
// every view (windowless).
TEST_CASE("windowless smoke: T5 and ViT, every view") {
  gui::Windowless ui(1600, 1000);
  for (const char* model : {"t5-small", "vit-base-patch16-224"}) {
    CAPTURE(model);
    const bool vit = model[0] == 'v';
    gui::AppState st = state_for(model, {"none", "full", "selective", "every:2"}, vit ? 197 : 256);
    gui::Worker worker;
    settle(st, worker);
    for (const gui::Run& r : st.runs) {
      REQUIRE(r.data);
      CHECK(r.data->result.layers == 12);
    }
    CHECK(st.runs[1].data->result.activation_bytes_per_layer <
          st.runs[0].data->result.activation_bytes_per_layer);
    for (int v = 0; v < static_cast<int>(gui::View::kCount); ++v) {
      CAPTURE(gui::view_name(static_cast<gui::View>(v)));
      st.view.active = static_cast<gui::View>(v);
      for (int f = 0; f < 3; ++f) ui.frame(st, worker);
      ui.frame(st, worker, {1000, 500});
      CHECK(ui.vertices() > 1000);
    }
  }
}

TEST_CASE("a bad edit shows its error and simulates nothing, a good one recovers") {
  gui::Windowless ui(1200, 800);
  gui::AppState st = state_for("gpt2-small", {"none", "every:40", "custom:nonsense"});
  gui::Worker worker;
  ui.frame(st, worker);
  CHECK(st.runs[0].data);
  CHECK(!st.inputs.strategies[1].error.empty());  // 40 > 12 blocks
  CHECK(!st.inputs.strategies[2].error.empty());
  CHECK(!st.runs[2].data);
  st.inputs.model.heads = 7;  // does not divide 768
  ++st.revision;
  ui.frame(st, worker);
  CHECK(!st.graph_error.empty());
  CHECK(!st.runs[0].data);
  CHECK(st.runs[0].error == st.graph_error);
  st.inputs.model.heads = 12;
  ++st.revision;
  ui.frame(st, worker);
  CHECK(st.graph_error.empty());
  CHECK(st.runs[0].data);
}

TEST_CASE("the shared time axis: wheel zooms about the mouse, drag pans, double-click resets") {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = state_for("gpt2-small", {"none", "full"});
  gui::Worker worker;
  for (int f = 0; f < 3; ++f) ui.frame(st, worker);
  REQUIRE(st.view.time_auto);
  const double end = st.view.time.hi;
  CHECK(st.view.time.lo == 0);
  // The memory plot fills the view's lower right: (1000, 500) is inside it.
  ui.frame(st, worker, {1000, 500, 2.0f});
  CHECK_FALSE(st.view.time_auto);
  const double span = st.view.time.hi - st.view.time.lo;
  CHECK(span == doctest::Approx(end / 1.5625).epsilon(1e-6));  // 1.25^2
  CHECK(st.view.time.lo > 0);
  // Drag right by 100 px: the content follows, so the range moves to earlier times.
  const double lo = st.view.time.lo;
  ui.frame(st, worker, {1000, 500, 0, true});
  ui.frame(st, worker, {1050, 500, 0, true});
  ui.frame(st, worker, {1100, 500, 0, true});
  ui.frame(st, worker, {1100, 500, 0, false});
  CHECK(st.view.time.lo < lo);
  CHECK(st.view.time.hi - st.view.time.lo == doctest::Approx(span));
  // The timeline shares the range.
  st.view.active = gui::View::kTimeline;
  st.view.select_active = true;
  ui.frame(st, worker);
  CHECK(st.view.time.hi - st.view.time.lo == doctest::Approx(span));
  st.view.active = gui::View::kMemory;
  st.view.select_active = true;
  ui.frame(st, worker);
  // Double-click: the whole step again.
  ui.frame(st, worker, {1000, 500, 0, true});
  ui.frame(st, worker, {1000, 500, 0, false});
  ui.frame(st, worker, {1000, 500, 0, true});
  ui.frame(st, worker, {1000, 500, 0, false});
  CHECK(st.view.time_auto);
  CHECK(st.view.time.lo == 0);
  CHECK(st.view.time.hi == doctest::Approx(end));
}

namespace {

// A snapshot in the converter's JSON (python/actsim/snapshot.py) shaped like a real step of
// `run`: a forward that allocates the largest simulated storage at the peak, a backward, an
// optimizer, with times, plus a segment event without a phase (it belongs to its neighbours).
std::string synthetic_snapshot_json(int64_t big_bytes) {
  std::string trace;
  int64_t t = 1000;
  auto ev = [&](const char* action, int64_t addr, int64_t size, const char* phase,
                const char* frame) {
    if (!trace.empty()) trace += ",";
    trace += std::string("{\"action\":\"") + action + "\",\"addr\":" + std::to_string(addr) +
             ",\"size\":" + std::to_string(size) + ",\"stream\":0,\"time_us\":" +
             std::to_string(t) + ",\"frame\":\"" + frame + "\",\"phase\":\"" + phase + "\"}";
    t += 10;
  };
  ev("segment_alloc", 1 << 20, 4 * big_bytes, "", "");
  ev("alloc", 1, 4096, "forward", "model.py:10:forward");
  ev("alloc", 2, big_bytes, "forward", "model.py:20:softmax");
  ev("alloc", 3, 1000, "forward", "model.py:30:forward");
  ev("free_requested", 3, 1000, "forward", "model.py:30:forward");
  ev("alloc", 4, 512, "backward", "model.py:40:backward");
  ev("free_requested", 2, big_bytes, "backward", "model.py:20:softmax");
  ev("alloc", 5, 512, "forward", "model.py:20:forward");  // a recompute inside backward
  ev("free_requested", 5, 512, "backward", "model.py:40:backward");  // (after 4's 512: below 3)
  ev("alloc", 6, 8192, "optimizer", "train.py:50:step");
  ev("free_requested", 6, 8192, "optimizer", "train.py:50:step");
  return "{\"format\":\"actsim-snapshot\",\"version\":1,\"file\":\"s.pickle\",\"layout\":\"frames\","
         "\"devices\":[{\"index\":0,\"segments\":[{\"total_size\":" +
         std::to_string(4 * big_bytes) + "}],\"live\":[],\"trace\":[" + trace + "]}]}";
}

}  // namespace

TEST_CASE("a snapshot on the focused run: each phase stretched onto the simulated one, tensors matched, views draw") {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = state_for("gpt2-small", {"none", "full"});
  gui::Worker worker;
  settle(st, worker);
  const sim::Result& r0 = st.runs[0].data->result;
  // The largest storage live at the simulated peak: the synthetic forward allocates its size.
  const auto sim_tensors =
      actsim_cli::simulated_at_peak(*st.runs[0].data->graph, st.runs[0].data->plan, r0);
  REQUIRE(!sim_tensors.empty());
  int64_t big = 0;
  for (const auto& t : sim_tensors) big = std::max(big, t.bytes);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("actsim-gui-snapshot-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(file);
    out << synthetic_snapshot_json(big);
  }
  st.view.snapshot_path = file.string();
  st.view.snapshot_requested = true;
  gui::update(st, worker, 1e9);
  std::filesystem::remove(file);
  REQUIRE(st.snapshot);
  REQUIRE(st.overlay);
  CHECK(st.view.message == "opened " + file.string());
  const auto& trace = st.snapshot->device.trace;
  const auto& pts = st.overlay->points;
  REQUIRE(pts.size() == trace.size());
  // Phase cuts: the first backward event (index 5) at the simulated backward's start, the first
  // optimizer event (index 9) at the optimizer's; the recompute's forward frame (7) stays in
  // backward; times never decrease and stay in the step.
  int64_t sim_bwd = -1, sim_opt = -1;
  for (const sim::MemorySample& m : r0.timeline) {
    if (sim_bwd < 0 && (m.phase == sim::Phase::kBackward || m.phase == sim::Phase::kRecompute))
      sim_bwd = m.t_ns;
    if (sim_opt < 0 && m.phase == sim::Phase::kOptimizer) sim_opt = m.t_ns;
  }
  CHECK(pts[0].t_ns == 0);
  CHECK(pts[5].t_ns == sim_bwd);
  CHECK(pts[5].phase == actsim_cli::StepPhase::kBackward);
  CHECK(pts[7].phase == actsim_cli::StepPhase::kBackward);
  CHECK(pts[9].t_ns == sim_opt);
  CHECK(pts[4].t_ns < sim_bwd);
  for (size_t i = 0; i < pts.size(); ++i) {
    CAPTURE(i);
    CHECK(pts[i].event == static_cast<int64_t>(i));
    CHECK(pts[i].allocated_bytes == st.snapshot->peaks.curve[i]);
    CHECK(pts[i].t_ns <= r0.step_time_ns);
    if (i > 0) CHECK(pts[i].t_ns >= pts[i - 1].t_ns);
  }
  // Forward events spread by their times: event 2 is 2/5 of the way from event 0 to event 5.
  CHECK(pts[2].t_ns == sim_bwd * 2 / 5);
  // The measured peak (the forward's big block) is matched with the simulated storage by size
  // and by the frame naming the op where it can.
  CHECK(st.snapshot->peaks.allocated.event == 3);
  bool big_matched = false;
  for (const auto& [s, m] : st.overlay->match.matched)
    big_matched |= st.overlay->simulated[s].bytes == big && st.snapshot->peaks.at_peak[m].requested_bytes == big;
  CHECK(big_matched);
  CHECK(st.overlay->match.matched.size() + st.overlay->match.simulated_only.size() ==
        st.overlay->simulated.size());
  // Both views draw the snapshot, hover included.
  for (gui::View v : {gui::View::kMemory, gui::View::kCompare, gui::View::kTimeline}) {
    st.view.active = v;
    st.view.select_active = true;
    for (int f = 0; f < 3; ++f) ui.frame(st, worker);
    ui.frame(st, worker, {1000, 500});
    CHECK(ui.vertices() > 1000);
  }
  // Focusing another strategy re-places the snapshot on that run.
  const auto before = st.overlay;
  st.view.focused = 1;
  gui::update(st, worker, 1e9);
  REQUIRE(st.overlay);
  CHECK(st.overlay != before);
  CHECK(st.overlay->run == st.runs[1].data);
  CHECK(st.overlay->strategy == 1);
  // A bad file: one error line, what was open stays; an empty path closes.
  st.view.snapshot_path = "no-such-snapshot.pickle";
  st.view.snapshot_requested = true;
  gui::update(st, worker, 1e9);
  CHECK(st.view.message.rfind("error: no-such-snapshot.pickle: ", 0) == 0);
  CHECK(st.snapshot);
  st.view.snapshot_path.clear();
  st.view.snapshot_requested = true;
  gui::update(st, worker, 1e9);
  CHECK(!st.snapshot);
  CHECK(!st.overlay);
}

TEST_CASE("overlay_curve without times places events by index, and a phase the simulation lacks places nothing") {
  actsim_cli::SnapshotDevice d;
  for (int i = 0; i < 6; ++i) {
    actsim_cli::SnapshotEvent e;
    e.action = actsim_cli::SnapshotAction::kAlloc;
    e.addr = i + 1;
    e.size = 1024 * (i + 1);
    e.phase = i < 4 ? "forward" : "backward";
    d.trace.push_back(e);  // time_us -1: no times recorded (PyTorch < 2.1)
  }
  const actsim_cli::SnapshotPeaks peaks = actsim_cli::analyze_snapshot(d, "t");
  sim::Result r;
  r.step_time_ns = 1000;
  sim::MemorySample m;
  m.t_ns = 0;
  m.phase = sim::Phase::kForward;
  r.timeline.push_back(m);
  m.t_ns = 400;
  m.phase = sim::Phase::kOptimizer;  // no backward in this (synthetic) simulation
  r.timeline.push_back(m);
  const auto pts = actsim_cli::overlay_curve(d, peaks, r);
  // Forward: events 0-3 over [0, first backward event 4) stretched onto [0, 400): 0, 100, 200,
  // 300. Backward: the simulation has none, so events 4 and 5 place no points.
  REQUIRE(pts.size() == 4);
  CHECK(pts[0].t_ns == 0);
  CHECK(pts[1].t_ns == 100);
  CHECK(pts[3].t_ns == 300);
  CHECK(pts[3].allocated_bytes == 1024 + 2048 + 3072 + 4096);  // sizes are multiples of 512
}

TEST_CASE("the strategies panel offers every strategy the CLI takes: torchtitan's, offload and budget draw and simulate") {
  gui::Windowless ui(1600, 1000);
  sim::TrainSetup setup;
  setup.seq = 256;
  setup.impl = sim::Impl::kTorchtitan;
  const std::vector<std::string> specs{"sac:torchtitan", "layer-sac:2", "offload", "offload+full",
                                       "budget:130GiB"};  // 7B: fp32 weights, grads and Adam alone are ~112 GiB
  gui::AppState st = gui::make_state(gui::make_catalog(dirs()), sim_io::load_model("llama-2-7b", dirs()),
                                     "llama-2-7b", setup, sim_io::load_device("h100-sxm", dirs()),
                                     "h100-sxm", specs);
  gui::Worker worker;
  for (int f = 0; f < 3; ++f) ui.frame(st, worker, {150, 600}, 1e9);  // mouse over the panel
  CHECK(ui.vertices() > 1000);
  for (size_t i = 0; i < specs.size(); ++i) {
    CAPTURE(specs[i]);
    CHECK(st.inputs.strategies[i].error.empty());
    CHECK(st.runs[i].data);
    CHECK(st.inputs.strategies[i].spec == specs[i]);  // drawing the panel edits nothing
  }
}

TEST_CASE("moe: a MoE model (Mixtral-8x7B) simulates and draws every view") {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = state_for("mixtral-8x7b", {"none", "full"}, 512);
  gui::Worker worker;
  settle(st, worker);
  for (int v = 0; v < static_cast<int>(gui::View::kCount); ++v) {
    CAPTURE(gui::view_name(static_cast<gui::View>(v)));
    st.view.active = static_cast<gui::View>(v);
    for (int f = 0; f < 3; ++f) ui.frame(st, worker);
    CHECK(ui.vertices() > 1000);
  }
  for (const gui::Run& r : st.runs) CHECK(r.data);
}

// ds3b (issue 10): DeepSpeed's --ds-* knobs through the GUI's set-up (the fields are drawn under
// the deepspeed-bf16 regime): a knob set reaches the simulation; one the stage does not take
// is refused with the flag's one line, and the views still draw.
TEST_CASE("ds3b: the DeepSpeed knobs under hf --dp 8 --zero 3 reach the simulation and draw") {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = state_for("llama-2-7b", {"none"}, 2048);
  st.inputs.setup.dp = 8;
  st.inputs.setup.zero = 3;
  st.inputs.setup.zero_default = false;
  ++st.revision;
  gui::Worker worker;
  for (int f = 0; f < 3; ++f) ui.frame(st, worker);
  REQUIRE(st.graph_error.empty());
  REQUIRE(st.runs[0].data);
  CHECK(sim::resolved_precision(st.resolved_setup) == sim::Precision::kDeepspeedBf16);
  const int64_t auto_peak = st.runs[0].data->result.peak_allocated_bytes;
  st.inputs.setup.ds_prefetch_bucket = 0;
  st.inputs.setup.ds_max_reuse_distance = 0;
  ++st.revision;
  for (int f = 0; f < 3; ++f) ui.frame(st, worker);
  REQUIRE(st.runs[0].data);
  const sim::Result direct = sim::simulate(st.inputs.model, st.inputs.setup, st.inputs.device,
                                           sim::parse_strategy("none"));
  CHECK(st.runs[0].data->result.peak_allocated_bytes == direct.peak_allocated_bytes);
  CHECK(direct.peak_allocated_bytes < auto_peak);  // nothing kept or prefetched
  CHECK(ui.vertices() > 1000);
  st.inputs.setup.zero = 0;  // the stage-3 knobs below stage 3: one line naming the flag
  ++st.revision;
  for (int f = 0; f < 3; ++f) ui.frame(st, worker);
  CHECK(st.graph_error.find("--ds-") != std::string::npos);
  CHECK(ui.vertices() > 100);
}

// polish: the set-up panel offers an implementation-specific field exactly where its knob can be
// set. For every release (and for no --impl), each field impl_fields shows is accepted by
// sim::resolve_setup, and each it hides is refused in one line naming the field's flag: the
// panel's data and the refusals are the same ImplSpec rows.
TEST_CASE("set-up fields: shown where the implementation has the knob, refused where hidden") {
  struct Knob {
    const char* flag;
    bool gui::ImplFields::*shown;
    void (*set)(sim::TrainSetup&, const sim::ImplSpec*);
  };
  const auto fp8 = [](sim::TrainSetup& s, const sim::ImplSpec* sp) {
    s.fp8 = sp && sp->fp8_torchao ? sim::Fp8Recipe::kTorchaoTensorwise : sim::Fp8Recipe::kTeDelayed;
  };
  const Knob dense[] = {
      {"--tp", &gui::ImplFields::tensor_parallel, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.tp = 2; }},
      {"--pp", &gui::ImplFields::pipeline, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.pp = 2; }},
      {"--cp", &gui::ImplFields::context_parallel, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.cp = 2; }},
      {"--compile", &gui::ImplFields::compile, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.compile = true; }},
      {"--norm-kernel", &gui::ImplFields::norm_kernel,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.norm_kernel = sim::NormKernel::kTriton; }},
      {"--grad-accum-fusion", &gui::ImplFields::grad_accum_fusion,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.grad_accum_fusion = false; }},
      {"--cross-entropy-loss-fusion", &gui::ImplFields::ce_loss_fusion,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.cross_entropy_loss_fusion = true; }},
      {"--transformer-impl", &gui::ImplFields::local_spec,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.local_spec = true; }},
      {"--deterministic", &gui::ImplFields::deterministic,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.deterministic = true; }},
      {"--fp8", &gui::ImplFields::fp8, fp8},
      {"--lora-rank", &gui::ImplFields::lora, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.lora_rank = 8; }},
      {"--padding", &gui::ImplFields::padding, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.padding = true; }},
  };
  const Knob moe[] = {
      {"--moe-imbalance", &gui::ImplFields::moe_routing,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.moe_imbalance = 2.0; }},
      {"--ep", &gui::ImplFields::moe_dispatcher, [](sim::TrainSetup& s, const sim::ImplSpec*) { s.ep = 2; }},
      {"--moe-capacity", &gui::ImplFields::moe_dispatcher,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.moe_capacity = 1.25; }},
      {"--moe-aux-loss-coeff", &gui::ImplFields::moe_dispatcher,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.moe_aux_loss_coeff = 0.01; }},
      {"--moe-shared-expert-overlap", &gui::ImplFields::shared_expert_overlap,
       [](sim::TrainSetup& s, const sim::ImplSpec*) { s.moe_shared_expert_overlap = true; }},
  };
  // llama-3-8b for the dense fields (RMSNorm: the Triton kernel applies); Qwen1.5-MoE (routed
  // and shared experts) for the MoE ones, at dp 2 so that --ep 2 divides the data-parallel ranks
  const std::pair<const char*, std::span<const Knob>> cases[] = {{"llama-3-8b", dense},
                                                                 {"qwen1.5-moe-a2.7b", moe}};
  int shown = 0, hidden = 0;
  for (const auto& [name, knobs] : cases) {
    const sim::ModelConfig model = sim_io::load_model(name, dirs());
    std::vector<const sim::ImplSpec*> rows{nullptr};  // nullptr: no --impl
    for (const sim::ImplSpec& r : sim::implementations())
      if (sim::supports_family(r, model.family)) rows.push_back(&r);
    for (const sim::ImplSpec* row : rows) {
      sim::TrainSetup base;
      base.seq = 1024;
      if (sim::is_moe(model)) base.dp = 2;
      if (row) base.impl = row->id, base.impl_version = row->version_key;
      CAPTURE(name);
      CAPTURE(std::string(row ? row->name : "model default") + "@" +
              std::string(row ? row->version_key : ""));
      REQUIRE_NOTHROW(sim::resolve_setup(model, base));
      const gui::ImplFields f = gui::impl_fields(model, base);
      for (const Knob& k : knobs) {
        CAPTURE(k.flag);
        sim::TrainSetup s = base;
        k.set(s, row ? row : &sim::spec(sim::default_impl(model, base)));
        if (f.*k.shown) {
          ++shown;
          CHECK_NOTHROW(sim::resolve_setup(model, s));
        } else {
          ++hidden;
          std::string where;
          try {
            sim::resolve_setup(model, s);
          } catch (const sim::ConfigError& e) {
            where = e.where();
          }
          CHECK(where == k.flag);
        }
      }
    }
  }
  CHECK(shown > 0);
  CHECK(hidden > 0);
  // Megatron's local layer spec (the field of the note) is megatron's alone
  const sim::ModelConfig llama = sim_io::load_model("llama-3-8b", dirs());
  for (const sim::ImplSpec& r : sim::implementations()) {
    sim::TrainSetup s;
    s.impl = r.id;
    s.impl_version = r.version_key;
    CHECK(gui::impl_fields(llama, s).local_spec == (r.id == sim::Impl::kMegatron));
  }
}
