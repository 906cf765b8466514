// exec11 (issues 10, 13): the CPU reference executor on LoRA and QLoRA graphs (frozen base
// weights, PEFT's adapters, bitsandbytes' NF4 matmul) and MLA, against the simulator to the byte;
// LoRA's gradients against central finite differences.
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

TrainSetup small(Precision p, AttentionKind att) {
  TrainSetup s;
  s.impl = Impl::kHf;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = p;
  s.attention = att;
  return s;
}

// The peak, its event and phase as the simulator has them, the step's end at its baseline, a
// finite loss, and gradients bitwise identical across strategies.
void runs_exact(const ModelConfig& m, const TrainSetup& s, const std::vector<const char*>& strategies) {
  const Device dev = fixtures::executor_device();
  const Graph g = build_graph_exec(m, s, dev);
  const executor::StepResult ref = execute(g, "none");
  bool nonzero = false;
  for (const auto& gr : ref.grads)
    for (double x : gr) nonzero = nonzero || x != 0.0;
  CHECK(nonzero);
  for (const char* st : strategies) {
    const std::string strategy = st;
    CAPTURE(strategy);
    const Result sim = simulate(m, s, dev, parse_strategy(st));
    const executor::StepResult run = execute(g, st);
    CHECK(run.peak_bytes == sim.peak_requested_bytes);
    CHECK(run.peak_event_index == sim.peak_event_index);
    CHECK(run.peak_phase == sim.peak_phase);
    CHECK(run.end_bytes == run.baseline_bytes);
    CHECK(std::isfinite(run.loss));
    CHECK(run.loss == ref.loss);
    CHECK(run.grad_bytes == ref.grad_bytes);
  }
}

const std::vector<const char*> kStrategies = {"none", "full", "every:2", "sqrt", "selective",
                                              "sac:mm"};

}  // namespace

TEST_CASE("exec11: LoRA graphs run to the simulator's byte (frozen base, adapters only trained)") {
  struct M {
    const char* name;
    ModelConfig model;
  };
  const M models[] = {{"gpt (c_attn, summed input embeddings kept)", fixtures::tiny_gpt()},
                      {"llama (q, v; frozen RMSNorm weights)", fixtures::tiny_gqa_llama()}};
  for (const M& m : models)
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed})
      for (const AttentionKind att : {AttentionKind::kStandard, AttentionKind::kFlash})
        for (const bool all : {false, true}) {
          TrainSetup s = small(pr, att);
          s.lora_rank = 4;
          if (all) s.lora_targets = kLoraAllLinear;
          const std::string model = m.name, precision(name(pr)), attention(name(att));
          CAPTURE(model);
          CAPTURE(precision);
          CAPTURE(attention);
          CAPTURE(all);
          const Graph g = build_graph_exec(m.model, s, fixtures::executor_device());
          // only the adapters are parameters: lora_A and lora_B per targeted linear
          int adapters = 0;
          for (const Op& op : g.ops) adapters += std::string(op.name) == "lora_A";
          CHECK(adapters > 0);
          CHECK(g.param_storages.size() == static_cast<size_t>(2 * adapters));
          runs_exact(m.model, s, kStrategies);
        }
}

TEST_CASE("exec11: QLoRA graphs (NF4 matmul dequantizing the packed weight) run to the byte") {
  for (const ModelConfig& m : {fixtures::tiny_gpt(), fixtures::tiny_gqa_llama()})
    for (const Precision pr : {Precision::kBf16Amp, Precision::kBf16Mixed}) {
      TrainSetup s = small(pr, AttentionKind::kFlash);
      s.lora_rank = 4;
      s.qlora = true;
      s.lora_targets = kLoraAllLinear;
      const std::string model = m.name, precision(name(pr));
      CAPTURE(model);
      CAPTURE(precision);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      int nf4 = 0;
      for (const OpArgs& a : g.args) nf4 += a.exec == Exec::kNf4Linear;
      CHECK(nf4 > 0);
      runs_exact(m, s, kStrategies);
    }
}

TEST_CASE("exec11: LoRA adapter gradients match central finite differences (fp32)") {
  // As test_executor.cpp's finite-difference case (h = 5e-3, Richardson, |fd - an| <= 1e-4 +
  // 1e-3 |an|), on the adapters of a tiny LoRA Llama and GPT: the frozen linears' and frozen
  // norm weights' input-only backwards carry the gradient to every adapter below them.
  const Device dev = fixtures::executor_device();
  ModelConfig llama = fixtures::tiny_gqa_llama(2);
  llama.hidden = 8, llama.heads = 4, llama.kv_heads = 2, llama.head_dim = 2, llama.ffn_hidden = 12;
  llama.vocab = 11;
  ModelConfig gpt = fixtures::tiny_gpt(2);
  gpt.hidden = 8, gpt.heads = gpt.kv_heads = 2, gpt.head_dim = 4, gpt.ffn_hidden = 16;
  gpt.vocab = 11;
  gpt.attn_dropout = gpt.hidden_dropout = gpt.embd_dropout = 0.0;
  for (const ModelConfig& m : {llama, gpt}) {
    TrainSetup s = small(Precision::kFp32, AttentionKind::kStandard);
    s.seq = 4;
    // rank 8: PEFT's scaling lora_alpha / r is 1 (alpha 8), so the loss's curvature in the
    // adapters is that of the base test's weights (rank 2's scaling of 4 makes it 16 times larger
    // and the h^4 term of the Richardson difference exceeds the bound)
    s.lora_rank = 8;
    s.lora_targets = kLoraAllLinear;
    const std::string model = m.name;
    CAPTURE(model);
    const Graph g = build_graph_exec(m, s, dev);
    CHECK(finite_differences(g) > 100);
  }
}

namespace {

// A tiny MLA layout (DeepSeek-V2-Lite's, as tests/validation/exec-mla.json): one q_proj (or the
// q_a/q_b pair), a latent of kv_lora_rank with its RMSNorm, 4 heads of qk 4 + 2 rotary, v 3.
ModelConfig tiny_mla(int64_t layers, int64_t q_lora) {
  ModelConfig m = fixtures::tiny_gqa_llama(layers);
  m.name = m.source = "tiny-mla";
  m.family = "deepseek_v2";
  m.heads = m.kv_heads = 4;
  m.head_dim = 6;
  m.qk_rope_dim = 2;
  m.kv_lora_rank = 5;
  m.v_head_dim = 3;
  m.q_lora_rank = q_lora;
  return m;
}

}  // namespace

TEST_CASE("exec11: MLA (eager) runs to the simulator's byte, its gradients match finite differences") {
  for (const int64_t ql : {int64_t{0}, int64_t{6}})
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
      const std::string precision(name(pr));
      CAPTURE(precision);
      CAPTURE(ql);
      const ModelConfig m = tiny_mla(5, ql);
      TrainSetup s = small(pr, AttentionKind::kStandard);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      int ropes = 0, cats = 0;
      for (const OpArgs& a : g.args) {
        ropes += a.exec == Exec::kComplexRope;
        cats += a.exec == Exec::kCat;
      }
      CHECK(ropes == 2 * m.layers);
      CHECK(cats == 2 * m.layers);
      runs_exact(m, s, {"none", "full", "every:2", "selective", "sac:mm"});
    }
  // The splits' column views, the complex rotary (and its conjugate backward), the expanded k_pe
  // and v's own head dim, against central finite differences (as the LoRA case).
  ModelConfig m = tiny_mla(2, 0);
  m.hidden = 8, m.ffn_hidden = 12, m.vocab = 11;
  TrainSetup s = small(Precision::kFp32, AttentionKind::kStandard);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(finite_differences(g) > 500);
}
