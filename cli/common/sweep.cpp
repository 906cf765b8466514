#include "sweep.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/planner_pipeline.hpp"  // pplan
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"

namespace cli_common {
namespace {

// The sizes of the set-up axes, outermost first (the order of the header comment).
std::vector<int64_t> setup_radices(const Axes& a) {
  const auto n = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  return {n(a.profiles), n(a.impls), n(a.precisions), n(a.attentions), n(a.dropouts), n(a.batches),
          n(a.seqs),     n(a.tps),        n(a.sps),        n(a.dps),      n(a.zeros),
          n(a.optimizers), n(a.allocators),
          // feat2 (issue 13): the swept feature lists, innermost
          n(a.eps), n(a.lora_ranks), n(a.cps), n(a.fp8s),
          n(a.etps), n(a.lora_dropouts),  // feat13: --etp, --lora-dropout
          // ds3c (issue 10): the --ds-* lists
          n(a.ds_reduce_buckets), n(a.ds_prefetch_buckets), n(a.ds_persistence_thresholds),
          n(a.ds_max_lives), n(a.ds_max_reuse_distances),
          n(a.prefetches)};  // polish: --prefetch, the fastest
}

int64_t setup_count(const Axes& a) {
  int64_t count = 1;
  for (int64_t r : setup_radices(a)) count *= r;  // each axis <= 1e6; checked by point_count
  return count;
}

}  // namespace

void require_single(const Axes& a, const CommonFlags& f, std::string_view verb) {
  const auto one = [&](std::size_t n, const char* flag, const std::string& text) {
    if (n != 1)
      throw sim::ConfigError(flag, text,
                             std::string(verb) + " simulates one configuration: give one value");
  };
  one(a.models.size(), "--model", f.model);
  one(a.devices.size(), "--device", f.device);
  one(a.strategies.size(), "--strategy", f.strategy);
  one(a.profiles.size(), "--profile", f.profile);
  one(a.impls.size(), "--impl", f.impl);
  one(a.precisions.size(), "--precision", f.precision);
  one(a.attentions.size(), "--attention", f.attention);
  one(a.dropouts.size(), "--dropout", f.dropout);
  one(a.batches.size(), "--batch", f.batch);
  one(a.seqs.size(), "--seq", f.seq);
  one(a.tps.size(), "--tp", f.tp);
  one(a.sps.size(), "--sp", f.sp);
  one(a.dps.size(), "--dp", f.dp);
  one(a.zeros.size(), "--zero", f.zero);
  one(a.optimizers.size(), "--optimizer", f.optimizer);
  one(a.allocators.size(), "--allocator", f.allocator);
  one(a.eps.size(), "--ep", f.ep);  // feat2
  one(a.etps.size(), "--etp", f.etp);  // feat13
  one(a.lora_dropouts.size(), "--lora-dropout", f.lora_dropout);
  one(a.lora_ranks.size(), "--lora-rank", f.lora_rank);
  one(a.cps.size(), "--cp", f.cp);
  one(a.fp8s.size(), "--fp8", f.fp8);
  one(a.ds_reduce_buckets.size(), "--ds-reduce-bucket", f.ds_reduce_bucket);  // ds3c
  one(a.ds_prefetch_buckets.size(), "--ds-prefetch-bucket", f.ds_prefetch_bucket);
  one(a.ds_persistence_thresholds.size(), "--ds-persistence-threshold", f.ds_persistence_threshold);
  one(a.ds_max_lives.size(), "--ds-max-live", f.ds_max_live);
  one(a.ds_max_reuse_distances.size(), "--ds-max-reuse-distance", f.ds_max_reuse_distance);
  one(a.prefetches.size(), "--prefetch", f.prefetch);  // polish
}

int64_t point_count(const Axes& a) {
  std::vector<int64_t> radices = setup_radices(a);
  radices.push_back(static_cast<int64_t>(a.models.size()));
  radices.push_back(static_cast<int64_t>(a.devices.size()));
  radices.push_back(static_cast<int64_t>(a.strategies.size()));
  int64_t count = 1;
  for (int64_t r : radices) {
    if (r == 0) return 0;
    if (count > kMaxPoints / r)
      throw sim::ConfigError("sweep", "points",
                             "the flags' lists make more than 100,000,000 configurations");
    count *= r;
  }
  return count;
}

Point point_at(const Axes& a, int64_t index) {
  Point p;
  const int64_t setups = setup_count(a);
  p.setup_index = index % setups;
  int64_t rest = index / setups;
  p.strategy = static_cast<int32_t>(rest % static_cast<int64_t>(a.strategies.size()));
  rest /= static_cast<int64_t>(a.strategies.size());
  p.device = static_cast<int32_t>(rest % static_cast<int64_t>(a.devices.size()));
  p.model = static_cast<int32_t>(rest / static_cast<int64_t>(a.devices.size()));

  // Mixed-radix digits of the set-up index, fastest (fp8) first.
  int64_t s = p.setup_index;
  const auto digit = [&s](const auto& axis) {
    const auto size = static_cast<int64_t>(axis.size());
    const auto i = static_cast<std::size_t>(s % size);
    s /= size;
    return axis[i];
  };
  sim::TrainSetup& t = p.setup;
  t.prefetch = digit(a.prefetches);  // polish: --prefetch, the fastest
  t.ds_max_reuse_distance = digit(a.ds_max_reuse_distances);  // ds3c: the --ds-* lists
  t.ds_max_live = digit(a.ds_max_lives);
  t.ds_persistence_threshold = digit(a.ds_persistence_thresholds);
  t.ds_prefetch_bucket = digit(a.ds_prefetch_buckets);
  t.ds_reduce_bucket = digit(a.ds_reduce_buckets);
  t.lora_dropout = digit(a.lora_dropouts);  // feat13: --lora-dropout
  t.etp = digit(a.etps);  // feat13: --etp
  t.fp8 = digit(a.fp8s);  // feat2: the swept feature lists
  t.cp = digit(a.cps);
  t.lora_rank = digit(a.lora_ranks);
  t.ep = digit(a.eps);
  t.allocator = digit(a.allocators);
  t.optimizer = digit(a.optimizers);
  t.zero = static_cast<int>(digit(a.zeros));
  t.dp = digit(a.dps);
  t.sp = digit(a.sps);
  t.tp = digit(a.tps);
  t.seq = digit(a.seqs);
  t.micro_batch = digit(a.batches);
  t.dropout = digit(a.dropouts);
  t.attention = digit(a.attentions);
  t.precision = digit(a.precisions);
  {  // implver: the code base and its release
    const std::optional<sim::ImplChoice> ic = digit(a.impls);
    t.impl = ic ? std::optional<sim::Impl>(ic->impl) : std::nullopt;
    t.impl_version = ic ? ic->version : std::string_view();
  }
  t.profile = digit(a.profiles);
  t.pp = a.pp;
  t.vpp = a.vpp;
  t.microbatches = a.microbatches;
  t.set_to_none = a.set_to_none;
  t.reentrant = a.reentrant;
  t.target_seq = a.target_seq;    // famenc
  t.seq_default = a.seq_default;  // famenc
  t.zero_default = a.zero_default;  // feat3
  t.moe_imbalance = a.moe_imbalance;
  t.moe_capacity = a.moe_capacity;
  t.moe_aux_loss_coeff = a.moe_aux_loss_coeff;  // mla5
  t.cross_entropy_loss_fusion = a.cross_entropy_loss_fusion;  // te_norm (issue 10)
  t.lora_targets = a.lora_targets;
  t.qlora = a.qlora;
  t.padding = a.padding;  // hfimpl
  t.norm_kernel = a.norm_kernel;  // time5 (issue 11)
  t.compile = a.compile;          // fp8sac (issue 10)
  t.grad_accum_fusion = a.grad_accum_fusion;  // time6 (issue 11)
  t.deterministic = a.deterministic;  // time7 (issue 11)
  t.moe_shared_expert_overlap = a.moe_shared_expert_overlap;  // moetp (issue 13)
  t.local_spec = a.local_spec;        // tece (issue 10)
  return p;
}

sim_io::RowKey row_key(const Axes& a, const Inputs& in, const Point& p) {
  sim::TrainSetup setup = p.setup;
  try {
    setup = sim::resolve_setup(in.models[static_cast<std::size_t>(p.model)], p.setup);
  } catch (const sim::ConfigError&) {
    // simulate() throws the same error for the row
  }
  return {a.models[static_cast<std::size_t>(p.model)], a.devices[static_cast<std::size_t>(p.device)],
          a.strategies[static_cast<std::size_t>(p.strategy)].canonical(), setup};
}

std::vector<std::filesystem::path> search_dirs() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) exe = std::filesystem::current_path() / "actsim";
  return sim_io::model_search_dirs(exe);
}

Inputs load_inputs(const Axes& a, const std::vector<std::filesystem::path>& dirs) {
  Inputs in;
  for (const std::string& m : a.models) in.models.push_back(sim_io::load_model(m, dirs));
  for (const std::string& d : a.devices) in.devices.push_back(sim_io::load_device(d, dirs));
  return in;
}

namespace {

// One strategy on a built graph. A budget: row runs the planner's plan and shows it as its
// strategy (DESIGN.md §4: the row holds its plan as a custom: spec, so it can be re-run).
// Each sweep worker thread reuses one workspace across its rows (BENCHMARKS.md: fresh vectors
// per simulation cost more than the simulation).
sim::Workspace& workspace() {
  thread_local sim::Workspace ws;
  return ws;
}

sim::Result run_strategy(const sim::Graph& g, const sim::Device& d, const sim::Strategy& s,
                         std::string& shown) {
  if (s.kind != sim::StrategyKind::kBudget)
    return sim::simulate_plan(g, sim::resolve(s, g.n_blocks), d, {}, workspace());
  sim::BudgetPlan plan = sim::plan_budget(g, d, s.k);
  shown = plan.strategy.canonical();
  return std::move(plan.result);
}

}  // namespace

sim::SimOptions sim_options(const Axes& a) {
  sim::SimOptions o;
  o.gpus_per_node = a.gpus_per_node;
  return o;
}

sim_io::Row evaluate_point(const Axes& a, const Inputs& in, int64_t index) {
  const Point p = point_at(a, index);
  sim_io::Row row;
  row.row_index = index;
  row.key = row_key(a, in, p);
  try {
    const sim::Strategy& s = a.strategies[static_cast<std::size_t>(p.strategy)];
    const sim::Device& d = in.devices[static_cast<std::size_t>(p.device)];
    if (s.kind == sim::StrategyKind::kBudget && (p.setup.pp > 1 || p.setup.microbatches > 1)) {
      // pplan (issue 15): planned per stage; the row shows the plan's custom: spec (global).
      sim::PipelinePlan plan = sim::plan_pipeline(in.models[static_cast<std::size_t>(p.model)],
                                                  p.setup, d, s.k, sim_options(a));
      row.key.strategy = plan.strategy.canonical();
      row.result = std::move(plan.result.summary);
    } else if (s.kind == sim::StrategyKind::kBudget) {
      sim::validate(d);
      const sim::Graph g = sim::build_graph(in.models[static_cast<std::size_t>(p.model)], p.setup, d);
      row.result = run_strategy(g, d, s, row.key.strategy);
    } else {
      row.result =
          sim::simulate(in.models[static_cast<std::size_t>(p.model)], p.setup, d, s, sim_options(a),
                        workspace());
    }
  } catch (const sim::ConfigError& e) {
    row.error = e.what();
  }
  return row;
}

namespace {

// How a sweep splits into units of work. Unit u is either row u, or (grouped) the rows of all
// strategies of one (model, device, set-up): u = (model * devices + device) * setups + setup.
// Units first_unit <= u < end_unit hold every row of [lo, hi) (and, grouped, others not delivered).
struct Units {
  bool grouped = false;
  int64_t strategies = 1;
  int64_t setups = 1;
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t first_unit = 0;
  int64_t end_unit = 0;

  int64_t row(int64_t unit, int64_t strategy) const {
    if (!grouped) return unit;
    return ((unit / setups) * strategies + strategy) * setups + unit % setups;
  }
  int64_t last_row(int64_t unit) const { return row(unit, grouped ? strategies - 1 : 0); }
};

Units plan_units(const Axes& a, int64_t total, const SweepOptions& options) {
  Units u;
  u.strategies = static_cast<int64_t>(a.strategies.size());
  u.setups = setup_count(a);
  // Pipeline steps are simulated stage by stage (sim::simulate_pipeline): no graph to share.
  u.grouped = options.share_graphs && u.strategies > 1 && a.pp == 1 && a.microbatches == 1 &&
              (u.strategies - 1) * u.setups <= kMaxGroupedRows;
  u.lo = std::clamp<int64_t>(options.first, 0, total);
  u.hi = options.end < 0 ? total : std::clamp<int64_t>(options.end, u.lo, total);
  if (u.lo == u.hi) return u;
  if (!u.grouped) {
    u.first_unit = u.lo;
    u.end_unit = u.hi;
  } else {
    // Whole (model, device) blocks of units: a row range may take any strategy of them.
    const int64_t block = u.strategies * u.setups;
    u.first_unit = u.lo / block * u.setups;
    u.end_unit = ((u.hi - 1) / block + 1) * u.setups;
  }
  return u;
}

// The rows of one unit within [lo, hi), in row order. Grouped, the steps are sim::simulate's,
// with the graph built once (and not at all when no row of the unit is wanted).
std::vector<sim_io::Row> evaluate_unit(const Axes& a, const Inputs& in, const Units& units,
                                       int64_t unit) {
  if (!units.grouped) return {evaluate_point(a, in, unit)};
  std::vector<sim_io::Row> rows;
  std::vector<int64_t> strategy;
  for (int64_t s = 0; s < units.strategies; ++s) {
    const int64_t index = units.row(unit, s);
    if (index < units.lo || index >= units.hi) continue;
    sim_io::Row& row = rows.emplace_back();
    row.row_index = index;
    row.key = row_key(a, in, point_at(a, index));
    strategy.push_back(s);
  }
  if (rows.empty()) return rows;
  const Point p = point_at(a, rows.front().row_index);
  const sim::Device& device = in.devices[static_cast<std::size_t>(p.device)];
  std::optional<sim::Graph> graph;
  try {
    sim::validate(device);
    graph.emplace(sim::build_graph(in.models[static_cast<std::size_t>(p.model)], p.setup, device));
  } catch (const sim::ConfigError& e) {
    for (sim_io::Row& row : rows) row.error = e.what();
    return rows;
  }
  for (std::size_t k = 0; k < rows.size(); ++k) {
    sim_io::Row& row = rows[k];
    try {
      row.result = run_strategy(*graph, device, a.strategies[static_cast<std::size_t>(strategy[k])],
                                row.key.strategy);
    } catch (const sim::ConfigError& e) {
      row.error = e.what();
    }
  }
  return rows;
}

bool cancelled(const SweepOptions& options) {
  return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
}

}  // namespace

RowRange shard_range(int64_t total, int64_t index, int64_t count) {
  // total <= kMaxPoints and count <= kMaxPoints: the products stay far below 2^63.
  return {total * (index - 1) / count, total * index / count};
}

std::pair<int64_t, int64_t> parse_shard(const std::string& text) {
  const auto bad = [&text] {
    return sim::ConfigError("--shard", text, "expected i/N with 1 <= i <= N (e.g. 3/8)");
  };
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) throw bad();
  const auto number = [&](std::string_view digits) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) throw bad();
    return v;
  };
  const std::string_view all(text);
  const int64_t i = number(all.substr(0, slash));
  const int64_t n = number(all.substr(slash + 1));
  if (n < 1 || n > kMaxPoints || i < 1 || i > n) throw bad();
  return {i, n};
}

void run_sweep(const Axes& a, const Inputs& in, const SweepOptions& options,
               const std::function<void(const sim_io::Row&)>& deliver) {
  const int64_t total = point_count(a);
  const Units units = plan_units(a, total, options);
  int64_t jobs = options.jobs > 0 ? options.jobs
                                  : std::max<int64_t>(1, std::thread::hardware_concurrency());
  jobs = std::min(jobs, units.end_unit - units.first_unit);

  // Rows computed but not yet delivered, by row index.
  std::unordered_map<int64_t, sim_io::Row> pending;
  if (jobs <= 1) {
    int64_t next = units.lo;
    for (int64_t u = units.first_unit; u < units.end_unit; ++u) {
      if (cancelled(options)) throw Cancelled{};
      for (sim_io::Row& row : evaluate_unit(a, in, units, u)) {
        const int64_t index = row.row_index;
        pending.emplace(index, std::move(row));
      }
      for (auto it = pending.find(next); it != pending.end(); it = pending.find(next)) {
        if (cancelled(options)) throw Cancelled{};
        const sim_io::Row row = std::move(it->second);
        pending.erase(it);
        ++next;
        deliver(row);
      }
    }
    return;
  }

  // Reorder window: a worker claims the next unit only while its last row is within `window`
  // rows of the next one to deliver, so memory stays bounded. The unit holding the next row to
  // deliver always qualifies (its last row is at most (strategies - 1) * setups further), and
  // units are claimed in order of their first row, so the sweep never stalls.
  const int64_t slack = options.window > 0 ? options.window : 64 * jobs;
  const int64_t window = slack + (units.grouped ? (units.strategies - 1) * units.setups : 0);
  std::mutex mu;
  std::condition_variable work_cv;   // workers wait for room in the window
  std::condition_variable ready_cv;  // the delivering thread waits for its next row
  int64_t next_unit = units.first_unit;
  int64_t next_deliver = units.lo;
  bool stop = false;
  std::exception_ptr failure;

  const auto worker = [&] {
    for (;;) {
      int64_t u = 0;
      {
        std::unique_lock lock(mu);
        work_cv.wait(lock, [&] {
          return stop || next_unit >= units.end_unit ||
                 units.last_row(next_unit) < next_deliver + window;
        });
        if (stop || next_unit >= units.end_unit) return;
        u = next_unit++;
      }
      try {
        std::vector<sim_io::Row> rows = evaluate_unit(a, in, units, u);
        std::lock_guard lock(mu);
        for (sim_io::Row& row : rows) {
          const int64_t index = row.row_index;
          pending.emplace(index, std::move(row));
        }
      } catch (...) {
        std::lock_guard lock(mu);
        if (!failure) failure = std::current_exception();
        stop = true;
        work_cv.notify_all();
      }
      ready_cv.notify_one();
    }
  };

  std::vector<std::thread> threads;
  const auto stop_and_join = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (std::thread& t : threads) t.join();
    threads.clear();
  };
  threads.reserve(static_cast<std::size_t>(jobs));
  for (int64_t j = 0; j < jobs; ++j) threads.emplace_back(worker);

  try {
    for (int64_t i = units.lo; i < units.hi; ++i) {
      sim_io::Row row;
      {
        std::unique_lock lock(mu);
        auto it = pending.end();
        // Wakes at least every 100 ms to see a cancellation (a signal cannot notify).
        while (!ready_cv.wait_for(lock, std::chrono::milliseconds(100), [&] {
          it = pending.find(i);
          return it != pending.end() || failure != nullptr;
        })) {
          if (cancelled(options)) break;
        }
        if (failure) break;
        if (cancelled(options)) throw Cancelled{};
        row = std::move(it->second);
        pending.erase(it);
        next_deliver = i + 1;
      }
      work_cv.notify_all();
      deliver(row);
    }
  } catch (...) {
    stop_and_join();
    throw;
  }
  stop_and_join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace cli_common
