// --impl nanogpt: karpathy/nanoGPT model.py @ 3adf61e (docs/memory-model.md, "nanogpt"), its
// slow attention path (torch < 2.0, --attention standard) and its SDPA path, hand-derived per
// layer and per step. s sequence, b micro-batch, h hidden, a heads; "sbh" = s*b*h elements.
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

// nanoGPT's GPTConfig with n_layer 4, n_head 4, n_embd 256, block_size 256, bias on
// (tests/fixtures.hpp)
ModelConfig nanogpt(bool bias = true, int64_t layers = 4) { return fixtures::nanogpt(layers, bias); }

TrainSetup slow_path(int64_t b, int64_t s) {
  TrainSetup t;
  t.impl = Impl::kNanogpt;
  t.attention = AttentionKind::kStandard;
  t.precision = Precision::kFp32;
  t.micro_batch = b;
  t.seq = s;
  return t;
}

}  // namespace

TEST_CASE("nanogpt slow path, fp32: 64sbh + 4as^2b + s^2 + 16sb per layer") {
  // model.py:104-105 and :52-76, fp32, dropout 0 (train.py's default): the block input (saved
  // by ln_1) 4, ln_1 out 4, matmul's copies of the permuted q, k^T (:67) and v (:71) 12, the
  // transpose-contiguous y 4, x1 4, ln_2 out 4, c_fc out 16 (saved by nn.GELU), GELU out 16
  // (saved by c_proj): 64 sbh; the softmax output 4 as^2b (the scores, the scaled scores and
  // the masked scores are freed: nothing saves them); the bool `bias[:, :, :T, :T] == 0`, s^2
  // bytes (saved by masked_fill); LayerNorm mean and rstd for two norms: 16 sb.
  const int64_t b = 4, s = 256, h = 256, a = 4;
  const Result r = fixtures::run(nanogpt(), slow_path(b, s), "none");
  CHECK(r.activation_bytes_per_layer == 64 * s * b * h + 4 * a * s * s * b + s * s + 16 * s * b);
  // without biases the saved tensors are the same
  const Result nb = fixtures::run(nanogpt(false), slow_path(b, s), "none");
  CHECK(nb.activation_bytes_per_layer == r.activation_bytes_per_layer);
}

TEST_CASE("nanogpt slow path: an fp32 [block_size, block_size] mask buffer per block, in weights") {
  // model.py:49-50: register_buffer("bias", tril(ones(block_size, block_size))): fp32,
  // persistent, one per block; block_size is the config's positions, not the sequence.
  for (int64_t layers : {4, 6}) {  // 6: the cloned-graph path (sim/src/graph_builder.cpp expand)
    CAPTURE(layers);
    const ModelConfig m = nanogpt(true, layers);
    const Result r = fixtures::run(m, slow_path(2, 128), "none");
    CHECK(r.weights_bytes == 4 * parameter_count(m) + layers * 4 * 256 * 256);
    TrainSetup flash = slow_path(2, 128);
    flash.attention = AttentionKind::kFlash;  // torch >= 2.0: no buffer (model.py:45-46)
    CHECK(fixtures::run(m, flash, "none").weights_bytes == 4 * parameter_count(m));
    // ZeRO-3 shards the parameters over the data-parallel ranks, never the buffers: every rank
    // keeps its own mask (fp32 weights, 4 B per parameter, divided by dp = 4).
    TrainSetup z3 = slow_path(2, 128);
    z3.dp = 4;
    z3.zero = 3;
    CHECK(fixtures::run(m, z3, "none").weights_bytes ==
          4 * parameter_count(m) / 4 + layers * 4 * 256 * 256);
  }
}

TEST_CASE("nanogpt: train.py keeps the logits through backward and the optimizer step") {
  // Against hf on the same fp32 model with SDPA (no slow-path buffers): the peak is at the
  // log-softmax backward in both, and nanoGPT's is higher by exactly the logits, 4 s b v bytes
  // (both take the log-softmax of the fp32 logits themselves; hf frees them after it).
  const int64_t b = 2, s = 128, v = 50304;
  TrainSetup t = slow_path(b, s);
  t.attention = AttentionKind::kFlash;
  t.optimizer = Optimizer::kAdamFused;  // no foreach temporaries: they differ by groups
  const Result nano = fixtures::run(nanogpt(), t, "none");
  t.impl = Impl::kHf;
  t.dropout = 0.0;
  const Result hf = fixtures::run(nanogpt(), t, "none");
  CHECK(nano.peak_phase == Phase::kBackward);
  CHECK(nano.peak_requested_bytes - hf.peak_requested_bytes == 4 * s * b * v);
}

TEST_CASE("nanogpt foreach AdamW: per parameter group, 8 B (torch 1.13) or 4 B (torch >= 2.1)") {
  // configure_optimizers: weight decay on every parameter of dim >= 2 (wte, wpe, the Linears'
  // weights), none on biases and LayerNorm weights (13h per block, 2h for ln_f). torch 1.13
  // adamw.py:418-420 keeps sqrt(v) and the out-of-place denom of the decay group together.
  const ModelConfig m = nanogpt();
  const int64_t h = 256, decay = parameter_count(m) - (13 * h * 4 + 2 * h);
  CHECK(vector_parameter_count(m) == 13 * h * 4 + 2 * h);
  TrainSetup t = slow_path(2, 128);
  t.optimizer = Optimizer::kAdamForeach;  // implver: nanoGPT's own default is fused or a loop
  CHECK(build_graph(m, t, fixtures::h100()).optimizer_transient_bytes == 8 * decay);
  t.attention = AttentionKind::kFlash;
  CHECK(build_graph(m, t, fixtures::h100()).optimizer_transient_bytes == 4 * decay);
  t.optimizer = Optimizer::kAdamFused;
  CHECK(build_graph(m, t, fixtures::h100()).optimizer_transient_bytes == 0);
}

TEST_CASE("nanogpt refuses what nanoGPT does not have, naming the implementation") {
  TrainSetup t = slow_path(1, 64);
  CHECK_THROWS_WITH_AS(resolve_setup(fixtures::tiny_llama(), t),
                       doctest::Contains("llama family under --impl nanogpt"), Unsupported);
  t.tp = 2;
  CHECK_THROWS_WITH_AS(resolve_setup(nanogpt(), t),
                       doctest::Contains("tensor parallelism under --impl nanogpt"), NotInCode);
}
