// actsim-gui: a GLFW window with OpenGL 3.3 around the windowless GUI (gui_panels). With
// --screenshot it renders until the simulations and the worker are done, saves a PNG and exits.
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "args.hpp"
#include "panels.hpp"
#include "png.hpp"
#include "session.hpp"
#include "update.hpp"

namespace {

void glfw_error(int code, const char* text) {
  std::fprintf(stderr, "actsim-gui: glfw error %d: %s\n", code, text);
}

// DejaVu Sans when installed (clearer than ImGui's built-in bitmap font), else the built-in one.
void load_font() {
  ImGuiIO& io = ImGui::GetIO();
  const char* kPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  std::error_code ec;
  if (std::filesystem::exists(kPath, ec) && io.Fonts->AddFontFromFileTTF(kPath, 15.0f)) return;
  io.Fonts->AddFontDefault();
}

// Frames to render after everything is computed before the screenshot: ImGui sizes some items
// (tables, tab bars) from the previous frame.
constexpr int kSettleFrames = 3;
constexpr double kScreenshotTimeoutS = 30;

}  // namespace

int main(int argc, char** argv) {
  gui_app::GuiArgs args;
  if (const auto rc = gui_app::parse_args(argc, argv, args)) return *rc;
  const bool headless = !args.screenshot.empty();

  glfwSetErrorCallback(nullptr);
  if (!glfwInit()) {
    const char* why = nullptr;
    glfwGetError(&why);
    std::fprintf(stderr, "actsim-gui: error: cannot open a window (is DISPLAY set? try xvfb-run): %s\n",
                 why ? why : "glfwInit failed");
    return 1;
  }
  glfwSetErrorCallback(glfw_error);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(args.width, args.height, "actsim", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "actsim-gui: error: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(headless ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui::StyleColorsDark();
  load_font();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  int rc = 0;
  {
    gui::AppState state = gui::make_state(gui::make_catalog(args.dirs), args.model, args.model_label,
                                          args.setup, args.device, args.device_label,
                                          args.strategies);
    state.view.active = args.view;
    state.view.stacked = args.stacked;
    state.view.fit_curves = args.fit_curves;
    state.view.snapshot_path = args.snapshot;
    state.snapshot = args.snapshot_data;
    state.view.fit_x = args.fit_x;
    state.view.fit_y = args.fit_y;
    state.inputs.stage_shown = args.stage;  // gui_pp
    if (headless) state.view.png_path = args.screenshot;
    gui::Worker worker;
    const auto start = std::chrono::steady_clock::now();
    int settled = 0;
    while (!glfwWindowShouldClose(window)) {
      glfwPollEvents();
      gui::update(state, worker);
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      if (headless) {
        // No interaction: wherever Xvfb's pointer sits, nothing is hovered.
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
        for (bool& down : io.MouseDown) down = false;
        io.MouseWheel = 0;
      }
      ImGui::NewFrame();
      gui::draw_app(state);
      ImGui::Render();
      int fb_w = 0, fb_h = 0;
      glfwGetFramebufferSize(window, &fb_w, &fb_h);
      glViewport(0, 0, fb_w, fb_h);
      glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (headless) {
        // Done when every strategy is simulated and the worker has finished the valley and fit
        // map (or the time-out passed: then the PNG shows what there is).
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // gui_pp: a pipeline requests no valley or fit map (their views say so): nothing to wait for.
        const bool stageless_done = gui::is_pipeline(state.inputs.setup) ||
                                    (state.valley && state.fitmap && state.valley->complete &&
                                     state.fitmap->complete);
        const bool done = state.stats.pending == 0 && worker.idle() && stageless_done;
        if (done || waited > kScreenshotTimeoutS) ++settled;
        if (settled > kSettleFrames) state.view.png_requested = true;
      }
      if (state.view.png_requested) {
        state.view.png_requested = false;
        const std::string err = gui_app::save_back_buffer_png(state.view.png_path, fb_w, fb_h);
        state.view.message = err.empty() ? "saved " + state.view.png_path : "error: " + err;
        if (headless) {
          if (!err.empty()) {
            std::fprintf(stderr, "actsim-gui: error: %s\n", err.c_str());
            rc = 1;
          }
          break;
        }
      }
      glfwSwapBuffers(window);
    }
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}
