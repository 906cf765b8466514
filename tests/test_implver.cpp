// implver (issue 10): the optimizer as an implementation's default, and releases of a code base
// as rows of data (--impl NAME@VERSION; sim/src/impl/registry.cpp).
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

TrainSetup with(Impl impl, std::string_view version = {}) {
  TrainSetup t;
  t.impl = impl;
  t.impl_version = version;
  t.micro_batch = 2;
  t.seq = 128;
  return t;
}

Optimizer resolved(const ModelConfig& m, const TrainSetup& t) {
  const TrainSetup r = resolve_setup(m, t);
  REQUIRE(r.optimizer.has_value());
  CHECK(*r.optimizer == resolved_optimizer(t));  // the same answer before resolution
  return *r.optimizer;
}

}  // namespace

TEST_CASE("the optimizer defaults to the implementation release's") {
  const ModelConfig gpt = fixtures::gpt2_small();
  const ModelConfig llama = fixtures::tiny_llama();
  // megatron/core/optimizer/__init__.py @ d98e8a6: Transformer Engine's FusedAdam
  CHECK(resolved(gpt, with(Impl::kMegatron)) == Optimizer::kAdamFused);
  // the Trainer's adamw_torch (v4.48): torch AdamW, foreach on CUDA
  CHECK(resolved(gpt, with(Impl::kHf)) == Optimizer::kAdamForeach);
  // the Trainer of early 2022: adamw_hf, a per-parameter loop
  CHECK(resolved(gpt, with(Impl::kHf, "4.16")) == Optimizer::kAdamLoop);
  // torchtitan v0.2.2 optimizer.implementation = "fused"; 9dec370 --optimizer.fused off: foreach
  CHECK(resolved(llama, with(Impl::kTorchtitan)) == Optimizer::kAdamFused);
  CHECK(resolved(llama, with(Impl::kTorchtitan, "9dec370")) == Optimizer::kAdamForeach);
  // nanoGPT: fused AdamW where torch has it (the SDPA path); the slow path's torch < 2.0 loops
  CHECK(resolved(gpt, with(Impl::kNanogpt)) == Optimizer::kAdamFused);
  TrainSetup slow = with(Impl::kNanogpt);
  slow.attention = AttentionKind::kStandard;
  CHECK(resolved(gpt, slow) == Optimizer::kAdamLoop);
  // --optimizer given: kept
  TrainSetup given = with(Impl::kMegatron);
  given.optimizer = Optimizer::kSgd;
  CHECK(resolved(gpt, given) == Optimizer::kSgd);
  // the paper profile: no code base; Adam (its state only: no temporaries are modeled there)
  TrainSetup paper = fixtures::paper(1, false);
  CHECK(resolve_setup(gpt, paper).optimizer == std::nullopt);
  CHECK(resolved_optimizer(paper) == Optimizer::kAdamForeach);
}

TEST_CASE("each optimizer kind's temporaries follow the resolved default") {
  const ModelConfig gpt = fixtures::gpt2_small();
  const Device dev = fixtures::h100();
  // fused (megatron's default): no temporary beyond the state
  CHECK(build_graph(gpt, with(Impl::kMegatron), dev).optimizer_transient_bytes == 0);
  TrainSetup foreach_ = with(Impl::kMegatron);
  foreach_.optimizer = Optimizer::kAdamForeach;
  CHECK(build_graph(gpt, foreach_, dev).optimizer_transient_bytes > 0);
  // hf@4.16's adamw_hf: one fp32 temporary the size of the largest parameter (the word
  // embeddings, 50257 x 768)
  CHECK(build_graph(gpt, with(Impl::kHf, "4.16"), dev).optimizer_transient_bytes ==
        4 * gpt.vocab * gpt.hidden);
  // nanoGPT's slow path: torch's single-tensor AdamW, sqrt(v) and its quotient alive together
  TrainSetup slow = with(Impl::kNanogpt);
  slow.attention = AttentionKind::kStandard;
  CHECK(build_graph(gpt, slow, dev).optimizer_transient_bytes == 8 * gpt.vocab * gpt.hidden);
}

TEST_CASE("--impl NAME@VERSION: releases are rows, a bad one lists the valid ones") {
  std::string err;
  auto c = parse_impl_choice("torchtitan@9dec370", &err);
  REQUIRE(c.has_value());
  CHECK(c->impl == Impl::kTorchtitan);
  CHECK(c->version == "9dec370");
  CHECK(spec(c->impl, c->version).flash_repeat_kv);
  CHECK_FALSE(spec(Impl::kTorchtitan).flash_repeat_kv);  // v0.2.2: enable_gqa
  c = parse_impl_choice("hf", &err);
  REQUIRE(c.has_value());
  CHECK(c->version.empty());
  CHECK(&spec(Impl::kHf, "") == &spec(Impl::kHf));
  CHECK_FALSE(parse_impl_choice("torchtitan@v9", &err).has_value());
  CHECK(err == "'v9' is not a release of torchtitan modeled here: v0.2.2 (default), 9dec370");
  err.clear();
  CHECK_FALSE(parse_impl_choice("titan@v0.2.2", &err).has_value());
  CHECK(err.empty());  // an unknown name: the caller lists the names
  CHECK(impl_names() == "hf, torchtitan, megatron, nanogpt");  // each code base once
  // every row has a key, unique within its code base
  for (const ImplSpec& a : implementations()) {
    CHECK_FALSE(a.version_key.empty());
    CHECK_FALSE(a.optimizer_source.empty());
    for (const ImplSpec& b : implementations())
      if (&a != &b && a.id == b.id) CHECK(a.version_key != b.version_key);
  }
  // resolve_setup names the release, idempotently
  const TrainSetup r = resolve_setup(fixtures::gpt2_small(), TrainSetup{});
  CHECK(r.impl_version == "4.48");
  const TrainSetup r2 = resolve_setup(fixtures::gpt2_small(), r);
  CHECK(r2.impl_version == r.impl_version);
  CHECK(r2.optimizer == r.optimizer);
}

TEST_CASE("hf@4.16: the early-2022 Trainer's eager attention and reentrant checkpointing") {
  const ModelConfig gpt = fixtures::gpt2_small();
  const TrainSetup r = resolve_setup(gpt, with(Impl::kHf, "4.16"));
  CHECK(resolved_attention(r) == AttentionKind::kStandard);
  CHECK(build_graph(gpt, r, fixtures::h100()).impl_version == "4.16");
  CHECK(recompute_mode(build_graph(gpt, r, fixtures::h100())) == RecomputeMode::kReentrant);
  // v4.48 is reentrant too: gradient_checkpointing_enable's {"use_reentrant": True} (hf.cpp)
  CHECK(recompute_mode(build_graph(gpt, resolve_setup(gpt, with(Impl::kHf)), fixtures::h100())) ==
        RecomputeMode::kReentrant);
  TrainSetup off = with(Impl::kHf);
  off.reentrant = false;  // gradient_checkpointing_kwargs={"use_reentrant": False}
  CHECK(recompute_mode(build_graph(gpt, resolve_setup(gpt, off), fixtures::h100())) ==
        RecomputeMode::kNonReentrant);
}

TEST_CASE("torchtitan@9dec370 repeats K and V before SDPA: it saves a-head K and V") {
  // tiny-llama: a = 8 query heads, g = 2 KV heads, d = 32; fsdp2-bf16: bf16 activations.
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup old = with(Impl::kTorchtitan, "9dec370");
  TrainSetup now = with(Impl::kTorchtitan);
  old.optimizer = now.optimizer = Optimizer::kAdamFused;  // the same step but for attention
  const Result a = fixtures::run(m, old, "none");
  const Result b = fixtures::run(m, now, "none");
  const int64_t tokens = 2 * 128;
  // the flash op saves repeated K and V ([tokens, a*d] each) where v0.2.2's saves [tokens, g*d]
  CHECK(a.activation_bytes_per_layer - b.activation_bytes_per_layer ==
        2 * tokens * (m.heads - m.kv_heads) * m.head_dim * 2);
  const Graph g = build_graph(m, resolve_setup(m, old), fixtures::h100());
  int repeats = 0;
  for (const Op& op : g.ops) repeats += op.kind == OpKind::kCopy;
  const Graph g2 = build_graph(m, resolve_setup(m, now), fixtures::h100());
  int repeats2 = 0;
  for (const Op& op : g2.ops) repeats2 += op.kind == OpKind::kCopy;
  CHECK(repeats - repeats2 == 2 * m.layers);  // repeat k, repeat v in every block
}
