// What the GUI holds (STYLE.md rule 9): the edited configs, one immutable simulation per strategy
// (shared_ptr<const ...>, so a view keeps drawing the last result while a new one is made), the
// worker's latest valley and fit map, and the view state. Panels are free functions over these;
// nothing lives in function-local statics.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fit_axes.hpp"
#include "gui_plot/axis.hpp"
#include "phases.hpp"
#include "sim/graph.hpp"
#include "sim/pipeline.hpp"  // gui_pp
#include "sim/result.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "snapshot.hpp"
#include "snapshot_compare.hpp"
#include "snapshot_overlay.hpp"
#include "worker.hpp"

namespace gui {

// Model and device presets found in the models folders (sim_io::list_models / list_devices).
struct Catalog {
  std::vector<std::filesystem::path> dirs;  // search folders, for loading by name
  std::vector<std::string> models;          // preset names (file stems), sorted
  std::vector<std::string> devices;
};

// One strategy as the user composed it.
struct StrategyEntry {
  std::string spec;                  // canonical or as typed: "every:4", "custom:..."
  std::array<float, 3> color{};      // RGB 0..1, its colour in every view
  std::optional<sim::Strategy> strategy;  // parsed spec; empty when `error` is set
  std::string error;                 // parse or resolve error of the spec
};

// The edited configuration. Every edit bumps AppState::revision.
struct Inputs {
  sim::ModelConfig model;
  std::string model_label;    // preset name, file path, or "custom" once edited
  sim::TrainSetup setup;
  sim::Device device;
  std::string device_label;   // preset name or "custom" once edited
  std::vector<StrategyEntry> strategies;
  // --- gui_pp: the pipeline stage whose graph and simulation feed the memory and timeline views
  // when pp > 1 or micro-batches > 1; -1: each strategy's worst stage (PipelineResult::worst) ---
  int64_t stage_shown = -1;
};

// The simulation of one strategy for one revision of the inputs; immutable once made.
struct RunData {
  std::shared_ptr<const sim::Graph> graph;  // ops for hover (shared by all strategies)
  sim::Plan plan;
  sim::Result result;                       // with timeline and spans
  std::array<std::vector<int32_t>, 6> lanes;  // indices into result.spans per stream, by start
  std::vector<PhaseBand> bands;             // phase_bands(result)
  double simulate_ms = 0;                   // wall time of the simulation (CPU)
  // --- gui_pp: a pipeline (pp > 1 or micro-batches > 1), simulated per stage by
  // sim::simulate_pipeline. `graph`, `plan` and `result` above are then the shown stage's
  // (sim::build_stage_graph; one micro-batch in the steady state): result's peaks include the
  // stage's in-flight stash (the other micro-batches'), its timeline does not, so the views draw
  // the timeline raised by stash_offset (a constant band), and the curve's peak is the stage's. ---
  std::shared_ptr<const sim::PipelineResult> pipeline;  // null: one graph, no stages
  int64_t stage = 0;         // the stage shown
  int64_t stash_offset = 0;  // stages[stage].in_flight_bytes - stages[stage].stash_bytes
  std::vector<std::string> stage_plans;  // budget: each stage's plan ("custom:... (DP)")
  std::vector<sim::Strategy> per_stage;  // the strategy each stage ran (stage_strategies / plan)
  // budget: the planned strategy's canonical spec (the custom: spec over all blocks that
  // `actsim run` writes as the row's strategy); empty for every other strategy.
  std::string planned;
};

// Memory by category at every timeline sample (see categories.hpp); computed on demand.
struct CategorySeries {
  std::vector<sim::Breakdown> at;  // one per Result::timeline sample
};

struct Run {
  uint64_t revision = 0;                         // inputs revision it was made for; 0: none yet
  uint64_t stage_revision = 0;                   // AppState::stage_revision it shows
  std::shared_ptr<const RunData> data;           // null until simulated or on error
  std::string error;                             // why data is null (config error)
  std::shared_ptr<const CategorySeries> categories;  // of `data`, when stacked mode asked
};

// A real step's PyTorch memory snapshot opened beside the simulations (issue 14): the device
// whose trace is read, replayed (actsim_cli::analyze_snapshot). Immutable once loaded.
struct SnapshotData {
  std::string file;
  actsim_cli::SnapshotDevice device;
  actsim_cli::SnapshotPeaks peaks;
};

// The snapshot set against one run (the focused strategy's): its curve on that run's time axis
// (actsim_cli::overlay_curve) and the tensors live at both peaks matched (match_tensors).
struct SnapshotOverlay {
  std::shared_ptr<const SnapshotData> snapshot;  // what it was made from
  std::shared_ptr<const RunData> run;
  int strategy = -1;                             // index of the run's strategy entry
  std::vector<actsim_cli::OverlayPoint> points;
  std::vector<actsim_cli::SimTensor> simulated;  // live at the simulated peak
  actsim_cli::TensorMatch match;
};

enum class View : uint8_t { kValley, kMemory, kTimeline, kFitMap, kCompare, kCount };
const char* view_name(View v);                    // "valley", "memory", ... (the --view values)
std::optional<View> parse_view(std::string_view s);

// Where the views look; edited by the views only.
struct ViewState {
  View active = View::kMemory;
  bool select_active = true;     // make `active` the selected tab on the next frame
  int focused = 0;               // strategy whose phases shade the memory view and that stacks
  bool stacked = false;          // memory view: stacked by category (focused strategy)
  bool fit_curves = false;       // memory view: y axis fits the curves, not the device capacity
  gui_plot::Range time{0, 1};    // shared time axis of the memory and timeline views (ns)
  bool time_auto = true;         // follow the whole step until the user zooms or pans
  int64_t valley_n = 0;          // blocks simulated for the valley; 0: the model's layers
  FitAxis fit_x = default_axis(FitKnob::kMicroBatch);  // fit map columns
  FitAxis fit_y = default_axis(FitKnob::kSeq);         // fit map rows
  std::string hf_path;           // model panel: path of a config.json to open
  std::string csv_path = "actsim-compare.csv";
  std::string png_path = "actsim-view.png";
  std::string snapshot_path;     // memory view: a PyTorch snapshot (.pickle, or the converter's .json)
  bool snapshot_requested = false;  // update() opens snapshot_path (empty: closes the snapshot)
  bool png_requested = false;    // the front end saves the next frame to png_path and clears it
  std::string message;           // result of the last load or export, shown in the status line
};

// Timing of the last frame's update, for the status line and the benchmark.
struct FrameStats {
  double resimulate_ms = 0;  // re-simulation done this frame
  int resimulated = 0;       // strategies re-simulated this frame
  int pending = 0;           // strategies still stale after this frame
  int restaged = 0;          // pipeline runs shown at another stage, not simulated again
};

struct AppState {
  Catalog catalog;
  Inputs inputs;
  uint64_t revision = 1;           // bumped on every edit of `inputs` but the stage shown
  uint64_t stage_revision = 0;     // bumped when only Inputs::stage_shown changed
  uint64_t parsed_revision = 0;    // strategies parsed and graph built for this revision
  std::shared_ptr<const sim::Graph> graph;
  std::string graph_error;         // model/setup/device error of this revision
  std::vector<Run> runs;           // one per Inputs::strategies entry
  std::shared_ptr<const ValleyData> valley;  // latest snapshot from the worker
  std::shared_ptr<const FitMapData> fitmap;
  ValleyKey valley_key;            // what was last requested
  FitMapKey fitmap_key;
  ViewState view;
  FrameStats stats;
  std::shared_ptr<const SnapshotData> snapshot;    // opened snapshot; null: none
  std::shared_ptr<const SnapshotOverlay> overlay;  // of `snapshot` on the focused run
  // polish: inputs.setup with the implementation's defaults made explicit (sim::resolve_setup),
  // resolved once per edit by apply_edits for the status line and the set-up panel
  sim::TrainSetup resolved_setup;
  uint64_t resolved_revision = 0;  // the revision resolved_setup is of; 0: it did not resolve
};

}  // namespace gui
