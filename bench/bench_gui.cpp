// The GUI's CPU budget (DESIGN.md §8): frame time without a window for GPT-3 175B
// (models/korthikanti-175b.json, b = 1, s = 2048, t = 8 on models/devices/h100-sxm.json) with
// three strategies, with and without an edit that re-simulates them in the same frame; and the
// wall time until the worker has completed the valley and the fit map (micro-batch x sequence by
// default, and tensor parallel x ZeRO stage at dp 64: 7 x 4 cells).
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "session.hpp"
#include "sim_io/load.hpp"
#include "update.hpp"
#include "windowless.hpp"

namespace {

gui::AppState make_175b() {
  const std::vector<std::filesystem::path> dirs{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
  sim::TrainSetup setup;
  setup.micro_batch = 1;
  setup.seq = 2048;
  setup.tp = 8;
  return gui::make_state(gui::make_catalog(dirs), sim_io::load_model("korthikanti-175b", dirs),
                         "korthikanti-175b", setup, sim_io::load_device("h100-sxm", dirs),
                         "h100-sxm", {"none", "full", "selective"});
}

void wait_idle(const gui::Worker& worker) {
  while (!worker.idle()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

// One frame of view `range(0)`; with range(1) an edit first (micro-batch 1 <-> 2), so the frame
// re-simulates the three strategies (timelines included) before drawing.
void frame(benchmark::State& state) {
  gui::Windowless ui(1600, 1000);
  gui::AppState st = make_175b();
  gui::Worker worker;
  st.view.active = static_cast<gui::View>(state.range(0));
  st.view.select_active = true;
  for (int i = 0; i < 3; ++i) ui.frame(st, worker);
  wait_idle(worker);
  const bool edit = state.range(1) != 0;
  double resim_ms = 0;
  for (auto _ : state) {
    if (edit) {
      st.inputs.setup.micro_batch = 3 - st.inputs.setup.micro_batch;
      ++st.revision;
    }
    ui.frame(st, worker, {1000, 500}, 1e9);  // mouse over the view: hover work included
    resim_ms += st.stats.resimulate_ms;
    if (edit && st.stats.resimulated != 3) state.SkipWithError("edit did not re-simulate all three");
  }
  state.SetLabel(std::string(gui::view_name(st.view.active)) + (edit ? " + edit (3 re-simulations)" : ""));
  state.counters["resim_ms"] = resim_ms / static_cast<double>(state.iterations());
  state.counters["vertices"] = ui.vertices();
}

// Wall time from an edit to the worker's complete valley (96 plans) or fit map (6 x 6 cells x 3
// strategies), while the GUI keeps drawing frames; with the worker time of the first snapshot a
// frame drew and how many frames drew a partial one (it fills in progressively).
void background(benchmark::State& state) {
  const bool valley = state.range(0) == 0;
  gui::Windowless ui(1600, 1000);
  gui::AppState st = make_175b();
  if (state.range(0) == 2) {
    st.inputs.setup.dp = 64;
    st.view.fit_x = gui::default_axis(gui::FitKnob::kTp);
    st.view.fit_y = gui::default_axis(gui::FitKnob::kZero);
  }
  gui::Worker worker;
  ui.frame(st, worker);
  wait_idle(worker);
  double work_ms = 0, first_ms = 0;
  int64_t snapshots = 0;
  for (auto _ : state) {
    st.inputs.setup.micro_batch = 3 - st.inputs.setup.micro_batch;
    ++st.revision;
    double first = -1;
    for (;;) {
      ui.frame(st, worker);
      const bool current = valley ? st.valley && st.valley->key == st.valley_key
                                  : st.fitmap && st.fitmap->key == st.fitmap_key;
      const bool complete = current && (valley ? st.valley->complete : st.fitmap->complete);
      const double elapsed = !current ? 0 : valley ? st.valley->elapsed_ms : st.fitmap->elapsed_ms;
      if (current && first < 0) first = elapsed;
      if (current && !complete) ++snapshots;  // frames that drew a partial result
      if (complete) {
        work_ms += elapsed;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    first_ms += first;
    wait_idle(worker);  // the other job finishes outside the next measurement's start
  }
  const auto n = static_cast<double>(state.iterations());
  state.SetLabel(valley ? "valley complete"
                        : state.range(0) == 1 ? "fit map complete (b x s)" : "fit map complete (tp x ZeRO, dp 64)");
  state.counters["worker_ms"] = work_ms / n;
  state.counters["first_ms"] = first_ms / n;  // worker time of the first snapshot a frame drew
  state.counters["partial_frames"] = static_cast<double>(snapshots) / n;
}

}  // namespace

BENCHMARK(frame)
    ->ArgsProduct({{static_cast<int>(gui::View::kValley), static_cast<int>(gui::View::kMemory),
                    static_cast<int>(gui::View::kTimeline), static_cast<int>(gui::View::kFitMap),
                    static_cast<int>(gui::View::kCompare)},
                   {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(background)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

BENCHMARK_MAIN();
