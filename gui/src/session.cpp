#include "session.hpp"

#include "colors.hpp"
#include "sim_io/load.hpp"

namespace gui {

const char* view_name(View v) {
  switch (v) {
    case View::kValley: return "valley";
    case View::kMemory: return "memory";
    case View::kTimeline: return "timeline";
    case View::kFitMap: return "fitmap";
    case View::kCompare: return "compare";
    case View::kCount: break;
  }
  return "?";
}

std::optional<View> parse_view(std::string_view s) {
  for (int i = 0; i < static_cast<int>(View::kCount); ++i)
    if (s == view_name(static_cast<View>(i))) return static_cast<View>(i);
  return std::nullopt;
}

Catalog make_catalog(std::vector<std::filesystem::path> dirs) {
  Catalog c;
  for (const sim_io::CatalogEntry& e : sim_io::list_models(dirs)) c.models.push_back(e.name);
  for (const sim_io::CatalogEntry& e : sim_io::list_devices(dirs)) c.devices.push_back(e.name);
  c.dirs = std::move(dirs);
  return c;
}

AppState make_state(Catalog catalog, sim::ModelConfig model, std::string model_label,
                    sim::TrainSetup setup, sim::Device device, std::string device_label,
                    const std::vector<std::string>& strategies) {
  AppState st;
  st.catalog = std::move(catalog);
  st.inputs.model = std::move(model);
  st.inputs.model_label = std::move(model_label);
  st.inputs.setup = setup;
  st.inputs.device = std::move(device);
  st.inputs.device_label = std::move(device_label);
  for (size_t i = 0; i < strategies.size(); ++i) {
    StrategyEntry e;
    e.spec = strategies[i];
    e.color = default_strategy_color(static_cast<int>(i));
    st.inputs.strategies.push_back(std::move(e));
  }
  return st;
}

}  // namespace gui
