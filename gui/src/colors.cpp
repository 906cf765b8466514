#include "colors.hpp"

namespace gui {

std::array<float, 3> default_strategy_color(int index) {
  // matplotlib's tab10, which stays distinguishable on a dark background; red moved last, as the
  // timeline's recompute colour is red.
  constexpr std::array<std::array<float, 3>, 10> kTab10{{{0.122f, 0.467f, 0.706f},
                                                         {1.000f, 0.498f, 0.055f},
                                                         {0.173f, 0.627f, 0.173f},
                                                         {0.580f, 0.404f, 0.741f},
                                                         {0.549f, 0.337f, 0.294f},
                                                         {0.890f, 0.467f, 0.761f},
                                                         {0.498f, 0.498f, 0.498f},
                                                         {0.737f, 0.741f, 0.133f},
                                                         {0.090f, 0.745f, 0.812f},
                                                         {0.839f, 0.153f, 0.157f}}};
  return kTab10[static_cast<size_t>(index < 0 ? 0 : index) % kTab10.size()];
}

ImU32 to_u32(const std::array<float, 3>& c, float alpha) {
  return ImGui::ColorConvertFloat4ToU32(ImVec4(c[0], c[1], c[2], alpha));
}

ImU32 category_color(sim::Category c) {
  switch (c) {
    case sim::Category::kWeights: return IM_COL32(90, 110, 160, 255);
    case sim::Category::kGrads: return IM_COL32(120, 150, 200, 255);
    case sim::Category::kOptimizer: return IM_COL32(60, 75, 120, 255);
    case sim::Category::kActivations: return IM_COL32(230, 140, 50, 255);
    case sim::Category::kRecomputed: return IM_COL32(220, 70, 90, 255);
    case sim::Category::kActGrads: return IM_COL32(90, 180, 120, 255);
    case sim::Category::kCasts: return IM_COL32(170, 130, 200, 255);
    case sim::Category::kTransient: return IM_COL32(230, 210, 90, 255);
    case sim::Category::kWorkspace: return IM_COL32(140, 140, 140, 255);
    case sim::Category::kComm: return IM_COL32(100, 190, 200, 255);
    case sim::Category::kCount: break;
  }
  return IM_COL32(255, 255, 255, 255);
}

ImU32 phase_color(sim::Phase p, float alpha) {
  const auto a = static_cast<int>(alpha * 255.0f);
  switch (p) {
    case sim::Phase::kForward: return IM_COL32(70, 130, 220, a);
    case sim::Phase::kBackward: return IM_COL32(90, 180, 110, a);
    case sim::Phase::kRecompute: return IM_COL32(225, 60, 80, a);
    case sim::Phase::kOptimizer: return IM_COL32(160, 160, 160, a);
  }
  return IM_COL32(255, 255, 255, a);
}

// White, unlike every strategy's default colour (tab10) and the capacity's red.
ImU32 measured_color() { return IM_COL32(245, 245, 245, 235); }

ImU32 capacity_color() { return IM_COL32(255, 80, 80, 255); }
ImU32 stash_color() { return IM_COL32(200, 160, 60, 90); }  // gui_pp
ImU32 grid_color() { return IM_COL32(255, 255, 255, 28); }
ImU32 text_dim_color() { return IM_COL32(170, 170, 170, 255); }

}  // namespace gui
