// tece (issue 10): what Megatron/Transformer Engine allocate beyond the saves.
// - TE's norm backward workspace (dgamma_part, dbeta_part: ctas_per_col x cols fp32 each), sized
//   from TE's launch parameters and the kernels' occupancy (sim/src/norm_te.cpp; the occupancy
//   table from harness/te_norm_occupancy.py); each figure below is derived by hand.
// - --deterministic: Megatron's determinism.py sets CUBLAS_WORKSPACE_CONFIG=:4096:8, PyTorch's
//   cuBLAS workspace is then 8 x 4096 KiB on every GPU; TE's RMSNorm gets the NaN fill.
// Sources: docs/memory-model.md §8 "megatron" (rows "norm backward workspace", "--deterministic").
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"

using namespace sim;

namespace {

ModelConfig llama_width(int64_t h) {
  ModelConfig m = fixtures::tiny_llama();
  m.hidden = h;
  m.heads = m.kv_heads = static_cast<int32_t>(h / 32);
  m.head_dim = 32;
  return m;
}

TrainSetup megatron(int64_t b, int64_t s) { return fixtures::megatron_tp(1, s, 0, b); }

const Op& op_named(const Graph& g, std::string_view name) {
  for (const Op& op : g.ops)
    if (std::string_view(op.name) == name) return op;
  FAIL("no op " << name);
  return g.ops.front();
}

Device a100() {
  Device d = fixtures::h100();
  d.sm_arch = 80;
  d.sm_count = 108;
  d.cublas_workspace_bytes = 8'519'680;  // PyTorch's default :4096:2:16:8 on sm_80
  return d;
}

}  // namespace

TEST_SUITE("tece") {
  TEST_CASE("TE RMSNorm backward workspace: tuned kernel (h 512, rows % 4 == 0), H100 and A100") {
    // rmsnorm_bwd tuned 512 bf16: CTAS_PER_ROW 1; ctas_per_sm 6 on sm_90 and on sm_80 (80
    // registers x 128 threads). ctas_per_col = SMs x 6: 792 on 132 SMs, 648 on 108;
    // dgamma_part = ctas_per_col x 512 x 4 B; no barrier (one CTA per row).
    const ModelConfig m = llama_width(512);
    const TrainSetup t = megatron(2, 128);
    CHECK(op_named(build_graph(m, t, fixtures::h100()), "norm1").bwd_transient_bytes ==
          792 * 512 * 4);
    CHECK(op_named(build_graph(m, t, a100()), "norm1").bwd_transient_bytes == 648 * 512 * 4);
    // the final norm (TENorm) runs the same kernel
    CHECK(op_named(build_graph(m, t, fixtures::h100()), "final norm").bwd_transient_bytes ==
          792 * 512 * 4);
  }

  TEST_CASE("TE RMSNorm backward workspace: general kernel, bounded by the rows") {
    // h 256 has no tuned kernel: the general one registered at 512 (WARPS_M 4, ctas_per_sm 4 on
    // sm_90, bf16), ctas_per_row 1, ctas_per_col = min(ceil(rows / 4), 132 x 4 = 528)
    const ModelConfig m = llama_width(256);
    CHECK(op_named(build_graph(m, megatron(1, 64), fixtures::h100()), "norm1")
              .bwd_transient_bytes == 16 * 256 * 4);  // 64 rows: 16 CTAs
    CHECK(op_named(build_graph(m, megatron(4, 1024), fixtures::h100()), "norm1")
              .bwd_transient_bytes == 528 * 256 * 4);  // 4096 rows: the occupancy bound
  }

  TEST_CASE("TE RMSNorm backward workspace: wider than any general kernel, two CTAs per row") {
    // h 5120: no tuned RMSNorm kernel; the largest general one (4096, WARPS_M 1, ctas_per_sm 3 on
    // sm_90): ctas_per_row 2, ctas_per_col = min(rows, 132 x 3 / 2 = 198); dgamma_part
    // 198 x 5120 x 4 = 4,055,040; barrier 2 x 198 x 4 = 1,584; workspace 198 x 1 x 2 x 16 = 6,336
    const ModelConfig m = llama_width(5120);
    CHECK(op_named(build_graph(m, megatron(1, 256), fixtures::h100()), "norm1")
              .bwd_transient_bytes == 4'055'040 + 1'584 + 6'336);
  }

  TEST_CASE("TE LayerNorm backward workspace: dgamma and dbeta partials") {
    // megatron GPT, h 256: LayerNorm's general 512 kernel (WARPS_M 4, ctas_per_sm 4 on sm_90),
    // 256 rows: ctas_per_col = min(64, 528) = 64; 2 x 64 x 256 x 4 B
    ModelConfig m = fixtures::megatron_gpt_small();
    TrainSetup t = megatron(2, 128);
    t.attention = AttentionKind::kStandard;
    const Graph g = build_graph(m, t, fixtures::h100());
    CHECK(op_named(g, "norm1").bwd_transient_bytes == 2 * 64 * 256 * 4);
    // not under the others: HF's LayerNorm is torch's (no TE workspace)
    t.impl = Impl::kHf;
    m.family = "gpt2";
    CHECK(op_named(build_graph(m, t, fixtures::h100()), "norm1").bwd_transient_bytes == 0);
  }

  TEST_CASE("--deterministic: PyTorch's cuBLAS workspace is :4096:8 (32 MiB) on every GPU") {
    const ModelConfig m = llama_width(256);
    TrainSetup t = megatron(1, 64);
    const int64_t before = build_graph(m, t, a100()).workspace_bytes;
    t.deterministic = true;
    const int64_t after = build_graph(m, t, a100()).workspace_bytes;
    CHECK(after - before == 8 * 4096 * 1024 - 8'519'680);
    // under the local spec too (the variable is PyTorch's); its eager attention adds Megatron's
    // global memory buffer, [b a, s, s] bf16 = 2 x 1 x 8 x 64 x 64 B
    t.local_spec = true;
    t.attention = AttentionKind::kStandard;
    CHECK(build_graph(m, t, a100()).workspace_bytes == 8 * 4096 * 1024 + 2 * 8 * 64 * 64);
    // on Hopper PyTorch's default is already 32 MiB
    t.deterministic = false;
    const int64_t h_before = build_graph(m, t, fixtures::h100()).workspace_bytes;
    t.deterministic = true;
    CHECK(build_graph(m, t, fixtures::h100()).workspace_bytes == h_before);
  }

  TEST_CASE("--deterministic: TE's RMSNorm gets the NaN fill of what it allocates") {
    const int64_t N = 64, h = 256;
    const ModelConfig m = llama_width(h);
    TrainSetup t = megatron(1, N);
    CHECK(op_named(build_graph(m, t, fixtures::h100()), "norm1").fwd_serial_bytes == 0);
    t.deterministic = true;
    const Graph g = build_graph(m, t, fixtures::h100());  // the op is a reference into it
    const Op& norm = op_named(g, "norm1");
    // forward: ln_out (bf16) and rsigma (fp32 per row), one fill each
    CHECK(norm.fwd_serial_bytes == 2 * N * h + 4 * N);
    CHECK(norm.fwd_serial_kernels == 2);
    CHECK(norm.bwd_serial_bytes > 0);
  }

  TEST_CASE("TE's own cuBLAS workspace under the TE spec: 32 MiB + 1 KiB on Hopper, 4 MiB on A100") {
    const ModelConfig m = llama_width(256);
    TrainSetup t = megatron(1, 64);
    t.attention = AttentionKind::kStandard;
    const int64_t buffer = 2 * 8 * 64 * 64;  // Megatron's global memory buffer, [b a, s, s] bf16
    // PyTorch's (the device file's) + TE's
    CHECK(build_graph(m, t, fixtures::h100()).workspace_bytes ==
          32LL * 1024 * 1024 + (32LL * 1024 * 1024 + 1024) + buffer);
    CHECK(build_graph(m, t, a100()).workspace_bytes == 8'519'680 + 4'194'304 + buffer);
    // the local spec has no TE GEMM
    t.local_spec = true;
    CHECK(build_graph(m, t, fixtures::h100()).workspace_bytes == 32LL * 1024 * 1024 + buffer);
    // nor do the other code bases
    TrainSetup hf = t;
    hf.local_spec = false;
    hf.impl = Impl::kHf;
    hf.attention = AttentionKind::kFlash;
    CHECK(build_graph(m, hf, fixtures::h100()).workspace_bytes == 32LL * 1024 * 1024);
  }

  TEST_CASE("--transformer-impl local: torch's RMSNorm keeps TE's storages, no TE workspace") {
    const int64_t N = 256, h = 256;
    const ModelConfig m = llama_width(h);
    TrainSetup te = megatron(2, 128), local = te;
    te.attention = local.attention = AttentionKind::kStandard;
    local.local_spec = true;
    const Graph gt = build_graph(m, te, fixtures::h100());
    const Graph gl = build_graph(m, local, fixtures::h100());
    const Op& nt = op_named(gt, "norm1");
    const Op& nl = op_named(gl, "norm1");
    int64_t saved_t = 0, saved_l = 0;
    for (const int32_t* id = gt.begin(nt.saves); id != gt.end(nt.saves); ++id)
      saved_t += gt.storages[static_cast<size_t>(*id)].bytes;
    for (const int32_t* id = gl.begin(nl.saves); id != gl.end(nl.saves); ++id)
      saved_l += gl.storages[static_cast<size_t>(*id)].bytes;
    CHECK(saved_l == saved_t);
    CHECK(saved_l == 2 * N * h + 4 * N);  // x (bf16), rstd (fp32 per row)
    CHECK(nl.bwd_transient_bytes == 0);
    CHECK(nt.bwd_transient_bytes > 0);
    CHECK(fixtures::run(m, local, "none").activation_bytes_per_layer ==
          fixtures::run(m, te, "none").activation_bytes_per_layer);
    // --deterministic fills nothing under the local spec (no TE op)
    local.deterministic = true;
    int64_t fill = 0;
    for (const Op& op : build_graph(m, local, fixtures::h100()).ops)
      fill += op.fwd_serial_bytes + op.bwd_serial_bytes;
    CHECK(fill == 0);
  }

  TEST_CASE("--transformer-impl local: apex's LayerNorm part gradients, [16, h] fp32 x 2") {
    ModelConfig m = fixtures::megatron_gpt_small();
    TrainSetup t = megatron(2, 128);
    t.attention = AttentionKind::kStandard;
    t.local_spec = true;
    CHECK(op_named(build_graph(m, t, fixtures::h100()), "norm1").bwd_transient_bytes ==
          2 * 16 * 256 * 4);
  }

  TEST_CASE("--transformer-impl local: refusals name the flag") {
    const ModelConfig m = llama_width(256);
    const auto where = [&](TrainSetup t) -> std::string {
      try {
        (void)resolve_setup(m, t);
      } catch (const ConfigError& e) {
        return e.where();
      }
      return "";
    };
    TrainSetup t = megatron(1, 64);
    t.local_spec = true;
    CHECK(where(t).empty());  // eager attention by default
    CHECK(*resolve_setup(m, t).attention == AttentionKind::kStandard);
    TrainSetup flash = t;
    flash.attention = AttentionKind::kFlash;
    CHECK(where(flash) == "--attention");
    TrainSetup hf = t;
    hf.impl = Impl::kHf;
    CHECK(where(hf) == "--transformer-impl");
    TrainSetup sp = t;
    sp.tp = 2;
    sp.sp = true;
    CHECK(where(sp) == "--sp");
    TrainSetup cp = t;
    cp.cp = 2;
    CHECK(where(cp) == "--cp");
  }
}
