// --impl hf: the op variants of transformers' modeling code (docs/memory-model.md, "hf").
// s sequence, b micro-batch, f MLP width; "sbf" = s*b*f elements.
#include <doctest/doctest.h>

#include "fixtures.hpp"

using namespace sim;

namespace {

TrainSetup hf(int64_t b, int64_t s, Precision p) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.attention = AttentionKind::kFlash;
  t.micro_batch = b;
  t.seq = s;
  t.precision = p;
  return t;
}

}  // namespace

TEST_CASE("hf gelu_new (NewGELUActivation): 12 sbf more per layer than one GeLU op") {
  // activations.py: 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0)))).
  // fp32: one op saves x (4) and its output is saved by c_proj (4): 8 sbf. The pointwise ops
  // save x (pow), tanh's output, 0.5*x and 1+tanh (the final mul), 4 each, and c_proj saves the
  // product: 20 sbf (torch 1.13 saved_tensors_hooks: 4 distinct f-wide saves, checked by hand).
  // bf16-amp: one op saves the bf16 fc1 output and its bf16 output: 4 sbf. gelu_new: pow runs
  // in fp32 on autocast's list (its fp32 cast saved, 4), tanh's output 4 and 1+tanh 4 (fp32 by
  // promotion), 0.5*x bf16 2, c_proj's bf16 cast of the fp32 product 2; the bf16 fc1 output is
  // saved by nothing: 16 sbf. Both differences are 12 sbf.
  const int64_t b = 2, s = 128, f = 3072;
  for (Precision p : {Precision::kFp32, Precision::kBf16Amp}) {
    CAPTURE(static_cast<int>(p));
    ModelConfig m = fixtures::gpt2_small();
    m.activation = Activation::kGelu;
    const Result one = fixtures::run(m, hf(b, s, p), "none");
    m.activation = Activation::kGeluNew;
    const Result ops = fixtures::run(m, hf(b, s, p), "none");
    CHECK(ops.activation_bytes_per_layer - one.activation_bytes_per_layer == 12 * s * b * f);
    // gelu_pytorch_tanh is F.gelu(approximate="tanh"): one op
    m.activation = Activation::kGeluTanh;
    CHECK(fixtures::run(m, hf(b, s, p), "none").activation_bytes_per_layer ==
          one.activation_bytes_per_layer);
    // nanoGPT's nn.GELU is one op whatever the config names
    TrainSetup nano = hf(b, s, p);
    nano.impl = Impl::kNanogpt;
    nano.dropout = 0.1;  // as the HF config's, so that only the GeLU differs
    m.activation = Activation::kGeluNew;
    TrainSetup hf_same = hf(b, s, p);
    hf_same.dropout = 0.1;
    m.activation = Activation::kGelu;
    const int64_t hf_one = fixtures::run(m, hf_same, "none").activation_bytes_per_layer;
    m.activation = Activation::kGeluNew;
    CHECK(fixtures::run(m, nano, "none").activation_bytes_per_layer == hf_one);
  }
}

TEST_CASE("release knobs: --optimizer adam-loop holds one fp32 temporary of the largest parameter") {
  // gpt2-small's largest parameter is the tied word-embedding table, v x h.
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t = hf(1, 128, Precision::kBf16Amp);
  t.optimizer = Optimizer::kAdamLoop;
  CHECK(build_graph(m, t, fixtures::h100()).optimizer_transient_bytes == 4 * m.vocab * m.hidden);
  // hfds: under --zero 1 the Trainer runs DeepSpeed (deepspeed-bf16), whose optimizer sees one
  // flat fp32 partition: the loop's temporary is this rank's whole partition, beside the fp32
  // gradient partition DeepSpeed hands it (4 B each per parameter of the half)
  t.precision.reset();
  t.zero = 1;
  t.dp = 2;
  CHECK(build_graph(m, t, fixtures::h100()).optimizer_transient_bytes ==
        (4 + 4) * parameter_count(m) / 2);
}

TEST_CASE("release knobs: --set-to-none off keeps every fp32 gradient through the step") {
  // set_to_none: the grads are allocated by backward and freed after the optimizer step, so the
  // forward pass holds none; off: 4 bytes per parameter are live from the start, and the peak
  // rises by exactly the gradients the peak did not already hold.
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t = hf(1, 128, Precision::kBf16Amp);
  const Result on = fixtures::run(m, t, "none");
  t.set_to_none = false;
  const Result off = fixtures::run(m, t, "none");
  CHECK(off.baseline_bytes - on.baseline_bytes == 4 * parameter_count(m));
  CHECK(off.peak_requested_bytes - on.peak_requested_bytes ==
        4 * parameter_count(m) - on.peak_breakdown[static_cast<int>(Category::kGrads)]);
}
