// Ledger invariants and properties over seeded random configurations (STYLE.md rule 5, 11).
#include <doctest/doctest.h>

#include <numeric>
#include <random>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

ModelConfig random_model(std::mt19937_64& rng) {
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  ModelConfig m = rng() % 2 ? fixtures::gpt2_small() : fixtures::tiny_llama();
  m.layers = pick({1, 2, 3, 5, 8});
  m.heads = pick({4, 8});
  m.kv_heads = m.mlp == MlpKind::kSwiglu ? pick({1, 2, 4}) : m.heads;
  m.head_dim = pick({16, 32});
  m.hidden = m.heads * m.head_dim;
  m.ffn_hidden = pick({2, 4}) * m.hidden;
  m.vocab = pick({500, 1024});
  m.max_positions = 4096;
  return m;
}

const char* kStrategies[] = {"none", "full", "every:2", "block:1", "sqrt", "selective", "sac:mm"};

}  // namespace

TEST_CASE("ledger invariants over 300 random configurations") {
  std::mt19937_64 rng(20261121);
  const Device dev = fixtures::h100();
  int ran = 0;
  for (int i = 0; i < 300; ++i) {
    const ModelConfig m = random_model(rng);
    TrainSetup t;
    t.micro_batch = 1 + static_cast<int64_t>(rng() % 4);
    t.seq = 64 << (rng() % 4);
    t.precision = std::array{Precision::kBf16Mixed, Precision::kBf16Amp, Precision::kFp16Amp,
                             Precision::kFp32}[rng() % 4];
    t.attention = rng() % 2 ? AttentionKind::kFlash : AttentionKind::kStandard;
    if (rng() % 3 == 0) t.dropout = 0.0;
    if (rng() % 3 == 0) {
      t.tp = 2;
      t.sp = rng() % 2;
    }
    if (rng() % 3 == 0) {
      t.dp = 4;
      t.zero = static_cast<int>(rng() % 4);
    }
    t.optimizer = std::array{Optimizer::kAdamForeach, Optimizer::kAdamFused, Optimizer::kSgd}[rng() % 3];
    const char* st = kStrategies[rng() % std::size(kStrategies)];
    CAPTURE(i);
    CAPTURE(st);
    Result r, none;
    try {
      r = simulate(m, t, dev, parse_strategy(st));
      none = simulate(m, t, dev, parse_strategy("none"));
    } catch (const ConfigError&) {
      continue;  // e.g. a strategy's k beyond this model's blocks
    }
    ++ran;
    CHECK(r.end_bytes == r.baseline_bytes);
    CHECK(r.peak_allocated_bytes >= r.baseline_bytes);
    CHECK(std::accumulate(r.peak_breakdown.begin(), r.peak_breakdown.end(), int64_t{0}) ==
          r.peak_allocated_bytes);
    for (int64_t v : r.peak_breakdown) CHECK(v >= 0);
    CHECK(r.activation_peak_bytes >= 0);
    CHECK(r.model_flops == none.model_flops);
    CHECK(r.step_time_ns >= none.step_time_ns - 0);  // recompute never makes the step faster
    if (std::string(st) == "none") CHECK(r.recompute_flops == 0);
    if (std::string(st) == "full") {
      CHECK(r.activation_bytes_per_layer <= none.activation_bytes_per_layer);
      if (m.layers >= 2) CHECK(r.peak_allocated_bytes <= none.peak_allocated_bytes);
    }
  }
  CHECK(ran > 200);
}

TEST_CASE("same inputs, identical results") {
  TrainSetup t;
  t.micro_batch = 2;
  t.seq = 512;
  const Result a = fixtures::run(fixtures::gpt2_small(), t, "sqrt");
  const Result b = fixtures::run(fixtures::gpt2_small(), t, "sqrt");
  CHECK(a.peak_allocated_bytes == b.peak_allocated_bytes);
  CHECK(a.step_time_ns == b.step_time_ns);
  CHECK(a.peak_breakdown == b.peak_breakdown);
  CHECK(a.activation_bytes_per_block == b.activation_bytes_per_block);
}
