// actsim-snapshot-gen: a PyTorch-format memory snapshot (torch.cuda.memory._snapshot()'s
// structure, as JSON: python/tests/snapshot_fixtures.py's json_to_pickle pickles it) of one step
// run by the CPU reference executor (harness/executor), every allocation and free it makes, in
// order, so that `actsim snapshot` and `actsim compare` are tested end to end without a GPU.
//
// What stands for PyTorch's: each storage gets a fresh 512-byte aligned address in a segment of
// its own rounded size (segment_alloc before its alloc, segment_free after its free_completed), so
// reserved equals allocated; trace sizes are the storage's exact bytes (PyTorch records requested
// sizes); time_us counts events. Frames, innermost first: "<model>/model.py", line = the producing
// op's index, function = the op's name (the role for persistent storages, "workspace" for an
// event's transient), then, while backward runs, the autograd engine's C++ frame, and in the
// optimizer a torch/optim frame: the phase hints snapshot.py derives from real frames.
// Usage: actsim-snapshot-gen [common flags: one configuration, --allocator exact] -o FILE.json
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "flags.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sweep.hpp"

namespace {

using nlohmann::ordered_json;

// Forwards to the CPU backend and records what PyTorch's allocator would trace.
class Recorder : public executor::Backend {
 public:
  Recorder(const sim::Graph& g, std::unique_ptr<executor::Backend> inner, std::string model)
      : g_(g), inner_(std::move(inner)), file_(model + "/model.py") {}

  void allocate(int32_t storage, int64_t bytes) override {
    const sim::Storage& st = g_.storages[static_cast<std::size_t>(storage)];
    const std::string name = st.producer >= 0
                                 ? std::string(g_.ops[static_cast<std::size_t>(st.producer)].name)
                                 : std::string(st.role);
    const int64_t addr = place(bytes);
    live_[storage] = {addr, bytes, frames(name, st.producer)};
    alloc(addr, bytes, live_[storage].frames);
    inner_->allocate(storage, bytes);
  }
  void release(int32_t storage) override {
    const Live b = live_.at(storage);
    live_.erase(storage);
    free(b.addr, b.bytes, frames("release", -1));
    inner_->release(storage);
  }
  void scratch(int64_t bytes) override {
    scratch_.push_back({place(bytes), bytes});
    alloc(scratch_.back().first, bytes, frames("workspace", -1));
    scratch_events_.push_back(trace_.size() - 1);
    inner_->scratch(bytes);
  }
  void release_scratch() override {
    for (const auto& [addr, bytes] : scratch_) free(addr, bytes, frames("workspace", -1));
    scratch_.clear();
    scratch_events_.clear();
    inner_->release_scratch();
  }
  void initialize_persistent() override { inner_->initialize_persistent(); }
  void forward(int32_t op) override { inner_->forward(op); }
  void backward(int32_t op, const std::vector<int32_t>& reads) override {
    backward_ = true;
    inner_->backward(op, reads);
  }
  void optimizer(executor::StepResult& out) override {
    optimizer_ = true;
    // The walker takes the optimizer event's workspace before this call: it is the optimizer's.
    for (std::size_t i : scratch_events_) trace_[i]["frames"] = frames("workspace", -1);
    inner_->optimizer(out);
  }

  // The state at the end (the persistent storages still live) and the trace.
  ordered_json snapshot() const {
    ordered_json segments = ordered_json::array();
    for (const auto& [storage, b] : live_) {
      const int64_t size = rounded(b.bytes);
      ordered_json block{{"address", b.addr}, {"size", size}, {"requested_size", b.bytes},
                         {"state", "active_allocated"}, {"frames", b.frames}};
      segments.push_back({{"device", 0}, {"address", b.addr}, {"total_size", size},
                          {"stream", 0}, {"segment_type", "large"}, {"allocated_size", size},
                          {"active_size", size}, {"blocks", ordered_json::array({block})}});
    }
    return {{"segments", segments}, {"device_traces", ordered_json::array({trace_})}};
  }

 private:
  static int64_t rounded(int64_t bytes) { return bytes < 512 ? 512 : (bytes + 511) / 512 * 512; }
  int64_t place(int64_t bytes) {
    const int64_t addr = next_;
    next_ += rounded(bytes);
    return addr;
  }
  ordered_json frames(const std::string& name, int32_t op) const {
    ordered_json f = ordered_json::array();
    f.push_back({{"filename", file_}, {"line", op}, {"name", name}});
    if (optimizer_) {
      f.push_back({{"filename", "/usr/lib/python3/dist-packages/torch/optim/adam.py"},
                   {"line", 0}, {"name", "step"}});
    } else if (backward_) {
      f.push_back({{"filename", "??"}, {"line", 0},
                   {"name", "torch::autograd::Engine::evaluate_function"}});
    }
    f.push_back({{"filename", "train.py"}, {"line", 1}, {"name", "<module>"}});
    return f;
  }
  void event(const char* action, int64_t addr, int64_t bytes, const ordered_json& f) {
    trace_.push_back({{"action", action}, {"addr", addr}, {"size", bytes}, {"stream", 0},
                      {"time_us", t_++}, {"frames", f}});
  }
  void alloc(int64_t addr, int64_t bytes, const ordered_json& f) {
    event("segment_alloc", addr, rounded(bytes), ordered_json::array());
    event("alloc", addr, bytes, f);
  }
  void free(int64_t addr, int64_t bytes, const ordered_json& f) {
    event("free_requested", addr, bytes, f);
    event("free_completed", addr, bytes, f);
    event("segment_free", addr, rounded(bytes), ordered_json::array());
  }

  const sim::Graph& g_;
  std::unique_ptr<executor::Backend> inner_;
  std::string file_;
  struct Live {
    int64_t addr = 0;
    int64_t bytes = 0;
    ordered_json frames;
  };
  std::map<int32_t, Live> live_;  // by storage
  std::vector<std::pair<int64_t, int64_t>> scratch_;
  std::vector<std::size_t> scratch_events_;  // the running event's workspace allocs in trace_
  ordered_json trace_ = ordered_json::array();
  int64_t next_ = int64_t{1} << 40;
  int64_t t_ = 0;
  bool backward_ = false;
  bool optimizer_ = false;
};

int gen_main(int argc, char** argv) {
  cli_common::CommonFlags flags;
  CLI::App app{"actsim-snapshot-gen: a PyTorch-format memory snapshot (JSON) of one step run by "
               "the CPU reference executor"};
  cli_common::add_common_flags(app, flags, {true, true, "json (the only one)"});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (flags.output.empty()) throw sim::ConfigError("-o", "output", "required");
    const cli_common::Axes axes = cli_common::parse_axes(flags);
    cli_common::require_single(axes, flags, "actsim-snapshot-gen");
    const cli_common::Inputs in = cli_common::load_inputs(axes, cli_common::search_dirs());
    const cli_common::Point p = cli_common::point_at(axes, 0);
    if (p.setup.allocator != sim::AllocatorKind::kExact)
      throw sim::ConfigError("--allocator", "allocator", "the executor runs exact bytes (exact)");
    const sim::Graph g = sim::build_graph_exec(in.models.front(), p.setup, in.devices.front());
    const sim::Plan plan = sim::resolve(axes.strategies.front(), g.n_blocks);
    const sim::Schedule schedule = sim::build_schedule(g, plan, sim::recompute_mode(g.profile));
    Recorder rec(g, executor::make_cpu_backend(g, {}), axes.models.front());
    executor::run_step(g, plan, schedule, rec);
    const std::string text = rec.snapshot().dump() + "\n";
    std::FILE* file = std::fopen(flags.output.c_str(), "wb");
    if (file == nullptr) throw sim::ConfigError("-o", flags.output, "cannot open for writing");
    const bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    if (std::fclose(file) != 0 || !ok) {
      std::remove(flags.output.c_str());
      throw sim::ConfigError("-o", flags.output, "write failed");
    }
    return 0;
  } catch (const sim::ConfigError& e) {
    fmt::print(stderr, "actsim-snapshot-gen: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "actsim-snapshot-gen: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return gen_main(argc, argv); }
