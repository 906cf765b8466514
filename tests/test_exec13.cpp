// exec13 (issues 10, 13): the CPU reference executor on Transformer Engine's RMSNorm (Megatron's
// TE spec: TELayerNormColumnParallelLinear's norm and TENorm), against the simulator to the byte
// (the walker fails any backward that reads a tensor its op did not save), gradients bitwise the
// same across strategies and against central finite differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "executor_steps.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::execute;  // tests/executor_steps.hpp
using fixtures::finite_differences;

using fixtures::count;
using fixtures::small;

}  // namespace

TEST_CASE("exec13: TE's RMSNorm under megatron runs to the simulator's byte") {
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed})
    for (const AttentionKind att : {AttentionKind::kStandard, AttentionKind::kFlash}) {
      const std::string precision(name(pr)), attention(name(att));
      CAPTURE(precision);
      CAPTURE(attention);
      const ModelConfig m = fixtures::tiny_gqa_llama();
      const TrainSetup s = small(Impl::kMegatron, pr, att);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      // two norms per block (the fused qkv's and fc1's) and the final TENorm
      CHECK(count(g, Exec::kTeRmsNorm) == 2 * m.layers + 1);
      CHECK(count(g, Exec::kNone) == 0);
      // what each saves: x, gamma and an fp32 rsigma per token (the executor reads only these)
      for (size_t i = 0; i < g.args.size(); ++i) {
        const OpArgs& a = g.args[i];
        if (a.exec != Exec::kTeRmsNorm) continue;
        const Storage& rs = g.storages[a.out[1].storage];
        CHECK(rs.dtype == DType::kF32);
        CHECK(rs.bytes == 4 * a.dim[0]);
        CHECK(a.dim[0] == s.micro_batch * s.seq);
        const int32_t* b = g.begin(g.ops[i].saves);
        const int32_t* e = g.end(g.ops[i].saves);
        CHECK(std::find(b, e, a.in[0].storage) != e);
        CHECK(std::find(b, e, a.out[1].storage) != e);
        CHECK(std::find(b, e, a.out[0].storage) == e);  // ln_out: the next linear's saved input
      }
      fixtures::runs_exact(m, s, fixtures::executor_device(),
                           {"none", "full", "every:2", "sqrt", "selective", "sac:mm"});
    }
}

TEST_CASE("exec13: TE's RMSNorm gradients match central finite differences (fp32)") {
  ModelConfig m = fixtures::tiny_gqa_llama(2);
  m.hidden = 8, m.heads = 4, m.kv_heads = 2, m.head_dim = 2, m.ffn_hidden = 12, m.vocab = 11;
  TrainSetup s = small(Impl::kMegatron, Precision::kFp32, AttentionKind::kFlash);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(count(g, Exec::kTeRmsNorm) == 5);
  CHECK(finite_differences(g) > 300);
}

TEST_CASE("exec13: Megatron's MLA runs its fused TE norms") {
  ModelConfig m = fixtures::tiny_gqa_llama(2);
  m.name = m.source = "tiny-mla";
  m.family = "deepseek_v2";
  m.heads = m.kv_heads = 4;
  m.head_dim = 6;
  m.qk_rope_dim = 2;
  m.kv_lora_rank = 5;
  m.v_head_dim = 3;
  const TrainSetup s = small(Impl::kMegatron, Precision::kBf16Mixed, AttentionKind::kFlash);
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  // per block: the input TENorm, the q projection's and the kv up projection's fused norms, the
  // fc1's; the final TENorm
  CHECK(count(g, Exec::kTeRmsNorm) == 4 * m.layers + 1);
  // exec14: the fused rope ops have kernels now (test_exec14.cpp): the whole step runs
  CHECK(count(g, Exec::kNone) == 0);
  CHECK(std::isfinite(execute(g, "none").loss));
}

namespace {

// A tiny Mixtral layout (as test_exec12.cpp's): `e` experts, top-`k`, SwiGLU experts of 12.
ModelConfig tiny_mixtral(int64_t layers, int64_t e, int64_t k) {
  ModelConfig m = fixtures::tiny_llama();
  m.name = m.source = "tiny-mixtral";
  m.family = "mixtral";
  m.layers = layers;
  m.hidden = 8, m.heads = 4, m.kv_heads = 2, m.head_dim = 2, m.ffn_hidden = 12, m.vocab = 11;
  m.experts = e;
  m.experts_per_token = k;
  m.expert_ffn = 12;
  m.norm_topk = true;
  return m;
}

// The tokens per expert the graph's loop declares for the first MoE layer (its kWhere ops).
std::vector<int64_t> declared(const Graph& g) {
  for (size_t i = 0; i < g.args.size(); ++i)
    if (g.args[i].exec == Exec::kTopK) return executor::forced_counts(g, static_cast<int32_t>(i));
  return {};
}

}  // namespace

TEST_CASE("exec13: top-k below the expert count runs to the byte with the graph's counts forced") {
  struct C {
    int64_t e, k;
    double imbalance;
    std::vector<int64_t> counts;  // of 16 tokens (b 2, s 8): expert_tokens' split, by hand
  };
  // balanced: n k / e each; 3 experts: round(32 / 3) = 11 on the first, 21 split 11 + 10;
  // F 1.5 over 4 experts: round(1.5 x 8) = 12, the other 20 split 7 + 7 + 6
  const C cases[] = {{4, 2, 1.0, {8, 8, 8, 8}},
                     {3, 2, 1.0, {11, 11, 10}},
                     {4, 2, 1.5, {12, 7, 7, 6}},
                     {4, 1, 1.0, {4, 4, 4, 4}}};
  for (const C& c : cases)
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
      const std::string precision(name(pr));
      CAPTURE(c.e);
      CAPTURE(c.k);
      CAPTURE(c.imbalance);
      CAPTURE(precision);
      const ModelConfig m = tiny_mixtral(5, c.e, c.k);
      TrainSetup s = small(Impl::kHf, pr, AttentionKind::kFlash);
      s.moe_imbalance = c.imbalance;
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      CHECK(declared(g) == c.counts);
      CHECK(count(g, Exec::kNone) == 0);
      // the kWhere kernel fails the step if the router sent any other count to an expert
      fixtures::runs_exact(m, s, fixtures::executor_device(),
                           {"none", "full", "every:2", "selective", "sac:mm"});
    }
  // the gradients of the forced router (a fixed routing: smooth in every weight)
  const ModelConfig m = tiny_mixtral(2, 4, 2);
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(declared(g) == std::vector<int64_t>{4, 4, 4, 4});
  CHECK(finite_differences(g) > 500);
}

TEST_CASE("exec13: an imbalance no routing can make is refused in one line") {
  // F 2.5 over 4 experts, top-2 of 16 tokens: round(2.5 x 8) = 20 tokens for one expert
  const ModelConfig m = tiny_mixtral(2, 4, 2);
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kFlash);
  s.moe_imbalance = 2.5;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(declared(g)[0] == 20);
  CHECK_THROWS_WITH_AS(execute(g, "none"),
                       doctest::Contains("executing top-2 routing of 16 tokens with 20 on the "
                                         "hottest expert"),
                       Unsupported);
}

TEST_CASE("exec13: Qwen2-MoE's shared expert behind its sigmoid gate runs to the byte") {
  ModelConfig m = tiny_mixtral(5, 4, 2);
  m.name = m.source = "tiny-qwen2-moe";
  m.family = "qwen2_moe";
  m.norm_topk = false;
  m.shared_ffn = 10;
  m.shared_gate = true;
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
    const std::string precision(name(pr));
    CAPTURE(precision);
    const TrainSetup s = small(Impl::kHf, pr, AttentionKind::kFlash);
    const Graph g = build_graph_exec(m, s, fixtures::executor_device());
    CHECK(count(g, Exec::kSigmoid) == m.layers);
    CHECK(count(g, Exec::kGateMul) == m.layers);
    CHECK(count(g, Exec::kNone) == 0);
    fixtures::runs_exact(m, s, fixtures::executor_device(),
                         {"none", "full", "every:2", "selective", "sac:mm"});
  }
  ModelConfig fd = m;
  fd.layers = 2;
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  CHECK(finite_differences(build_graph_exec(fd, s, fixtures::executor_device())) > 500);
}
