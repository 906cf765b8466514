// Starting a session: the preset catalog and the initial state from loaded configs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "state.hpp"

namespace gui {

// Presets in the search folders (sim_io::list_models / list_devices).
Catalog make_catalog(std::vector<std::filesystem::path> dirs);

// The state for these configs and strategy specs (colours by position). Nothing is simulated
// until the first update().
AppState make_state(Catalog catalog, sim::ModelConfig model, std::string model_label,
                    sim::TrainSetup setup, sim::Device device, std::string device_label,
                    const std::vector<std::string>& strategies);

}  // namespace gui
