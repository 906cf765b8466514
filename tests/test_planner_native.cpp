// What a code base's own checkpointing settings run (sim/planner_native.hpp): the candidates each
// implementation's settings stand for, and the best of them that fits against a hand search.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>

#include "fixtures.hpp"
#include "sim/impl.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner_native.hpp"
#include "sim/simulate.hpp"

using namespace sim;

TEST_CASE("native_candidates: Megatron's settings on 4 blocks, each with its flags") {
  const std::vector<NativeCandidate> c = native_candidates(spec(Impl::kMegatron).native_ac, 4);
  // none, selective, full, every:2..4, block:1..3
  REQUIRE(c.size() == 9);
  CHECK(c[0].strategy.canonical() == "none");
  CHECK(c[1].strategy.canonical() == "selective");
  CHECK(c[2].strategy.canonical() == "full");
  CHECK(c[3].strategy.canonical() == "every:2");
  CHECK(c[5].strategy.canonical() == "every:4");
  CHECK(c[6].strategy.canonical() == "block:1");
  CHECK(c[8].strategy.canonical() == "block:3");
  CHECK(c[4].config ==
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 3");
  CHECK(c[7].config ==
        "--recompute-granularity full --recompute-method block --recompute-num-layers 2");
}

TEST_CASE("native_candidates: HF, torchtitan and nanoGPT") {
  CHECK(native_candidates(spec(Impl::kHf).native_ac, 12).size() == 2);  // none, full
  CHECK(native_candidates(spec(Impl::kNanogpt).native_ac, 12).size() == 1);
  // torchtitan: none, full, sac:torchtitan, layer-sac:2..4; both releases
  for (std::string_view v : {"v0.2.2", "9dec370"}) {
    const std::vector<NativeCandidate> c =
        native_candidates(spec(Impl::kTorchtitan, v).native_ac, 4);
    REQUIRE(c.size() == 6);
    CHECK(c[2].strategy.canonical() == "sac:torchtitan");
    CHECK(c[4].strategy.canonical() == "layer-sac:3");
    CHECK(c[4].config ==
          "[activation_checkpoint] mode = \"selective\", selective_ac_option = \"3\"");
  }
}

TEST_CASE("best_native: the least recompute that fits, against simulating each setting") {
  TrainSetup t;
  t.micro_batch = 4;
  t.seq = 1024;
  t.impl = Impl::kMegatron;
  const ModelConfig m = fixtures::gpt2_small();
  const Graph g = build_graph(m, resolve_setup(m, t), fixtures::h100());
  const std::span<const NativeAc> opts = spec(Impl::kMegatron).native_ac;
  const auto peak = [&](const char* s) {
    return budget_peak_bytes(simulate_plan(g, resolve(parse_strategy(s), g.n_blocks), fixtures::h100()));
  };
  const int64_t none = peak("none"), sel = peak("selective"), full = peak("full");
  REQUIRE(full < sel);
  REQUIRE(sel < none);
  // Room for everything: nothing recomputed.
  NativeChoice c = best_native(g, fixtures::h100(), none, opts);
  REQUIRE(c.best.found);
  CHECK(c.best.strategy.canonical() == "none");
  CHECK(c.config == "no --recompute-granularity");
  CHECK(c.candidates == static_cast<int64_t>(native_candidates(opts, g.n_blocks).size()));
  // One byte less: selective, or a block:k that keeps more and recomputes less; whichever it is,
  // it fits, recomputes something, and no candidate that fits recomputes less.
  c = best_native(g, fixtures::h100(), none - 1, opts);
  REQUIRE(c.best.found);
  CHECK(c.best.strategy.canonical() != "none");
  CHECK(budget_peak_bytes(c.best.result) <= none - 1);
  for (const NativeCandidate& cand : native_candidates(opts, g.n_blocks)) {
    const Result r = simulate_plan(g, resolve(cand.strategy, g.n_blocks), fixtures::h100());
    if (budget_peak_bytes(r) > none - 1) continue;
    CAPTURE(cand.strategy.canonical());
    CHECK(r.recompute_time_ns + r.offload_stall_ns >= c.best.result.recompute_time_ns +
                                                          c.best.result.offload_stall_ns);
  }
  // At the least peak of any setting, that setting (or an equal one) fits; one byte below it,
  // nothing the settings say fits. (gpt2-small's peak sits in the loss, where every checkpoint
  // is live, so every:k can go below full: the least is found by simulation, not assumed.)
  int64_t least = INT64_MAX;
  for (const NativeCandidate& cand : native_candidates(opts, g.n_blocks))
    least = std::min(least, peak(cand.strategy.canonical().c_str()));
  CHECK(least <= full);
  c = best_native(g, fixtures::h100(), least, opts);
  REQUIRE(c.best.found);
  CHECK(budget_peak_bytes(c.best.result) == least);
  c = best_native(g, fixtures::h100(), least - 1, opts);
  CHECK_FALSE(c.best.found);
  CHECK(c.searched);
}

// planner6 (issue 15): the native settings on a pipeline, against simulate_pipeline run with each
// setting on every stage (an independent path: it builds and simulates the stages itself).
TEST_CASE("best_native_pipeline: one setting on every stage, and each stage's best alone") {
  const Device dev = fixtures::h100();
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup s;
  s.micro_batch = 4;
  s.seq = 1024;
  s.impl = Impl::kMegatron;
  s.pp = 4;
  s.microbatches = 8;
  const std::span<const NativeAc> opts = spec(Impl::kMegatron).native_ac;
  const int64_t nb = m.layers / s.pp;
  const std::vector<NativeCandidate> cands = native_candidates(opts, nb);
  struct Sim {
    std::vector<int64_t> peak;
    std::vector<Cost> cost;
  };
  std::vector<Sim> sims;
  std::vector<int64_t> worst;
  for (const NativeCandidate& c : cands) {
    const PipelineResult pr =
        simulate_pipeline(m, s, dev, std::vector<Strategy>(static_cast<size_t>(s.pp), c.strategy));
    Sim x;
    for (const StageResult& st : pr.stages) {
      x.peak.push_back(budget_peak_bytes(st.result));
      x.cost.push_back(cost_of(st.result));
    }
    worst.push_back(*std::max_element(x.peak.begin(), x.peak.end()));
    sims.push_back(std::move(x));
  }
  std::vector<int64_t> budgets = worst;
  std::sort(budgets.begin(), budgets.end());
  REQUIRE(budgets.front() < budgets.back());
  // Between settings, at a setting's worst peak, one byte below the least (none fits), and above
  // all; each budget against the hand search.
  std::vector<int64_t> tried = {budgets.front() - 1, budgets[budgets.size() / 2],
                                budgets.back(), (budgets.front() + budgets.back()) / 2};
  for (const int64_t budget : tried) {
    CAPTURE(budget);
    const NativePipelineChoice got = best_native_pipeline(m, s, dev, budget, opts);
    REQUIRE(got.searched);
    CHECK(got.candidates == static_cast<int64_t>(cands.size()));
    REQUIRE(got.stages.size() == static_cast<size_t>(s.pp));
    // The uniform setting: fits every stage, least summed cost (first in listing order on ties).
    int expect = -1;
    Cost expect_cost;
    for (size_t c = 0; c < cands.size(); ++c) {
      if (worst[c] > budget) continue;
      Cost sum;
      for (const Cost& x : sims[c].cost) sum = {sum.time_ns + x.time_ns, sum.flops + x.flops};
      if (expect < 0 || sum < expect_cost) expect = static_cast<int>(c), expect_cost = sum;
    }
    CHECK(got.found == (expect >= 0));
    if (expect >= 0 && got.found) {
      CHECK(got.strategy.canonical() == cands[static_cast<size_t>(expect)].strategy.canonical());
      CHECK(got.config == cands[static_cast<size_t>(expect)].config);
      CHECK(got.cost == expect_cost);
      CHECK(got.worst_peak_bytes == worst[static_cast<size_t>(expect)]);
    }
    // Each stage alone.
    for (int64_t i = 0; i < s.pp; ++i) {
      CAPTURE(i);
      int best = -1;
      for (size_t c = 0; c < cands.size(); ++c) {
        if (sims[c].peak[static_cast<size_t>(i)] > budget) continue;
        if (best < 0 || sims[c].cost[static_cast<size_t>(i)] < sims[static_cast<size_t>(best)].cost[static_cast<size_t>(i)])
          best = static_cast<int>(c);
      }
      const NativeStageChoice& st = got.stages[static_cast<size_t>(i)];
      CHECK(st.found == (best >= 0));
      if (best >= 0 && st.found) {
        CHECK(st.strategy.canonical() == cands[static_cast<size_t>(best)].strategy.canonical());
        CHECK(st.peak_bytes == sims[static_cast<size_t>(best)].peak[static_cast<size_t>(i)]);
      }
    }
  }
}
