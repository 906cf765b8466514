// Small configurations the reference executor runs in CI (tests/test_executor.cpp and the
// committed measured CSV): GPT style with dropout, Llama style with GQA, SwiGLU and RMSNorm, and
// flash attention. Five blocks, so simulate() takes its cloned-graph path while the executor runs
// the graph built block by block.
#pragma once

#include "fixtures.hpp"

namespace fixtures {

inline sim::ModelConfig tiny_gpt(int64_t layers = 5) {
  sim::ModelConfig m = gpt2_small();
  m.name = m.source = "tiny-gpt";
  m.layers = layers;
  m.hidden = 16;
  m.heads = m.kv_heads = 2;
  m.head_dim = 8;
  m.ffn_hidden = 64;
  m.vocab = 40;
  m.max_positions = 16;
  return m;  // dropout 0.1 everywhere, as GPT-2
}

inline sim::ModelConfig tiny_gqa_llama(int64_t layers = 5) {
  sim::ModelConfig m = tiny_llama();
  m.name = m.source = "tiny-gqa-llama";
  m.layers = layers;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn_hidden = 24;
  m.vocab = 40;
  return m;
}

// polish: a named configuration of the executor tests (test_executor, test_exec_offload).
struct ExecCase {
  const char* name;
  sim::ModelConfig model;
  sim::TrainSetup setup;
};

// The set-up the executor's op lists were written against: micro-batch 2, seq 8, eager attention
// under bf16 autocast (tiny_gpt: Megatron's op list, tiny_gqa_llama: HF's).
inline sim::TrainSetup executor_setup() {
  sim::TrainSetup s;
  s.micro_batch = 2;
  s.seq = 8;
  s.attention = sim::AttentionKind::kStandard;
  s.precision = sim::Precision::kBf16Amp;
  return s;
}
// The paper profile (reentrant checkpoints, bf16-mixed) at the same micro-batch 2 and seq 8.
inline sim::TrainSetup executor_paper() {
  sim::TrainSetup s = paper(1, false);
  s.micro_batch = 2;
  s.seq = 8;
  return s;
}

// The H100 fixture with a small cuBLAS workspace: the executor allocates every persistent storage
// for real, and the workspace's size changes nothing else.
inline sim::Device executor_device() {
  sim::Device d = h100();
  d.cublas_workspace_bytes = 4096;
  return d;
}

}  // namespace fixtures
