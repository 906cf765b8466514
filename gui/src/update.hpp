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
