// actsim-gui's command line: the common flags of every front end (cli_common, DESIGN.md §7) for
// the initial configuration, plus the headless screenshot options.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"
#include "state.hpp"

namespace gui_app {

struct GuiArgs {
  std::string screenshot;          // --screenshot FILE: render headless, save a PNG, exit
  int width = 1600;                // --width (window and PNG)
  int height = 1000;               // --height
  gui::View view = gui::View::kMemory;  // --view: the tab shown first
  bool stacked = false;            // --stacked: memory view stacked by category
  bool fit_curves = false;         // --fit-curves: memory view's y axis fits the curves
  std::string snapshot;            // --snapshot FILE: a real step's PyTorch memory snapshot, overlaid
  std::shared_ptr<const gui::SnapshotData> snapshot_data;  // it, loaded
  gui::FitAxis fit_x = gui::default_axis(gui::FitKnob::kMicroBatch);  // --fit-x: fit map columns
  gui::FitAxis fit_y = gui::default_axis(gui::FitKnob::kSeq);         // --fit-y: fit map rows
  std::vector<std::filesystem::path> dirs;  // model search folders
  sim::ModelConfig model;          // first --model, loaded
  std::string model_label;
  sim::Device device;              // first --device, loaded
  std::string device_label;
  sim::TrainSetup setup;           // first value of every set-up flag
  std::vector<std::string> strategies;  // every --strategy, canonical
  // gui_pp: --stage: the pipeline stage the memory and timeline views show (-1: each strategy's
  // worst); below --pp
  int64_t stage = -1;
};

// Parses and loads. Returns nullopt to go on, or the exit status after printing help (0) or a
// one-line "actsim-gui: error: ..." to stderr (2).
std::optional<int> parse_args(int argc, char** argv, GuiArgs& out);

}  // namespace gui_app
