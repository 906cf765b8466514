#include "bridge.hpp"

#include <fmt/format.h>

#include <utility>

#include "commands.hpp"
#include "csv_read.hpp"
#include "sim/error.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner.hpp"
#include "sim/simulate.hpp"
#include "sim/valley.hpp"
#include "sim_io/load.hpp"
#include "sim_io/output.hpp"

namespace actsim_py {
namespace {

Fields fields_of(const sim_io::Row& row) { return split_csv_line(sim_io::csv_row(row)); }

struct Loaded {
  cli_common::Axes axes;
  cli_common::Inputs inputs;
};

Loaded load(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs) {
  Loaded l;
  l.axes = cli_common::parse_axes(inv.flags);
  cli_common::point_count(l.axes);  // refuses more than kMaxPoints configurations
  l.inputs = cli_common::load_inputs(l.axes, dirs);
  return l;
}

}  // namespace

Fields split_csv_line(std::string_view line) {
  auto records = actsim_cli::read_csv("csv row", std::string(line));
  return records.empty() ? Fields{} : std::move(records.front().second);
}

actsim_cli::Invocation parse(const std::vector<std::string>& args) {
  actsim_cli::Parsed parsed = actsim_cli::parse_command_line(args);
  if (!parsed.invocation) {
    std::string message = parsed.message;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    throw UsageError(message);
  }
  return std::move(*parsed.invocation);
}

std::vector<std::filesystem::path> search_dirs(const std::filesystem::path& package_dir) {
  // model_search_dirs(exe) gives $ACTSIM_MODELS, exe's folder/models and the installed layout's
  // exe's folder/../share/actsim/models; a file inside the package gives <package>/models, and
  // the share folder, meaningless beside a package, is left out.
  std::vector<std::filesystem::path> dirs = sim_io::model_search_dirs(package_dir / "_core");
  const std::filesystem::path share =
      (package_dir / ".." / "share" / "actsim" / "models").lexically_normal();
  std::erase(dirs, share);
  return dirs;
}

std::vector<Fields> run(const actsim_cli::Invocation& inv,
                        const std::vector<std::filesystem::path>& dirs) {
  const Loaded l = load(inv, dirs);
  std::vector<Fields> rows;
  cli_common::SweepOptions options;
  options.jobs = inv.jobs;
  // run_sweep's rows are byte-identical whatever the jobs and sharing (sweep.hpp), and
  // evaluate_point is what cmd_run computes for each point; where cmd_run throws, the row holds
  // the same ConfigError's message.
  std::string error;
  cli_common::run_sweep(l.axes, l.inputs, options, [&](const sim_io::Row& row) {
    if (error.empty() && !row.error.empty()) error = row.error;
    if (error.empty()) rows.push_back(fields_of(row));
  });
  if (!error.empty()) throw UsageError(error);
  return rows;
}

Table plan(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs) {
  // cmd_plan's --format csv text: a header line and one row
  const std::string text = actsim_cli::plan_output(inv, dirs, cli_common::Format::kCsv);
  const std::size_t nl = text.find('\n');
  Table t;
  t.columns = split_csv_line(std::string_view(text).substr(0, nl));
  std::string_view row = std::string_view(text).substr(nl + 1);
  if (!row.empty() && row.back() == '\n') row.remove_suffix(1);
  t.rows.push_back(split_csv_line(row));
  return t;
}

Table valley(const actsim_cli::Invocation& inv, const std::vector<std::filesystem::path>& dirs) {
  // The steps and CSV of cmd_valley (cli/src/cmd_valley.cpp).
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "valley");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, dirs);
  const cli_common::Point p = cli_common::point_at(axes, 0);
  const sim::Device& device = inputs.devices.front();
  const sim::Graph graph = sim::build_graph(inputs.models.front(), p.setup, device);
  const sim::Valley v = sim::compute_valley(graph, device);
  Table t;
  t.columns = {"model",          "device",          "n",           "m",
               "chen_units",     "model_bytes",     "simulated_bytes", "step_time_ns",
               "recompute_flops", "is_m_star",      "is_m_star_simulated", "is_sqrt_n",
               "simulated_block_bytes"};
  for (const sim::ValleyPoint& pt : v.points) {
    t.rows.push_back({axes.models.front(), axes.devices.front(), fmt::format("{}", v.n),
                      fmt::format("{}", pt.m), fmt::format("{:.6f}", pt.chen_units),
                      // census12: empty where the closed form is refused (as the CLI's CSV)
                      v.closed_form ? fmt::format("{}", pt.model_bytes) : std::string(),
                      fmt::format("{}", pt.simulated_bytes),
                      fmt::format("{}", pt.step_time_ns), fmt::format("{}", pt.recompute_flops),
                      pt.m == v.m_star ? "1" : "0", pt.m == v.m_star_simulated ? "1" : "0",
                      pt.m == v.sqrt_n ? "1" : "0", fmt::format("{}", pt.simulated_block_bytes)});
  }
  return t;
}

std::vector<PeakEntry> explain_peak(const actsim_cli::Invocation& inv,
                                    const std::vector<std::filesystem::path>& dirs, int items) {
  // The steps of cmd_run's table (cli/src/cmd_run.cpp) for one configuration.
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "explain_peak");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, dirs);
  const cli_common::Point p = cli_common::point_at(axes, 0);
  const sim::ModelConfig& model = inputs.models.front();
  const sim::Device& device = inputs.devices.front();
  const sim::Strategy& strategy = axes.strategies.front();
  std::vector<sim::PeakItem> found;
  if (p.setup.pp > 1 || p.setup.microbatches > 1) {
    const sim::PipelineResult pr = sim::simulate_pipeline(model, p.setup, device, strategy);
    const sim::StageResult& w = pr.stages[static_cast<std::size_t>(pr.worst)];
    sim::Graph g;
    sim::build_stage_graph(model, p.setup, device, pr.worst, g);
    found = sim::explain_peak(g, sim::resolve(strategy, g.n_blocks), w.result, items);
    if (w.in_flight_bytes > w.stash_bytes) {
      sim::PeakItem extra;
      extra.bytes = w.in_flight_bytes - w.stash_bytes;
      extra.count = w.in_flight - 1;
      extra.what = "the other micro-batches in flight";
      extra.why = fmt::format("stashed for their backward ({} in flight on stage {})",
                              w.in_flight, pr.worst);
      found.insert(found.begin(), extra);
    }
  } else {
    const sim::Graph graph = sim::build_graph(model, p.setup, device);
    sim::Plan plan;
    sim::Result result;
    if (strategy.kind == sim::StrategyKind::kBudget) {
      sim::BudgetPlan planned = sim::plan_budget(graph, device, strategy.k);
      plan = std::move(planned.plan);
      result = std::move(planned.result);
    } else {
      plan = sim::resolve(strategy, graph.n_blocks);
      result = sim::simulate_plan(graph, plan, device);
    }
    found = sim::explain_peak(graph, plan, result, items);
  }
  std::vector<PeakEntry> out;
  for (const sim::PeakItem& item : found) {
    out.push_back({item.bytes, item.count, std::string(sim::category_name(item.category)),
                   item.block, item.what, item.why});
  }
  return out;
}

std::vector<CatalogRow> catalog(const std::vector<std::filesystem::path>& dirs) {
  std::vector<CatalogRow> out;
  for (const sim_io::CatalogEntry& e : sim_io::list_models(dirs)) {
    CatalogRow r;
    r.kind = "model";
    r.name = e.name;
    r.path = e.path.string();
    try {
      const sim::ModelConfig m = sim_io::load_model(e.path.string(), dirs);
      r.family = m.family;
      r.layers = m.layers;
      r.hidden = m.hidden;
      r.heads = m.heads;
      r.kv_heads = m.kv_heads;
      r.params = sim::parameter_count(m);
    } catch (const sim::ConfigError& err) {
      r.error = err.what();
    }
    out.push_back(std::move(r));
  }
  for (const sim_io::CatalogEntry& e : sim_io::list_devices(dirs)) {
    CatalogRow r;
    r.kind = "device";
    r.name = e.name;
    r.path = e.path.string();
    try {
      const sim::Device d = sim_io::load_device(e.path.string(), dirs);
      r.label = d.label;
      r.hbm_bytes = d.hbm_bytes;
      r.peak_bf16_flops_per_s = d.peak_bf16_flops_per_s;
      r.hbm_bytes_per_s = d.hbm_bytes_per_s;
    } catch (const sim::ConfigError& err) {
      r.error = err.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

SweepStream::SweepStream(const actsim_cli::Invocation& inv,
                         const std::vector<std::filesystem::path>& dirs) {
  Loaded l = load(inv, dirs);
  axes_ = std::move(l.axes);
  inputs_ = std::move(l.inputs);
  const int64_t total = cli_common::point_count(axes_);
  first_ = 0;
  end_ = total;
  if (!inv.shard.empty()) {
    const auto [index, count] = cli_common::parse_shard(inv.shard);
    const cli_common::RowRange range = cli_common::shard_range(total, index, count);
    first_ = range.first;
    end_ = range.end;
  }
  options_.jobs = inv.jobs;
  options_.first = first_;
  options_.end = end_;
  options_.cancel = &cancel_;
  thread_ = std::thread([this] {
    try {
      cli_common::run_sweep(axes_, inputs_, options_, [this](const sim_io::Row& row) {
        Fields f = fields_of(row);
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return queue_.size() < kQueueRows || cancel_.load(); });
        if (cancel_.load()) throw cli_common::Cancelled{};
        queue_.push_back(std::move(f));
        cv_.notify_all();
      });
    } catch (const cli_common::Cancelled&) {
      // The reader went away: nothing to report.
    } catch (...) {
      std::lock_guard lock(mu_);
      failure_ = std::current_exception();
    }
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  });
}

SweepStream::~SweepStream() {
  cancel_.store(true);
  {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  thread_.join();
}

bool SweepStream::next(Fields& row) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || done_; });
  if (!queue_.empty()) {
    row = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
  return false;
}

}  // namespace actsim_py
