// The per-frame update before drawing: edits become a new graph and re-simulated strategies
// (within a CPU budget, so the focused view follows an edit in the same frame), background
// requests for the valley and the fit map, and the worker's newest snapshots.
#pragma once

#include <memory>

#include "state.hpp"
#include "worker.hpp"

namespace gui {

// Default re-simulation budget per frame: most of a 60 Hz frame's 16 ms, leaving time to draw.
inline constexpr double kResimulateBudgetMs = 12;

// One strategy simulated with timeline and spans on `graph`. Throws sim::ConfigError.
std::shared_ptr<const RunData> simulate_run(std::shared_ptr<const sim::Graph> graph,
                                            const sim::Strategy& strategy,
                                            const sim::Device& device);

// --- gui_pp: pipelines (pp > 1 or micro-batches > 1) ---
// Whether the set-up is simulated per stage (sim::simulate_pipeline), not as one graph.
bool is_pipeline(const sim::TrainSetup& setup);

// One strategy over the pipeline: every stage simulated with timeline and spans
// (sim::simulate_pipeline; budget: planned per stage by sim::plan_pipeline, then simulated so),
// the shown stage's graph (sim::build_stage_graph), plan and result in the RunData. `stage` < 0
// (or past the last stage): the worst stage. Throws sim::ConfigError.
std::shared_ptr<const RunData> simulate_pipeline_run(const sim::ModelConfig& model,
                                                     const sim::TrainSetup& setup,
                                                     const sim::Device& device,
                                                     const sim::Strategy& strategy, int64_t stage);

// The same pipeline run shown at another stage: its PipelineResult and per-stage strategies kept
// (nothing simulated again), the stage's graph built and its plan resolved. Throws sim::ConfigError.
std::shared_ptr<const RunData> restage_pipeline_run(const RunData& run,
                                                    const sim::ModelConfig& model,
                                                    const sim::TrainSetup& setup,
                                                    const sim::Device& device, int64_t stage);

// The whole step's result: the pipeline's summary (worst stage's memory; time, FLOPs and
// throughput of all micro-batches and the bubble), else the run's own.
const sim::Result& step_result(const RunData& run);

// The highest point of the memory curve the views draw: the timeline's highest allocated sample
// plus the in-flight stash band (0 without a pipeline).
int64_t curve_peak_bytes(const RunData& run);

// Parses the strategies and rebuilds the graph when the inputs changed since the last call.
void apply_edits(AppState& state);

// Re-simulates stale strategies until `budget_ms` of wall time is spent (at least one per call);
// the rest follow in later frames. Fills state.stats.
void resimulate(AppState& state, double budget_ms);

// The categories of the focused strategy, when the memory view stacks them.
void ensure_categories(AppState& state);

// Opens ViewState::snapshot_path when asked (snapshot_requested; an empty path closes it; an
// error goes to ViewState::message and keeps what was open), and re-places the snapshot on the
// focused run whenever either changed.
void ensure_snapshot(AppState& state);

// The snapshot read and replayed (the first device with a trace). Throws sim::ConfigError.
std::shared_ptr<const SnapshotData> load_snapshot_data(const std::string& path);

// Posts valley and fit map requests whose keys changed; takes the worker's newest snapshots.
void sync_worker(AppState& state, Worker& worker);

// All of the above, in order.
void update(AppState& state, Worker& worker, double budget_ms = kResimulateBudgetMs);

// The blocks the valley simulates: ViewState::valley_n, or the model's layers when 0.
int64_t valley_blocks(const AppState& state);

}  // namespace gui
