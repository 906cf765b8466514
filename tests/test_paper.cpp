// Validation ladder step 1 (DESIGN.md §6): Korthikanti et al. 2022, reproduced exactly in the
// paper profile. Each check prints expected, measured and deviation.
#include <doctest/doctest.h>

#include <cstdio>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

void expect_exact(const char* what, int64_t expected, int64_t measured) {
  const double dev = expected == 0 ? 0.0 : 100.0 * static_cast<double>(measured - expected) /
                                                static_cast<double>(expected);
  std::printf("  %-34s expected %20lld  measured %20lld  deviation %+.6f%%\n", what,
              static_cast<long long>(expected), static_cast<long long>(measured), dev);
  CHECK(measured == expected);
}

}  // namespace

TEST_CASE("Table 2: activation bytes per layer for all six variants, GPT-3 175B") {
  // REFERENCE.md worked values: s=2048, b=1, h=12288, a=96, t=8; sbh = 25,165,824.
  const ModelConfig m = fixtures::gpt3_175b();
  const int64_t s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h;
  CHECK(sbh == 25'165'824);
  // Table 2 formulas, evaluated in integers (5as/h = 5*96*2048/12288 = 80).
  const int64_t eq1 = sbh * 34 + 5 * a * s * s * b;
  const int64_t tp = sbh * 10 + sbh * 24 / t + 5 * a * s * s * b / t;
  const int64_t tp_sp = (sbh * 34 + 5 * a * s * s * b) / t;
  const int64_t tp_sel = sbh * 10 + sbh * 24 / t;
  const int64_t tp_sp_sel = sbh * 34 / t;
  const int64_t full = 2 * sbh;
  // The published worked values.
  CHECK(eq1 == 2'868'903'936);
  CHECK(tp == 578'813'952);
  CHECK(tp_sp == 358'612'992);
  CHECK(tp_sel == 327'155'712);
  CHECK(tp_sp_sel == 106'954'752);
  CHECK(full == 50'331'648);

  expect_exact("no parallelism sbh(34+5as/h)", eq1,
               fixtures::run(m, fixtures::paper(1, false), "none").activation_bytes_per_layer);
  expect_exact("TP sbh(10+24/t+5as/ht)", tp,
               fixtures::run(m, fixtures::paper(8, false), "none").activation_bytes_per_layer);
  expect_exact("TP+SP sbh/t(34+5as/h)", tp_sp,
               fixtures::run(m, fixtures::paper(8, true), "none").activation_bytes_per_layer);
  expect_exact("TP+selective sbh(10+24/t)", tp_sel,
               fixtures::run(m, fixtures::paper(8, false), "selective").activation_bytes_per_layer);
  expect_exact("TP+SP+selective 34sbh/t", tp_sp_sel,
               fixtures::run(m, fixtures::paper(8, true), "selective").activation_bytes_per_layer);
  expect_exact("full recompute 2sbh (TP)", full,
               fixtures::run(m, fixtures::paper(8, false), "full").activation_bytes_per_layer);
  expect_exact("full recompute 2sbh (no TP)", full,
               fixtures::run(m, fixtures::paper(1, false), "full").activation_bytes_per_layer);
}

TEST_CASE("Table 2 holds for every block, not only the largest") {
  const Result r = fixtures::run(fixtures::gpt3_175b(), fixtures::paper(8, true), "none");
  REQUIRE(r.activation_bytes_per_block.size() == 96);
  for (int64_t v : r.activation_bytes_per_block) CHECK(v == 358'612'992);
}

TEST_CASE("Selective recompute removes exactly the 5as^2b/t term") {
  const ModelConfig m = fixtures::gpt3_175b();
  for (auto [t, sp] : {std::pair<int64_t, bool>{1, false}, {8, false}, {8, true}}) {
    const int64_t none = fixtures::run(m, fixtures::paper(t, sp), "none").activation_bytes_per_layer;
    const int64_t sel = fixtures::run(m, fixtures::paper(t, sp), "selective").activation_bytes_per_layer;
    CHECK(none - sel == 5LL * 96 * 2048 * 2048 * 1 / t);
  }
}

TEST_CASE("Selective saves 70% of GPT-3's and 65% of MT-NLG's activation memory (paper section 5)") {
  // Korthikanti §5 with TP+SP: saving = 5as/h / (34 + 5as/h).
  const Result none = fixtures::run(fixtures::gpt3_175b(), fixtures::paper(8, true), "none");
  const Result sel = fixtures::run(fixtures::gpt3_175b(), fixtures::paper(8, true), "selective");
  const double saved = 1.0 - static_cast<double>(sel.activation_bytes_per_layer) /
                                 static_cast<double>(none.activation_bytes_per_layer);
  std::printf("  GPT-3 selective saving: expected 70%%, measured %.2f%%\n", 100 * saved);
  CHECK(saved == doctest::Approx(80.0 / 114.0));  // 5as/h = 80: 80/114 = 70.2%
  ModelConfig mt = fixtures::gpt3_175b();
  mt.heads = mt.kv_heads = 128;
  mt.hidden = 20480;
  mt.ffn_hidden = 4 * 20480;
  mt.head_dim = 160;
  mt.layers = 2;  // per-layer figure; two blocks keep the test fast
  const Result n2 = fixtures::run(mt, fixtures::paper(8, true), "none");
  const Result s2 = fixtures::run(mt, fixtures::paper(8, true), "selective");
  const double saved2 = 1.0 - static_cast<double>(s2.activation_bytes_per_layer) /
                                  static_cast<double>(n2.activation_bytes_per_layer);
  std::printf("  MT-NLG selective saving: expected 65%%, measured %.2f%%\n", 100 * saved2);
  CHECK(saved2 == doctest::Approx(64.0 / 98.0));  // 5as/h = 5*128*2048/20480 = 64
}

TEST_CASE("App. A: model FLOPs per iteration equal Eq. 7 exactly") {
  // 72 b L s h^2 (1 + s/(6h) + v/(12hL)) = 3 * (L (24bsh^2 + 4bs^2h) + 2bshv), in integers.
  const ModelConfig m = fixtures::gpt3_175b();
  const int64_t b = 1, s = 2048, h = 12288, L = 96, v = 51200;
  const int64_t eq7 = 3 * (L * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * v);
  const Result r = fixtures::run(m, fixtures::paper(1, false), "none");
  expect_exact("model FLOPs (Eq. 7)", eq7, r.model_flops);
  expect_exact("forward FLOPs (App. A)", eq7 / 3, r.fwd_flops);
  CHECK(r.bwd_flops == 2 * r.fwd_flops);
  // 72bLsh^2(1 + s/(6h) + v/(12hL)) evaluated in floating point agrees.
  const double closed = 72.0 * b * L * s * static_cast<double>(h) * h *
                        (1.0 + s / (6.0 * h) + v / (12.0 * h * L));
  CHECK(static_cast<double>(r.model_flops) == doctest::Approx(closed).epsilon(1e-12));
}

TEST_CASE("Recompute FLOPs: full replays every block's forward, selective 4bs^2h/t per layer") {
  const ModelConfig m = fixtures::gpt3_175b();
  const Result full = fixtures::run(m, fixtures::paper(1, false), "full");
  const int64_t block_fwd = 24LL * 2048 * 12288 * 12288 + 4LL * 2048 * 2048 * 12288;
  CHECK(full.recompute_flops == 96 * block_fwd);
  const Result sel = fixtures::run(m, fixtures::paper(8, false), "selective");
  CHECK(sel.recompute_flops == 96 * (4LL * 2048 * 2048 * 12288 / 8));
}

TEST_CASE("Paper profile: 18 bytes per parameter of persistent state, 6 + 12/d distributed") {
  const ModelConfig m = fixtures::gpt3_175b();
  TrainSetup s = fixtures::paper(1, false);
  const Result r = fixtures::run(m, s, "none");
  CHECK(r.weights_bytes == 2 * r.params_per_rank);
  CHECK(r.grads_bytes == 4 * r.params_per_rank);
  CHECK(r.optimizer_bytes == 12 * r.params_per_rank);
  CHECK(r.params_per_rank == r.params);
  s.dp = 8;
  s.zero = 1;
  const Result z = fixtures::run(m, s, "none");
  CHECK(z.optimizer_bytes == 12 * z.params_per_rank / 8);
  CHECK(z.weights_bytes + z.grads_bytes == 6 * z.params_per_rank);
}

TEST_CASE("Paper profile refuses knobs outside its scope, naming them") {
  ModelConfig m = fixtures::gpt3_175b();
  TrainSetup s = fixtures::paper(1, false);
  s.attention = AttentionKind::kFlash;
  CHECK_THROWS_WITH_AS(fixtures::run(m, s, "none"),
                       "--profile: attention: not supported yet: flash attention in the paper profile",
                       Unsupported);
  s = fixtures::paper(1, false);
  s.precision = Precision::kBf16Amp;
  CHECK_THROWS_AS(fixtures::run(m, s, "none"), Unsupported);
  m.mlp = MlpKind::kSwiglu;
  CHECK_THROWS_WITH(fixtures::run(m, fixtures::paper(1, false), "none"),
                    "--profile: mlp: not supported yet: a SwiGLU MLP in the paper profile");
}
