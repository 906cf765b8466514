// exec14 (issue 10): the CPU reference executor on Megatron's fused MLA rope
// (megatron/core/fusions/fused_mla_yarn_rope_apply.py @ d98e8a64ddf3: the in-place q rope, the kv
// split, YaRN's cos/sin tables) and on DeepSeek's routed_scaling_factor under hf, against the
// simulator to the byte (the walker fails any backward that reads a tensor its op did not save),
// gradients bitwise the same across strategies and against central finite differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "executor_steps.hpp"
#include "mla_rope.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::count;
using fixtures::execute;
using fixtures::finite_differences;
using fixtures::small;

// A tiny MLA whose rotary part Megatron's kernels take: emb_dim % 4 == 0 (_FusedMLARoPEInplace
// and _FusedMLARoPEKVSplit assert it). 4 heads of qk 4 + 4 rotary, v 3, latent 5.
ModelConfig tiny_mla4(int64_t layers) {
  ModelConfig m = fixtures::tiny_gqa_llama(layers);
  m.name = m.source = "tiny-mla4";
  m.family = "deepseek_v2";
  m.heads = m.kv_heads = 4;
  m.head_dim = 8;
  m.qk_rope_dim = 4;
  m.kv_lora_rank = 5;
  m.v_head_dim = 3;
  return m;
}

// The same with DeepSeek's MoE from layer 1 (first_k_dense_replace 1): 4 routed experts of width
// 6, top-2, one shared expert, the top-k weights times `scaling`.
ModelConfig tiny_deepseek(int64_t layers, double scaling) {
  ModelConfig m = tiny_mla4(layers);
  m.name = m.source = "tiny-deepseek";
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn = 6;
  m.shared_ffn = 6;
  m.dense_layers = 1;
  m.routed_scaling = scaling;
  return m;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> ramp(size_t n, double k) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(k * static_cast<double>(i + 1));
  return v;
}

}  // namespace

TEST_CASE("exec14: the fused MLA rope kernels: the backward is the forward's adjoint") {
  namespace mr = executor::mla_rope;
  const int64_t s = 5, heads = 3, nope = 2, rope = 4, v = 3, tokens = 2 * s;
  const std::vector<double> t = mr::tables(s, rope, 10000.0);
  // emb = cat(freqs, freqs): the left and right halves of a row are the same angles
  for (int64_t p = 0; p < s; ++p)
    for (int64_t j = 0; j < rope / 2; ++j) {
      CHECK(t[p * rope + j] == t[p * rope + rope / 2 + j]);
      CHECK(t[(s + p) * rope + j] == t[(s + p) * rope + rope / 2 + j]);
    }
  CHECK(t[0] == 1.0);  // position 0: cos 1, sin 0
  CHECK(t[s * rope] == 0.0);
  // q: <fwd(x), y> == <x, bwd(y)> and the nope part untouched
  const std::vector<double> x = ramp(static_cast<size_t>(tokens * heads * (nope + rope)), 0.7);
  const std::vector<double> y = ramp(x.size(), 1.3);
  std::vector<double> fx = x, by = y;
  mr::rotate_q(fx, t, s, heads, nope, rope, false);
  mr::rotate_q(by, t, s, heads, nope, rope, true);
  CHECK(dot(fx, y) == doctest::Approx(dot(x, by)).epsilon(1e-12));
  for (int64_t r = 0; r < tokens * heads; ++r)
    for (int64_t c = 0; c < nope; ++c) CHECK(fx[r * (nope + rope) + c] == x[r * (nope + rope) + c]);
  // a rotation: the backward undoes the forward (cos^2 + sin^2 = 1 per pair)
  std::vector<double> back = fx;
  mr::rotate_q(back, t, s, heads, nope, rope, true);
  for (size_t i = 0; i < x.size(); ++i) CHECK(back[i] == doctest::Approx(x[i]).epsilon(1e-12));
  // position 0 (cos 1, sin 0): the pairs (x0, x1), (x2, x3) leave as x0, x2, x1, x3
  CHECK(fx[nope + 0] == x[nope + 0]);
  CHECK(fx[nope + 1] == x[nope + 2]);
  CHECK(fx[nope + 2] == x[nope + 1]);
  CHECK(fx[nope + 3] == x[nope + 3]);
  // kv split: <fwd(kv, emb), (dk, dv)> == <(kv, emb), bwd(dk, dv)>
  const std::vector<double> kv = ramp(static_cast<size_t>(tokens * heads * (nope + v)), 0.3);
  const std::vector<double> emb = ramp(static_cast<size_t>(tokens * rope), 0.9);
  std::vector<double> key, value, dkv, demb;
  mr::kv_split_forward(kv, emb, t, s, heads, nope, rope, v, key, value);
  CHECK(key.size() == static_cast<size_t>(tokens * heads * (nope + rope)));
  CHECK(value.size() == static_cast<size_t>(tokens * heads * v));
  const std::vector<double> dk = ramp(key.size(), 1.7), dv = ramp(value.size(), 2.1);
  mr::kv_split_backward(dk, dv, t, s, heads, nope, rope, v, dkv, demb);
  CHECK(dot(key, dk) + dot(value, dv) ==
        doctest::Approx(dot(kv, dkv) + dot(emb, demb)).epsilon(1e-12));
  // every head's key carries the same rotated k_pos_emb
  for (int64_t tok = 0; tok < tokens; ++tok)
    for (int64_t c = 0; c < rope; ++c)
      CHECK(key[(tok * heads + 2) * (nope + rope) + nope + c] ==
            key[(tok * heads + 0) * (nope + rope) + nope + c]);
}

TEST_CASE("exec14: Megatron's MLA with its fused rope runs to the simulator's byte") {
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed})
    for (const int64_t ql : {int64_t{0}, int64_t{6}}) {
      const std::string precision(name(pr));
      CAPTURE(precision);
      CAPTURE(ql);
      ModelConfig m = tiny_mla4(5);
      m.q_lora_rank = ql;
      const TrainSetup s = small(Impl::kMegatron, pr, AttentionKind::kFlash);
      const Graph g = build_graph_exec(m, s, fixtures::executor_device());
      CHECK(count(g, Exec::kNone) == 0);
      CHECK(count(g, Exec::kMlaRopeTables) == 1);
      CHECK(count(g, Exec::kMlaRopeQ) == m.layers);
      CHECK(count(g, Exec::kMlaRopeKv) == m.layers);
      // what each saves: cos and sin only (save_for_backward(cos, sin)); the q rope is in place
      for (size_t i = 0; i < g.args.size(); ++i) {
        const OpArgs& a = g.args[i];
        if (a.exec != Exec::kMlaRopeQ && a.exec != Exec::kMlaRopeKv) continue;
        const int32_t tables = a.in[a.exec == Exec::kMlaRopeQ ? 1 : 2].storage;
        const int32_t* b = g.begin(g.ops[i].saves);
        const int32_t* e = g.end(g.ops[i].saves);
        CHECK(e - b == 1);
        CHECK(*b == tables);
        CHECK(g.storages[tables].bytes == 2 * s.seq * m.qk_rope_dim * bytes_of(g.storages[tables].dtype));
        if (a.exec == Exec::kMlaRopeQ) CHECK(a.out[0].storage == a.in[0].storage);
      }
      fixtures::runs_exact(m, s, fixtures::executor_device(),
                           {"none", "full", "every:2", "sqrt", "selective",
                            "custom:none@0-1+full@2-3+sel@4-4"});
      // save-matmuls SAC caches the q projection's output, which the rope then rotates in place:
      // refused by name (walker.cpp run_step), wherever a SAC block holds the rope
      for (const char* st : {"sac:mm", "custom:none@0-3+sac@4-4"}) {
        CAPTURE(st);
        try {
          execute(g, st);
          FAIL("expected a refusal");
        } catch (const Unsupported& e) {
          CHECK(std::string(e.what()).find("in-place MLA q rope") != std::string::npos);
        }
      }
    }
}

TEST_CASE("exec14: Megatron's fused MLA rope gradients match central finite differences (fp32)") {
  ModelConfig m = tiny_mla4(2);
  m.hidden = 8, m.ffn_hidden = 12, m.vocab = 11, m.heads = m.kv_heads = 2, m.kv_lora_rank = 3;
  TrainSetup s = small(Impl::kMegatron, Precision::kFp32, AttentionKind::kFlash);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(count(g, Exec::kMlaRopeQ) == 2);
  CHECK(finite_differences(g) > 300);
}

TEST_CASE("exec14: DeepSeek's routed_scaling_factor under hf runs to the byte and scales") {
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
    const std::string precision(name(pr));
    CAPTURE(precision);
    const ModelConfig m = tiny_deepseek(3, 2.5);
    const TrainSetup s = small(Impl::kHf, pr, AttentionKind::kFlash);
    const Graph g = build_graph_exec(m, s, fixtures::executor_device());
    CHECK(count(g, Exec::kNone) == 0);
    int scaled = 0;
    for (size_t i = 0; i < g.args.size(); ++i)
      if (g.ops[i].name == std::string("routed scaling")) {
        ++scaled;
        CHECK(g.args[i].exec == Exec::kScale);
        CHECK(g.args[i].p == 2.5f);
        CHECK(g.begin(g.ops[i].saves) == g.end(g.ops[i].saves));  // MulBackward0 by a scalar
      }
    CHECK(scaled == m.layers - m.dense_layers);
    fixtures::runs_exact(m, s, fixtures::executor_device(), {"none", "full", "selective", "sac:mm"});
    // the factor reaches the loss: the same weights with factor 1 give another loss
    const Graph one = build_graph_exec(tiny_deepseek(3, 1.0), s, fixtures::executor_device());
    CHECK(execute(g, "none").loss != execute(one, "none").loss);
  }
}

TEST_CASE("exec14: DeepSeek's routed scaling gradients match central finite differences (fp32)") {
  ModelConfig m = tiny_deepseek(2, 2.5);
  m.hidden = 8, m.ffn_hidden = 12, m.vocab = 11, m.heads = m.kv_heads = 2, m.kv_lora_rank = 3;
  m.expert_ffn = m.shared_ffn = 4;
  TrainSetup s = small(Impl::kHf, Precision::kFp32, AttentionKind::kFlash);
  s.seq = 4;
  const Graph g = build_graph_exec(m, s, fixtures::executor_device());
  CHECK(finite_differences(g) > 300);
}
