// exec12 (issues 10, 13): the CPU reference executor on HF's pointwise gelu_new, nanoGPT's
// slow-path attention (its fp32 `bias` buffer, `== 0` and masked_fill), and SDPA's
// memory-efficient kernel (HF padding masks, MLA under SDPA): peaks to the simulator's byte (the
// walker fails any backward that reads a tensor its op did not save), gradients bitwise the same
// across strategies and against central finite differences.
#include <doctest/doctest.h>

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

// tests/executor_steps.hpp fixtures::runs_exact on the executor's device
void runs_exact(const ModelConfig& m, const TrainSetup& s,
                const std::vector<const char*>& strategies) {
  fixtures::runs_exact(m, s, fixtures::executor_device(), strategies);
}

ModelConfig gpt_gelu_new(int64_t layers = 5) {
  ModelConfig m = fixtures::tiny_gpt(layers);
  m.activation = Activation::kGeluNew;
  return m;
}

// A small fp32 GPT without dropout for the finite differences.
ModelConfig fd_gpt(ModelConfig m) {
  m.hidden = 8, m.heads = m.kv_heads = 2, m.head_dim = 4, m.ffn_hidden = 16, m.vocab = 11;
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0.0;
  return m;
}

const std::vector<const char*> kStrategies = {"none", "full", "every:2", "sqrt", "selective",
                                              "sac:mm"};

}  // namespace

TEST_CASE("exec12: HF gelu_new's pointwise ops run to the simulator's byte") {
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed})
    for (const AttentionKind att : {AttentionKind::kStandard, AttentionKind::kFlash}) {
      const std::string precision(name(pr)), attention(name(att));
      CAPTURE(precision);
      CAPTURE(attention);
      const ModelConfig m = gpt_gelu_new();
      const TrainSetup s = small(Impl::kHf, pr, att);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      // per block: pow, tanh, 1 + tanh, the three scalar multiplies among the scales
      CHECK(count(g, Exec::kPow) == m.layers);
      CHECK(count(g, Exec::kTanh) == m.layers);
      CHECK(count(g, Exec::kAddScalar) == m.layers);
      CHECK(count(g, Exec::kNone) == 0);
      runs_exact(m, s, kStrategies);
    }
  // one GeLU op (nn.GELU, any other implementation) and gelu_new's ops give the same values
  // within rounding: the kernels compute the same function (no dropout: its masks are keyed by
  // the op's index, which the extra ops shift)
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kFlash);
  const Device dev = fixtures::executor_device();
  ModelConfig m = gpt_gelu_new();
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0.0;
  const executor::StepResult ops = execute(build_graph_exec(m, s, dev), "none");
  ModelConfig one = m;
  one.activation = Activation::kGeluTanh;
  const executor::StepResult fused = execute(build_graph_exec(one, s, dev), "none");
  CHECK(ops.loss == doctest::Approx(fused.loss).epsilon(1e-6));
}

TEST_CASE("exec12: gelu_new's gradients match central finite differences (fp32)") {
  const ModelConfig m = fd_gpt(gpt_gelu_new(2));
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(count(g, Exec::kPow) == 2);
  CHECK(finite_differences(g) > 300);
}

TEST_CASE("exec12: nanoGPT's slow path (fp32 bias buffer, == 0, masked_fill) runs to the byte") {
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp}) {
    const std::string precision(name(pr));
    CAPTURE(precision);
    const ModelConfig m = fixtures::tiny_gpt();
    const TrainSetup s = small(Impl::kNanogpt, pr, AttentionKind::kStandard);
    const Graph g = build_graph_exec(m, s, fixtures::executor_device());
    CHECK(count(g, Exec::kEqZero) == m.layers);
    CHECK(count(g, Exec::kMaskedFill) == m.layers);
    runs_exact(m, s, kStrategies);
  }
  const ModelConfig m = fd_gpt(fixtures::tiny_gpt(2));
  TrainSetup s = small(Impl::kNanogpt, Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(finite_differences(g) > 200);
  // the masked_fill is causal: the slow path's loss is the SDPA path's (same weights, same math)
  TrainSetup flash = s;
  flash.attention = AttentionKind::kFlash;
  const executor::StepResult slow = execute(g, "none");
  const executor::StepResult fast =
      execute(build_graph_exec(m, flash, fixtures::executor_device()), "none");
  CHECK(slow.loss == doctest::Approx(fast.loss).epsilon(1e-9));
}

namespace {

// A tiny MLA (as test_exec11.cpp's): qk head dim 6 (4 + 2 rotary), v head dim 3.
ModelConfig tiny_mla(int64_t layers) {
  ModelConfig m = fixtures::tiny_gqa_llama(layers);
  m.name = m.source = "tiny-mla";
  m.family = "deepseek_v2";
  m.heads = m.kv_heads = 4;
  m.head_dim = 6;
  m.qk_rope_dim = 2;
  m.kv_lora_rank = 5;
  m.v_head_dim = 3;
  return m;
}

}  // namespace

TEST_CASE("exec12: SDPA's memory-efficient kernel (padding masks, MLA) runs to the byte") {
  struct M {
    const char* name;
    ModelConfig model;
    bool padding;
  };
  const M models[] = {
      {"llama, --padding on (repeat_kv, mask cast)", fixtures::tiny_gqa_llama(), true},
      {"gpt, --padding on", fixtures::tiny_gpt(), true},
      {"mla (v head dim of its own)", tiny_mla(5), false}};
  for (const M& m : models)
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
      const std::string model = m.name, precision(name(pr));
      CAPTURE(model);
      CAPTURE(precision);
      TrainSetup s = small(Impl::kHf, pr, AttentionKind::kFlash);
      s.padding = m.padding;
      const Graph g = build_graph_exec(m.model, s, fixtures::executor_device());
      CHECK(count(g, Exec::kMemEfficient) == m.model.layers);
      CHECK(count(g, Exec::kFlash) == 0);
      CHECK(count(g, Exec::kNone) == 0);
      // the logsumexp rows padded to 32 (kAlignLSE)
      for (const OpArgs& a : g.args)
        if (a.exec == Exec::kMemEfficient)
          CHECK(g.storages[a.out[1].storage].bytes == 2 * a.dim[1] * 32 * 4);
      runs_exact(m.model, s, {"none", "full", "every:2", "selective", "sac:mm"});
    }
}

TEST_CASE("exec12: the memory-efficient kernel's gradients match finite differences (fp32)") {
  ModelConfig llama = fixtures::tiny_gqa_llama(2);
  llama.hidden = 8, llama.heads = 4, llama.kv_heads = 2, llama.head_dim = 2, llama.ffn_hidden = 12;
  llama.vocab = 11;
  ModelConfig mla = tiny_mla(2);
  mla.hidden = 8, mla.ffn_hidden = 12, mla.vocab = 11;
  for (const bool is_mla : {false, true}) {
    CAPTURE(is_mla);
    TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kFlash);
    s.seq = 4;
    s.padding = !is_mla;
    const Graph g = build_graph_exec(is_mla ? mla : llama, s, fixtures::executor_device());
    CHECK(count(g, Exec::kMemEfficient) == 2);
    CHECK(finite_differences(g) > 300);
    // the padding mask is all ones here (the executor's batch has no padding): the kernel with
    // the causal finfo.min bias gives the flash kernel's loss
    if (!is_mla) {
      TrainSetup nopad = s;
      nopad.padding = false;
      const Graph f = build_graph_exec(llama, nopad, fixtures::executor_device());
      CHECK(count(f, Exec::kFlash) == 2);
      CHECK(execute(g, "none").loss == doctest::Approx(execute(f, "none").loss).epsilon(1e-9));
    }
  }
}

namespace {

// A tiny Mixtral layout: `e` experts, top-`k`, SwiGLU experts of 12, the router renormalized.
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

}  // namespace

TEST_CASE("exec12: HF's router and loop over experts run to the byte where routing is fixed") {
  // top-k over every expert: each expert gets all n tokens whatever the router's values, the
  // counts the graph assumes (sim/src/blocks_moe.cpp expert_tokens at --moe-imbalance 1)
  for (const int64_t e : {int64_t{2}, int64_t{3}})
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
      const std::string precision(name(pr));
      CAPTURE(e);
      CAPTURE(precision);
      const ModelConfig m = tiny_mixtral(5, e, e);
      const TrainSetup s = small(Impl::kHf, pr, AttentionKind::kFlash);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      CHECK(count(g, Exec::kTopK) == m.layers);
      CHECK(count(g, Exec::kWhere) == m.layers * e);
      CHECK(count(g, Exec::kIndexAdd) == m.layers * e);
      CHECK(count(g, Exec::kNone) == 0);
      runs_exact(m, s, {"none", "full", "every:2", "selective", "sac:mm"});
    }
  // the gradients of the router, the experts and the rest against finite differences
  const ModelConfig m = tiny_mixtral(2, 3, 3);
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(finite_differences(g) > 500);
  // top-k below the expert count: test_exec13.cpp (exec13: the graph's counts forced)
}
