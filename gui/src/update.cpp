#include "update.hpp"

#include <algorithm>
#include <chrono>

#include "categories.hpp"
#include "clock.hpp"
#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/planner_pipeline.hpp"  // gui_pp
#include "sim/setup.hpp"

namespace gui {

namespace {

// Lanes and phase bands of a run whose result is filled.
void index_spans(RunData& rd) {
  RunData* d = &rd;
  // Lanes: each stream's spans in start order (the engine appends them in clock order).
  for (int32_t i = 0; i < static_cast<int32_t>(d->result.spans.size()); ++i) {
    const int32_t stream = d->result.spans[i].stream;
    if (stream >= 0 && stream < static_cast<int32_t>(d->lanes.size())) d->lanes[stream].push_back(i);
  }
  for (auto& lane : d->lanes) {
    std::stable_sort(lane.begin(), lane.end(), [&](int32_t a, int32_t b) {
      return d->result.spans[a].start_ns < d->result.spans[b].start_ns;
    });
  }
  d->bands = phase_bands(d->result);
}

}  // namespace

std::shared_ptr<const RunData> simulate_run(std::shared_ptr<const sim::Graph> graph,
                                            const sim::Strategy& strategy,
                                            const sim::Device& device) {
  const auto t0 = Clock::now();
  auto d = std::make_shared<RunData>();
  // budget: shows the planner's plan (sim/planner.hpp), simulated like any other.
  if (strategy.kind == sim::StrategyKind::kBudget) {
    sim::BudgetPlan planned = sim::plan_budget(*graph, device, strategy.k);
    d->plan = std::move(planned.plan);
    d->planned = planned.strategy.canonical();  // as cmd_run.cpp writes the row's strategy
  } else {
    d->plan = sim::resolve(strategy, graph->n_blocks);
  }
  sim::SimOptions options;
  options.record_timeline = true;
  d->result = sim::simulate_plan(*graph, d->plan, device, options);
  d->graph = std::move(graph);
  index_spans(*d);
  d->simulate_ms = ms_since(t0);
  return d;
}

// --- gui_pp: pipelines ---
bool is_pipeline(const sim::TrainSetup& setup) { return setup.pp > 1 || setup.microbatches > 1; }

namespace {

// The shown stage of a pipeline run whose `pipeline` and `per_stage` are filled: the stage's graph
// (sim::build_stage_graph), plan and result, and the stash band.
void show_stage(RunData& d, const sim::ModelConfig& model, const sim::TrainSetup& setup,
                const sim::Device& device, int64_t stage) {
  const sim::PipelineResult& pipe = *d.pipeline;
  const int64_t p = static_cast<int64_t>(pipe.stages.size());
  d.stage = stage >= 0 && stage < p ? stage : pipe.worst;
  const sim::StageResult& sr = pipe.stages[static_cast<size_t>(d.stage)];
  auto graph = std::make_shared<sim::Graph>();
  sim::build_stage_graph(model, setup, device, d.stage, *graph);
  d.plan = sim::resolve(d.per_stage[static_cast<size_t>(d.stage)], graph->n_blocks);
  d.result = sr.result;  // peaks with the in-flight stash added; the timeline without it
  d.stash_offset = sr.in_flight_bytes - sr.stash_bytes;
  d.graph = std::move(graph);
  for (auto& lane : d.lanes) lane.clear();
  index_spans(d);
}

}  // namespace

std::shared_ptr<const RunData> simulate_pipeline_run(const sim::ModelConfig& model,
                                                     const sim::TrainSetup& setup,
                                                     const sim::Device& device,
                                                     const sim::Strategy& strategy, int64_t stage) {
  const auto t0 = Clock::now();
  auto d = std::make_shared<RunData>();
  if (strategy.kind == sim::StrategyKind::kBudget) {
    // As `actsim plan --pp` (cli/src/cmd_plan_pipeline.cpp): each stage planned under its
    // in-flight stash and verified by simulate_pipeline; simulated again here for the timelines.
    const sim::PipelinePlan plan = sim::plan_pipeline(model, setup, device, strategy.k);
    d->per_stage = plan.per_stage;
    d->planned = plan.strategy.canonical();  // as cmd_run.cpp writes `run --pp`'s strategy
    for (const sim::StagePlan& sp : plan.stages)
      d->stage_plans.push_back(sp.strategy.canonical() + "  (" + sp.source + ")");
  } else {
    d->per_stage = sim::stage_strategies(strategy, model.layers, setup.pp);
  }
  sim::SimOptions options;
  options.record_timeline = true;
  d->pipeline = std::make_shared<const sim::PipelineResult>(
      sim::simulate_pipeline(model, setup, device, d->per_stage, options));
  show_stage(*d, model, setup, device, stage);
  d->simulate_ms = ms_since(t0);
  return d;
}

std::shared_ptr<const RunData> restage_pipeline_run(const RunData& run,
                                                    const sim::ModelConfig& model,
                                                    const sim::TrainSetup& setup,
                                                    const sim::Device& device, int64_t stage) {
  const auto t0 = Clock::now();
  auto d = std::make_shared<RunData>();
  d->pipeline = run.pipeline;
  d->per_stage = run.per_stage;
  d->stage_plans = run.stage_plans;
  d->planned = run.planned;
  show_stage(*d, model, setup, device, stage);
  d->simulate_ms = ms_since(t0);
  return d;
}

const sim::Result& step_result(const RunData& run) {
  return run.pipeline ? run.pipeline->summary : run.result;
}

int64_t curve_peak_bytes(const RunData& run) {
  int64_t top = 0;
  for (const sim::MemorySample& m : run.result.timeline) top = std::max(top, m.allocated_bytes);
  return top + run.stash_offset;
}

void apply_edits(AppState& st) {
  if (st.parsed_revision == st.revision) return;
  st.parsed_revision = st.revision;
  st.graph.reset();
  st.graph_error.clear();
  // polish: the resolved set-up, once per revision (its error, if any, is the graph's below)
  st.resolved_revision = 0;
  try {
    st.resolved_setup = sim::resolve_setup(st.inputs.model, st.inputs.setup);
    st.resolved_revision = st.revision;
  } catch (const sim::ConfigError&) {
  }
  try {
    sim::validate(st.inputs.device);
    if (is_pipeline(st.inputs.setup)) {  // gui_pp: stage 0's graph checks the set-up
      auto g = std::make_shared<sim::Graph>();
      sim::build_stage_graph(st.inputs.model, st.inputs.setup, st.inputs.device, 0, *g);
      st.graph = std::move(g);
    } else {
      st.graph = std::make_shared<const sim::Graph>(
          sim::build_graph(st.inputs.model, st.inputs.setup, st.inputs.device));
    }
  } catch (const sim::ConfigError& e) {
    st.graph_error = e.what();
  }
  for (StrategyEntry& e : st.inputs.strategies) {
    e.strategy.reset();
    e.error.clear();
    try {
      sim::Strategy s = sim::parse_strategy(e.spec);
      // Range errors show in the panel; a budget is planned when the run is simulated.
      // gui_pp: a pipeline's strategies are split per stage (sim::stage_strategies) when run.
      if (st.graph && s.kind != sim::StrategyKind::kBudget && !is_pipeline(st.inputs.setup))
        sim::resolve(s, st.graph->n_blocks);
      e.strategy = std::move(s);
    } catch (const sim::ConfigError& err) {
      e.error = err.what();
    }
  }
  st.runs.resize(st.inputs.strategies.size());
  if (st.view.focused >= static_cast<int>(st.runs.size())) st.view.focused = 0;
}

void resimulate(AppState& st, double budget_ms) {
  const auto t0 = Clock::now();
  st.stats = {};
  for (size_t i = 0; i < st.runs.size(); ++i) {
    Run& run = st.runs[i];
    if (run.revision == st.revision) {
      // Only the stage shown changed: the pipeline already simulated is shown at the new stage
      // (its graph built again), not simulated again.
      if (run.stage_revision != st.stage_revision) {
        run.stage_revision = st.stage_revision;
        if (run.data && run.data->pipeline) {
          run.categories.reset();
          try {
            run.data = restage_pipeline_run(*run.data, st.inputs.model, st.inputs.setup,
                                            st.inputs.device, st.inputs.stage_shown);
          } catch (const sim::ConfigError& err) {
            run.data.reset();
            run.error = err.what();
          }
          ++st.stats.restaged;
        }
      }
      continue;
    }
    if (st.stats.resimulated > 0 && ms_since(t0) >= budget_ms) {
      ++st.stats.pending;
      continue;
    }
    const StrategyEntry& e = st.inputs.strategies[i];
    run.revision = st.revision;
    run.stage_revision = st.stage_revision;
    run.categories.reset();
    run.error.clear();
    if (!st.graph) {
      run.data.reset();
      run.error = st.graph_error;
      continue;
    }
    if (!e.strategy) {
      run.data.reset();
      run.error = e.error;
      continue;
    }
    try {
      run.data = is_pipeline(st.inputs.setup)  // gui_pp
                     ? simulate_pipeline_run(st.inputs.model, st.inputs.setup, st.inputs.device,
                                             *e.strategy, st.inputs.stage_shown)
                     : simulate_run(st.graph, *e.strategy, st.inputs.device);
    } catch (const sim::ConfigError& err) {
      run.data.reset();
      run.error = err.what();
    }
    ++st.stats.resimulated;
  }
  st.stats.resimulate_ms = ms_since(t0);
  if (st.view.time_auto) {
    int64_t end = 0;
    for (const Run& r : st.runs)
      if (r.data) end = std::max(end, r.data->result.step_time_ns);
    if (end > 0) st.view.time = {0, static_cast<double>(end)};
  }
}

void ensure_categories(AppState& st) {
  if (!st.view.stacked || st.view.focused < 0 || st.view.focused >= static_cast<int>(st.runs.size()))
    return;
  Run& run = st.runs[st.view.focused];
  if (!run.data || run.categories) return;
  run.categories = std::make_shared<const CategorySeries>(
      category_series(*run.data->graph, run.data->plan, run.data->result));
}

std::shared_ptr<const SnapshotData> load_snapshot_data(const std::string& path) {
  const actsim_cli::Snapshot snap = actsim_cli::load_snapshot(path);
  auto d = std::make_shared<SnapshotData>();
  d->file = path;
  d->device = actsim_cli::pick_snapshot_device(snap, -1, path);
  d->peaks = actsim_cli::analyze_snapshot(d->device, path);
  return d;
}

void ensure_snapshot(AppState& st) {
  ViewState& view = st.view;
  if (view.snapshot_requested) {
    view.snapshot_requested = false;
    if (view.snapshot_path.empty()) {
      st.snapshot.reset();
      view.message = "snapshot closed";
    } else {
      try {
        st.snapshot = load_snapshot_data(view.snapshot_path);
        view.message = "opened " + view.snapshot_path;
      } catch (const sim::ConfigError& e) {
        view.message = std::string("error: ") + e.what();
      }
    }
  }
  const Run* run = view.focused >= 0 && view.focused < static_cast<int>(st.runs.size())
                       ? &st.runs[view.focused]
                       : nullptr;
  if (!st.snapshot || !run || !run->data) {
    st.overlay.reset();
    return;
  }
  if (st.overlay && st.overlay->snapshot == st.snapshot && st.overlay->run == run->data) return;
  auto o = std::make_shared<SnapshotOverlay>();
  o->snapshot = st.snapshot;
  o->run = run->data;
  o->strategy = view.focused;
  o->points = actsim_cli::overlay_curve(st.snapshot->device, st.snapshot->peaks, run->data->result);
  o->simulated = actsim_cli::simulated_at_peak(*run->data->graph, run->data->plan, run->data->result);
  o->match = actsim_cli::match_tensors(o->simulated, st.snapshot->peaks.at_peak);
  st.overlay = std::move(o);
}

int64_t valley_blocks(const AppState& st) {
  return st.view.valley_n > 0 ? st.view.valley_n : st.inputs.model.layers;
}

void sync_worker(AppState& st, Worker& worker) {
  // gui_pp: the valley and the fit map simulate one graph per cell, not pipelines; their views
  // say so instead (nothing is requested, and what they hold is not drawn).
  if (is_pipeline(st.inputs.setup)) return;
  const ValleyKey vk{st.revision, valley_blocks(st)};
  if (!(vk == st.valley_key)) {
    st.valley_key = vk;
    ValleyRequest r;
    r.key = vk;
    r.model = st.inputs.model;
    r.model.layers = vk.n;
    r.setup = st.inputs.setup;
    r.device = st.inputs.device;
    worker.request(std::move(r));
  }
  const FitMapKey fk{st.revision, normalized(st.view.fit_x), normalized(st.view.fit_y)};
  if (!(fk == st.fitmap_key)) {
    st.fitmap_key = fk;
    FitMapRequest r;
    r.key = fk;
    r.model = st.inputs.model;
    r.setup = st.inputs.setup;
    r.device = st.inputs.device;
    for (size_t i = 0; i < st.inputs.strategies.size(); ++i) {
      if (!st.inputs.strategies[i].strategy) continue;
      r.strategies.push_back(*st.inputs.strategies[i].strategy);
      r.entries.push_back(static_cast<int>(i));
    }
    worker.request(std::move(r));
  }
  if (auto v = worker.valley()) st.valley = std::move(v);
  if (auto f = worker.fitmap()) st.fitmap = std::move(f);
}

void update(AppState& st, Worker& worker, double budget_ms) {
  apply_edits(st);
  resimulate(st, budget_ms);
  ensure_categories(st);
  ensure_snapshot(st);
  sync_worker(st, worker);
}

}  // namespace gui
