// lora6 (issue 13): the CPU reference executor on the LoRA sites lora6 added. MLA's q_a, q_b,
// kv_a, kv_b (and o, and the dense MLP's) adapters are PEFT's ordinary LoRA linears, which the
// executor has kernels for: they run to the simulator's byte and their gradients match central
// finite differences. LoRA on an MoE model with top-2 of 4 experts is refused in one line, as the
// same model without LoRA is (exec12: the routing, not a missing kernel).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "executor_steps.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::execute;  // tests/executor_steps.hpp
using fixtures::finite_differences;

// DeepSeek-V2-Lite's attention layout at a tiny size (as tests/test_exec11.cpp's tiny_mla).
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

TrainSetup small(Precision p, const char* targets) {
  TrainSetup s;
  s.impl = Impl::kHf;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = p;
  s.attention = AttentionKind::kStandard;
  s.lora_rank = 4;
  s.lora_targets = *parse_lora_targets(targets);
  return s;
}

}  // namespace

TEST_CASE("lora6: LoRA on MLA's projections runs to the simulator's byte") {
  for (const int64_t ql : {int64_t{0}, int64_t{6}})
    for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
      const char* targets = ql > 0 ? "q_a,q_b,kv_a,kv_b,o" : "q,kv_a,kv_b,o";
      const std::string precision(name(pr));
      CAPTURE(precision);
      CAPTURE(ql);
      const ModelConfig m = tiny_mla(5, ql);
      const TrainSetup s = small(pr, targets);
      const Device dev = fixtures::executor_device();
      const Graph g = build_graph_exec(m, s, dev);
      int adapters = 0;
      for (const Op& op : g.ops) adapters += std::string(op.name) == "lora_A";
      CHECK(adapters == (ql > 0 ? 5 : 4) * m.layers);
      const executor::StepResult ref = execute(g, "none");
      for (const char* st : {"none", "full", "every:2", "selective"}) {
        const std::string strategy = st;
        CAPTURE(strategy);
        const Result sim = simulate(m, s, dev, parse_strategy(st));
        const executor::StepResult run = execute(g, st);
        CHECK(run.peak_bytes == sim.peak_requested_bytes);
        CHECK(run.peak_event_index == sim.peak_event_index);
        CHECK(run.end_bytes == run.baseline_bytes);
        CHECK(std::isfinite(run.loss));
        CHECK(run.loss == ref.loss);
        CHECK(run.grad_bytes == ref.grad_bytes);
      }
    }
}

TEST_CASE("lora6: MLA adapters' gradients match central finite differences (fp32)") {
  ModelConfig m = tiny_mla(2, 6);
  m.hidden = 8, m.ffn_hidden = 12, m.vocab = 11;
  TrainSetup s = small(Precision::kFp32, "q_a,q_b,kv_a,kv_b");
  s.seq = 4;
  s.lora_rank = 8;  // PEFT's scaling lora_alpha / r = 1
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  // per layer, r = 8: q_a A [r, h 8] B [6, r]; q_b A [r, 6] B [4 x 6, r]; kv_a A [r, 8]
  // B [5 + 2, r]; kv_b A [r, 5] B [4 x (4 + 3), r]
  CHECK(finite_differences(g) == 2 * 8 * ((8 + 6) + (6 + 24) + (8 + 7) + (5 + 28)));
}

TEST_CASE("lora6: LoRA on an MoE model runs in the executor (exec13: top-k counts forced)") {
  ModelConfig m = fixtures::tiny_gqa_llama(3);
  m.name = m.source = "tiny-mixtral";
  m.family = "mixtral";
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn = m.ffn_hidden;
  m.norm_topk = true;
  const Graph g = build_graph_exec(m, small(Precision::kFp32, "gate,up,down"),
                                   fixtures::executor_device());
  // exec12: HF's MoE loop has kernels; exec13: top-2 of 4 experts runs with the graph's counts
  // forced (executor.hpp forced_counts): per-expert adapters on their routed tokens, to the byte
  const executor::StepResult r = execute(g, "none");
  CHECK(r.peak_bytes == simulate(m, small(Precision::kFp32, "gate,up,down"),
                                 fixtures::executor_device(), parse_strategy("none"))
                            .peak_requested_bytes);
  CHECK(std::isfinite(r.loss));
}
