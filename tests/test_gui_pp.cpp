// gui_pp: pipelines in the GUI (--pp, --vpp, --num-microbatches). Each strategy runs
// sim::simulate_pipeline (budget: sim::plan_pipeline); the shown stage's graph and simulation feed
// the memory and timeline views, its curve raised by the in-flight stash, so the drawn peak is the
// stage's peak; the comparison takes the step from the pipeline summary; the valley and the fit
// map, which simulate stage-less runs, request nothing and say so.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "compare.hpp"
#include "session.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner_pipeline.hpp"
#include "sim/strategy.hpp"
#include "sim_io/load.hpp"
#include "update.hpp"
#include "windowless.hpp"

namespace {

const std::vector<std::filesystem::path>& pp_dirs() {
  static const std::vector<std::filesystem::path> d{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
  return d;
}

sim::TrainSetup pp_setup(int64_t pp, int64_t microbatches, int64_t vpp = 1) {
  sim::TrainSetup s;
  s.seq = 1024;
  s.pp = pp;
  s.vpp = vpp;
  s.microbatches = microbatches;
  return s;
}

gui::AppState pp_state(const std::string& model, const sim::TrainSetup& setup,
                       const std::vector<std::string>& specs) {
  return gui::make_state(gui::make_catalog(pp_dirs()), sim_io::load_model(model, pp_dirs()), model,
                         setup, sim_io::load_device("h100-sxm", pp_dirs()), "h100-sxm", specs);
}

// The run of entry i against simulate_pipeline's stage `stage` (the worst when < 0).
void check_against(const gui::AppState& st, size_t i, const sim::PipelineResult& ref, int64_t stage) {
  REQUIRE(st.runs[i].data);
  const gui::RunData& d = *st.runs[i].data;
  REQUIRE(d.pipeline);
  const int64_t k = stage < 0 ? ref.worst : stage;
  const sim::StageResult& sr = ref.stages[static_cast<size_t>(k)];
  CHECK(d.stage == k);
  // What the memory view draws: the stage's timeline raised by the stash band; its peak is the
  // stage's reported peak (its stash included) and the band is the other micro-batches' stash.
  CHECK(gui::curve_peak_bytes(d) == sr.result.peak_allocated_bytes);
  CHECK(d.result.peak_allocated_bytes == sr.result.peak_allocated_bytes);
  CHECK(d.stash_offset == sr.in_flight_bytes - sr.stash_bytes);
  CHECK(d.result.fits == sr.result.fits);
  // The shown graph is the stage's: its blocks, and the timeline's ops are its ops.
  CHECK(d.graph->n_blocks == sr.blocks);
  CHECK(d.plan.mode.size() == static_cast<size_t>(d.graph->n_blocks));
  CHECK(!d.result.timeline.empty());
  CHECK(!d.lanes[0].empty());
  // The step: the pipeline summary (all micro-batches and the bubble), not one micro-batch.
  CHECK(gui::step_result(d).step_time_ns == ref.summary.step_time_ns);
  CHECK(gui::step_result(d).step_time_ns > d.result.step_time_ns);
}

}  // namespace

TEST_CASE("gui_pp: pp 2 and 4 micro-batches: the shown peak is simulate_pipeline's stage peak") {
  const sim::TrainSetup setup = pp_setup(2, 4);
  const std::vector<std::string> specs{"none", "full", "selective"};
  gui::AppState st = pp_state("gpt2-small", setup, specs);
  gui::Worker worker;
  gui::update(st, worker, 1e9);
  REQUIRE(st.graph_error.empty());
  std::vector<sim::PipelineResult> refs;
  for (const std::string& spec : specs)
    refs.push_back(sim::simulate_pipeline(st.inputs.model, setup, st.inputs.device,
                                          sim::parse_strategy(spec)));
  // Stage 0 holds min(N, p) = 2 micro-batches, the last stage 1: stage 0 has a stash band.
  CHECK(refs[0].stages[0].in_flight == 2);
  CHECK(refs[0].stages[1].in_flight == 1);
  for (size_t i = 0; i < specs.size(); ++i) {
    CAPTURE(specs[i]);
    check_against(st, i, refs[i], -1);  // default: each strategy's worst stage
  }
  // The comparison rows and CSV are the pipeline summary's.
  const std::vector<gui::CompareRow> rows = gui::compare_rows(st);
  REQUIRE(rows.size() == specs.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].peak_bytes == refs[i].summary.peak_allocated_bytes);
    CHECK(rows[i].step_time_ns == refs[i].summary.step_time_ns);
    CHECK(rows[i].tokens_per_s == refs[i].summary.tokens_per_s);
  }
  // Each stage chosen in turn: its own graph, peak and band.
  for (int64_t stage : {0, 1}) {
    CAPTURE(stage);
    st.inputs.stage_shown = stage;
    ++st.revision;
    gui::update(st, worker, 1e9);
    for (size_t i = 0; i < specs.size(); ++i) {
      CAPTURE(specs[i]);
      check_against(st, i, refs[i], stage);
    }
    CHECK(st.runs[0].data->stash_offset == (stage == 0 ? refs[0].stages[0].stash_bytes : 0));
  }
  // The stage field alone (as the set-up panel edits it) shows the pipelines already simulated
  // at the new stage: nothing is simulated again, and the views match the same references.
  std::vector<const sim::PipelineResult*> simulated;
  for (const gui::Run& r : st.runs) simulated.push_back(r.data->pipeline.get());
  const uint64_t revision = st.revision;
  for (int64_t stage : {0, -1, 1}) {
    CAPTURE(stage);
    st.inputs.stage_shown = stage;
    ++st.stage_revision;
    gui::update(st, worker, 1e9);
    CHECK(st.revision == revision);
    CHECK(st.stats.resimulated == 0);
    CHECK(st.stats.restaged == static_cast<int>(specs.size()));
    for (size_t i = 0; i < specs.size(); ++i) {
      CAPTURE(specs[i]);
      CHECK(st.runs[i].data->pipeline.get() == simulated[i]);
      check_against(st, i, refs[i], stage);
    }
  }
  // The valley and the fit map simulate stage-less runs: nothing was requested of the worker.
  CHECK(st.valley == nullptr);
  CHECK(st.fitmap == nullptr);
}

TEST_CASE("gui_pp: budget: under a pipeline is planned per stage (plan_pipeline) and shown") {
  const sim::TrainSetup setup = pp_setup(2, 4);
  gui::AppState probe = pp_state("gpt2-small", setup, {});
  // A budget between full's and none's worst-stage peaks: none does not fit, full does.
  const sim::PipelineResult none = sim::simulate_pipeline(
      probe.inputs.model, setup, probe.inputs.device, sim::parse_strategy("none"));
  const sim::PipelineResult full = sim::simulate_pipeline(
      probe.inputs.model, setup, probe.inputs.device, sim::parse_strategy("full"));
  const int64_t budget = (none.summary.peak_allocated_bytes + full.summary.peak_allocated_bytes) / 2;
  const std::string spec = "budget:" + std::to_string(budget);
  gui::AppState st = pp_state("gpt2-small", setup, {spec});
  gui::Worker worker;
  gui::update(st, worker, 1e9);
  REQUIRE(st.inputs.strategies[0].error.empty());
  const sim::PipelinePlan plan =
      sim::plan_pipeline(st.inputs.model, setup, st.inputs.device, budget);
  INFO(st.runs[0].error);
  check_against(st, 0, plan.result, -1);
  const gui::RunData& d = *st.runs[0].data;
  REQUIRE(d.stage_plans.size() == 2);
  for (size_t s = 0; s < 2; ++s)
    CHECK(d.stage_plans[s].rfind(plan.stages[s].strategy.canonical(), 0) == 0);
  CHECK(gui::curve_peak_bytes(d) <= budget);
  // The comparison CSV names the plan made, as `actsim run --pp` writes it, not budget:<bytes>.
  const std::string csv = gui::compare_csv(st);
  CHECK(csv.find(plan.strategy.canonical()) != std::string::npos);
  CHECK(csv.find("budget:") == std::string::npos);
}

TEST_CASE("gui_pp: pipelines draw every view (1F1B / interleaved / accumulation only / caching allocator) stacked and hovered") {
  gui::Windowless ui(1600, 1000);
  sim::TrainSetup caching = pp_setup(4, 4);
  caching.allocator = sim::AllocatorKind::kCaching;
  for (const sim::TrainSetup& setup : {pp_setup(2, 4), pp_setup(4, 8, 3), pp_setup(1, 4), caching}) {
    CAPTURE(setup.pp);
    CAPTURE(setup.vpp);
    CAPTURE(static_cast<int>(setup.allocator));
    gui::AppState st = pp_state("gpt2-small", setup, {"none", "full", "every:2"});
    gui::Worker worker;
    gui::update(st, worker, 1e9);
    REQUIRE(st.graph_error.empty());
    for (const gui::Run& r : st.runs) {
      INFO(r.error);
      REQUIRE(r.data);
      CHECK(gui::curve_peak_bytes(*r.data) ==
            r.data->pipeline->stages[static_cast<size_t>(r.data->stage)].result.peak_allocated_bytes);
    }
    for (int v = 0; v < static_cast<int>(gui::View::kCount); ++v) {
      CAPTURE(gui::view_name(static_cast<gui::View>(v)));
      st.view.active = static_cast<gui::View>(v);
      st.view.select_active = true;
      for (bool stacked : {false, true}) {
        st.view.stacked = stacked;
        for (int f = 0; f < 3; ++f) ui.frame(st, worker, {}, 1e9);
        ui.frame(st, worker, {1000, 500}, 1e9);
        ui.frame(st, worker, {150, 300}, 1e9);
        CHECK(ui.vertices() > 500);
      }
    }
  }
}

TEST_CASE("gui_pp: a bad pipeline set-up is one error naming the flag and back to pp 1 recovers") {
  sim::TrainSetup setup = pp_setup(5, 4);  // gpt2-small's 12 layers do not split over 5 stages
  gui::AppState st = pp_state("gpt2-small", setup, {"none"});
  gui::Worker worker;
  gui::update(st, worker, 1e9);
  CHECK(!st.graph_error.empty());
  CHECK(st.graph_error.find("--pp") != std::string::npos);
  CHECK(!st.runs[0].data);
  st.inputs.setup.pp = 1;
  st.inputs.setup.microbatches = 1;
  ++st.revision;
  gui::update(st, worker, 1e9);
  CHECK(st.graph_error.empty());
  REQUIRE(st.runs[0].data);
  CHECK(st.runs[0].data->pipeline == nullptr);
  CHECK(st.runs[0].data->stash_offset == 0);
}
