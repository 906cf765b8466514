// Kernel classes (DESIGN.md §5). Every table names its source; research/kernel_throughput.md
// holds the transcriptions, checked against the sources as noted there.
#include "kernels.hpp"

#include "sim/simulate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace sim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

KernelPick pick_kernel(const Op& op) {
  switch (op.kind) {
    case OpKind::kLinear:
    case OpKind::kBmm:
      // An op marked as a GEMM but without shapes (synthetic graphs) runs as a large GEMM.
      return {KernelClass::kGemm, KernelChoice::kDefault};
    case OpKind::kFlashAttention:
      return {KernelClass::kAttention, op.kernel == KernelChoice::kDefault
                                           ? KernelChoice::kFlashAttention2
                                           : op.kernel};
    default:
      return {KernelClass::kMemoryBound, KernelChoice::kDefault};
  }
}

// Dimension quantization (NVIDIA Deep Learning Performance docs, "Matrix Multiplication
// Background User's Guide", sections "Tile Quantization" and "Wave Quantization"): a GEMM's
// output is cut into tiles, one thread block each, and the tiles run in waves of one per SM; a
// partial tile and a partial last wave cost as much as full ones. cuBLAS's heuristics pick the
// tile and split-K that fill the SMs best; we take the best of its common Ampere/Hopper tiles
// (the guide's 256x128 example and the 128x256, 128x128, 64x128 tiles) and split-K by 1..8
// (ASSUMPTION, not measured: smaller tiles and split-K slices run at the same per-SM rate, so
// this is an upper bound on small GEMMs). Check: the best shapes stas00's mamf-finder found
// (research/kernel_throughput.md §14a) quantize to 0.99 (A100 1024x10240x5120 on 108 SMs) and
// 0.97 (H100 2048x2048x13312 on 132 SMs), so the device's large-GEMM efficiency (measured on
// such shapes) is that of unquantized work to within 3 %.
// Alignment: a 16-bit GEMM with a dimension not a multiple of 8 loses the tensor cores' vector
// loads: stas00's SwiGLU sweep (§14b, H100, torch.bmm 4x4096xKx4096) ran K = 10922 at 272.73
// TFLOP/s against 395.0-398.4 for K = 10848-11008 (multiples of 32): 0.69.
namespace {

double gemm_shape_efficiency_uncached(int64_t m, int64_t n, int64_t k, int64_t batch, int sms,
                                      bool math16);

// A pure function of its arguments, asked the same few shapes thousands of times per simulation
// (every block repeats them): a small direct-mapped memo per thread (BENCHMARKS.md).
struct GemmMemo {
  struct Entry {
    int64_t m = -1, n = 0, k = 0, batch = 0;
    int sms = 0;
    bool math16 = false;
    double value = 0;
  };
  std::array<Entry, 64> e{};
};

}  // namespace

double gemm_shape_efficiency(int64_t m, int64_t n, int64_t k, int64_t batch, int sms,
                             bool math16) {
  thread_local GemmMemo memo;
  const uint64_t h = (static_cast<uint64_t>(m) * 0x9E3779B97F4A7C15ull) ^
                     (static_cast<uint64_t>(n) * 0xC2B2AE3D27D4EB4Full) ^
                     (static_cast<uint64_t>(k) * 0x165667B19E3779F9ull) ^
                     static_cast<uint64_t>(batch) ^ (static_cast<uint64_t>(sms) << 7) ^
                     static_cast<uint64_t>(math16);
  GemmMemo::Entry& e = memo.e[(h >> 58) & 63];
  if (e.m == m && e.n == n && e.k == k && e.batch == batch && e.sms == sms && e.math16 == math16)
    return e.value;
  const double v = gemm_shape_efficiency_uncached(m, n, k, batch, sms, math16);
  e = {m, n, k, batch, sms, math16, v};
  return v;
}

namespace {

double gemm_shape_efficiency_uncached(int64_t m, int64_t n, int64_t k, int64_t batch, int sms,
                                      bool math16) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || sms <= 0) return 1.0;
  static constexpr std::array<std::array<int64_t, 2>, 4> kTiles{{{256, 128}, {128, 256},
                                                                 {128, 128}, {64, 128}}};
  double best = 0;
  for (const auto& [tm, tn] : kTiles) {
    const int64_t tiles_m = ceil_div(m, tm), tiles_n = ceil_div(n, tn);
    const double tile_eff = static_cast<double>(m) * static_cast<double>(n) /
                            (static_cast<double>(tiles_m * tm) * static_cast<double>(tiles_n * tn));
    const double tiles = static_cast<double>(tiles_m) * static_cast<double>(tiles_n) *
                         static_cast<double>(batch);
    const double waves = std::ceil(tiles / sms);
    best = std::max(best, tile_eff * tiles / (waves * sms));
  }
  const bool aligned = !math16 || (m % 8 == 0 && n % 8 == 0 && k % 8 == 0);
  return best * (aligned ? 1.0 : 272.73 / 396.0);
}

}  // namespace

namespace {

// Throughput tables, TFLOP/s, at sequence lengths 512, 1k, 2k, 4k, 8k, 16k; total tokens
// batch x seq = 16k, hidden 2048, bf16/fp16 (the papers' settings).
using Row = std::array<double, 6>;
constexpr std::array<double, 6> kSeqs{512, 1024, 2048, 4096, 8192, 16384};

struct AttnTable {
  int head_dim;
  bool causal;
  Row row;
};

// FlashAttention-2 forward + backward (Dao-AILab/flash-attention README "Performance", images
// assets/flash2_a100_fwd_bwd_benchmark.png and flash2_h100_fwd_bwd_benchmark.png at 4f285b35;
// research/kernel_throughput.md §10).
constexpr AttnTable kFa2A100FwdBwd[] = {
    {64, false, {132, 153, 162, 171, 175, 176}},  {128, false, {151, 173, 187, 196, 201, 203}},
    {64, true, {88, 119, 140, 156, 165, 171}},     {128, true, {99, 133, 155, 173, 182, 189}}};
constexpr AttnTable kFa2H100FwdBwd[] = {
    {64, false, {215, 254, 274, 288, 294, 296}},  {128, false, {248, 294, 320, 326, 335, 338}},
    {64, true, {141, 192, 232, 257, 273, 284}},    {128, true, {163, 221, 265, 294, 308, 328}}};
// xformers (cutlass memory-efficient attention, PyTorch SDPA's efficient backend), A100, same
// figures as kFa2A100FwdBwd.
constexpr AttnTable kMemEffA100FwdBwd[] = {
    {64, false, {68, 73, 76, 77, 75, 75}},  {128, false, {83, 91, 95, 96, 97, 98}},
    {64, true, {51, 60, 66, 68, 69, 67}},    {128, true, {58, 72, 82, 87, 91, 92}}};
// Forward only, H100 SXM5 (Shah et al. 2024, FlashAttention-3, Fig. 5; §11).
constexpr AttnTable kFa2H100Fwd[] = {
    {64, false, {282, 306, 318, 321, 322, 324}},  {64, true, {180, 229, 262, 284, 295, 299}},
    {128, false, {309, 350, 362, 368, 370, 370}}, {128, true, {191, 260, 298, 319, 333, 335}},
    {256, false, {275, 313, 321, 323, 324, 326}}, {256, true, {208, 251, 278, 293, 297, 298}}};
constexpr AttnTable kFa3H100Fwd[] = {
    {64, false, {333, 392, 460, 476, 496, 497}},  {64, true, {197, 265, 371, 420, 460, 473}},
    {128, false, {467, 565, 625, 638, 646, 648}}, {128, true, {292, 423, 521, 579, 602, 616}},
    {256, false, {482, 627, 707, 736, 746, 756}}, {256, true, {286, 427, 537, 612, 628, 642}}};
constexpr AttnTable kCudnnH100Fwd[] = {
    {64, false, {335, 373, 395, 408, 412, 413}},  {64, true, {225, 288, 334, 363, 379, 388}},
    {128, false, {497, 574, 617, 609, 600, 595}}, {128, true, {315, 410, 484, 518, 529, 539}},
    {256, false, {470, 546, 580, 581, 580, 581}}, {256, true, {308, 391, 450, 483, 497, 509}}};
// Backward, non-causal only, H100 SXM5 (FA3 paper Fig. 6, reconstructed from the PDF text
// layer; moderate confidence, §11).
constexpr AttnTable kFa3H100BwdNc[] = {{64, false, {272, 363, 422, 453, 472, 474}},
                                       {128, false, {316, 424, 501, 542, 559, 561}}};
constexpr AttnTable kCudnnH100BwdNc[] = {{64, false, {266, 348, 395, 417, 432, 433}},
                                         {128, false, {305, 408, 465, 499, 518, 516}}};

// Linear in log2(seq) between the tabulated lengths, clamped to [512, 16k].
double at_seq(const Row& r, int64_t seq) {
  const double x = std::log2(std::clamp(static_cast<double>(seq), kSeqs.front(), kSeqs.back()));
  for (size_t i = 1; i < kSeqs.size(); ++i) {
    const double x1 = std::log2(kSeqs[i]);
    if (x <= x1) {
      const double x0 = std::log2(kSeqs[i - 1]);
      return r[i - 1] + (r[i] - r[i - 1]) * (x - x0) / (x1 - x0);
    }
  }
  return r.back();
}

// TFLOP/s from a table for (head_dim, causal): linear in log2(head dim) between the tabulated
// head dims, clamped; a causality the table lacks returns 0.
template <size_t N>
double lookup(const AttnTable (&t)[N], int64_t seq, int64_t head_dim, bool causal) {
  const AttnTable* lo = nullptr;
  const AttnTable* hi = nullptr;
  for (const AttnTable& e : t) {
    if (e.causal != causal) continue;
    if (e.head_dim <= head_dim && (!lo || e.head_dim > lo->head_dim)) lo = &e;
    if (e.head_dim >= head_dim && (!hi || e.head_dim < hi->head_dim)) hi = &e;
  }
  if (!lo && !hi) return 0;
  if (!lo) return at_seq(hi->row, seq);
  if (!hi || lo == hi) return at_seq(lo->row, seq);
  const double w = (std::log2(static_cast<double>(head_dim)) - std::log2(lo->head_dim)) /
                   (std::log2(hi->head_dim) - std::log2(lo->head_dim));
  return at_seq(lo->row, seq) * (1 - w) + at_seq(hi->row, seq) * w;
}

// Backward throughput from forward and forward+backward ones: the kernel FLOPs are F forward and
// 2.5 F backward, so 3.5 F / fb = F / f + 2.5 F / b.
double bwd_from(double fwd, double fwd_bwd) { return 2.5 / (3.5 / fwd_bwd - 1.0 / fwd); }

// Hopper-class tables (sm 90); A100-class (sm 80) otherwise.
double hopper_tflops(KernelChoice k, int64_t s, int64_t hd, bool causal, bool backward) {
  switch (k) {
    case KernelChoice::kFlashAttention3:
    case KernelChoice::kCudnnAttention: {
      const bool fa3 = k == KernelChoice::kFlashAttention3;
      const double f = fa3 ? lookup(kFa3H100Fwd, s, hd, causal) : lookup(kCudnnH100Fwd, s, hd, causal);
      if (!backward) return f;
      const double b_nc = fa3 ? lookup(kFa3H100BwdNc, s, hd, false) : lookup(kCudnnH100BwdNc, s, hd, false);
      if (!causal) return b_nc;
      // ASSUMPTION: no causal backward figure is published in the paper; the backward loses to
      // the causal mask what the forward loses.
      const double f_nc = fa3 ? lookup(kFa3H100Fwd, s, hd, false) : lookup(kCudnnH100Fwd, s, hd, false);
      return b_nc * f / f_nc;
    }
    case KernelChoice::kSdpaMemEfficient: {
      // ASSUMPTION: no H100 figure for the cutlass kernel; A100's scaled by FA2's H100/A100 ratio.
      const double ratio =
          lookup(kFa2H100FwdBwd, s, hd, causal) / lookup(kFa2A100FwdBwd, s, hd, causal);
      return lookup(kMemEffA100FwdBwd, s, hd, causal) * ratio;
    }
    default: {
      const double fb = lookup(kFa2H100FwdBwd, s, hd, causal);
      const double f = lookup(kFa2H100Fwd, s, hd, causal);
      return backward ? bwd_from(f, fb) : f;
    }
  }
}

double ampere_tflops(KernelChoice k, int64_t s, int64_t hd, bool causal) {
  // FA3 is Hopper-only and cuDNN's A100 curve is not published: both fall back to FA2 there
  // (the figures published for A100 are forward + backward only: one throughput for both).
  if (k == KernelChoice::kSdpaMemEfficient) return lookup(kMemEffA100FwdBwd, s, hd, causal);
  return lookup(kFa2A100FwdBwd, s, hd, causal);
}

}  // namespace

double attention_flops_per_s(KernelChoice kernel, const Device& d, int64_t seq, int64_t head_dim,
                             bool causal, bool backward) {
  // Devices other than the benchmarked A100 SXM4 80GB and H100 SXM5 80GB: the nearest
  // architecture's curve scaled by the ratio of dense 16-bit peaks (ASSUMPTION: attention
  // kernels are compute-bound at these lengths; H200 and H100 have the same peak).
  const bool hopper = d.sm_arch >= 90;
  const double ref_peak = hopper ? 989e12 : 312e12;  // H100 SXM, A100 datasheet dense bf16
  const double tf = hopper ? hopper_tflops(kernel, seq, head_dim, causal, backward)
                           : ampere_tflops(kernel, seq, head_dim, causal);
  return tf * 1e12 * d.peak_bf16_flops_per_s / ref_peak;
}

// time9 (issue 11): dropout inside a fused attention kernel. The kernel draws one philox number
// per probability whatever p is (p > 0 switches the path on), so the cost is one factor for any
// p > 0; published per-kernel figures are forward + backward only, so the factor is applied to
// both passes.
// - cuDNN fused attention on Hopper (Transformer Engine's FusedAttention, F16_arbitrary_seqlen,
//   Megatron's sbhd layout): NVIDIA/TransformerEngine issue 3312 (2026-08-04), H200 (sm90), TE
//   2.15.0, bf16, 4 sequences x 1,024 tokens, 16 heads, head dim 128, one DotProductAttention
//   forward + backward, median of 50: 0.594 ms at p = 0, 0.614 ms at p = 0.1 (x1.034). H200 and
//   H100 are the same GH100 SMs. (Its packed thd layout pays x1.26 on H200 and routes to another
//   engine; no row here uses thd.)
// - flash-attention 2 (SDPA's flash backend; TE's FlashAttention backend; cuDNN requested
//   before Hopper, timed as FA2 here): NVIDIA/TransformerEngine PR 3313 (2026-08-05), flash-attn
//   2.7.4 under TE 2.17, thd, dropout 0.0 -> 0.1: 0.695 -> 0.728 ms (x1.047), measured on GB200.
//   ASSUMPTION: the same factor on A100 and H100 (FA2 runs the same sm80 kernels, philox
//   included, on every GPU; how the philox work's share differs between GB200 and A100/H100 is
//   not known; no A100 or H100 figure for FA2 with dropout was found).
// - flash-attention 3 has no dropout (TE's backend filter drops it for p > 0; a run asking for it
//   would not get it); SDPA's memory-efficient kernel: no figure found. Both 1.
double attention_dropout_factor(KernelChoice kernel, const Device& d, float p) {
  if (!(p > 0)) return 1.0;
  const bool hopper = d.sm_arch >= 90;
  switch (kernel) {
    case KernelChoice::kCudnnAttention:
      return hopper ? 0.614 / 0.594 : 0.728 / 0.695;  // before Hopper: timed as FA2 (above)
    case KernelChoice::kDefault:
    case KernelChoice::kFlashAttention2:
      return 0.728 / 0.695;
    default:
      return 1.0;
  }
}

double attention_seconds(const Op& op, bool backward, const Device& d) {
  const int64_t b = op.shape[0], heads = op.shape[1], s = op.shape[2], hd = op.shape[3];
  const bool causal = op.shape[4] != 0;
  if (b <= 0 || heads <= 0 || s <= 0 || hd <= 0) return 0;
  // Kernel FLOPs (FA2 paper §4.1): forward 4 s^2 d per head and sequence, halved when causal;
  // backward 2.5 x forward (five matmuls against two).
  double f = 4.0 * static_cast<double>(b) * static_cast<double>(heads) * static_cast<double>(s) *
             static_cast<double>(s) * static_cast<double>(hd);
  if (causal) f *= 0.5;
  if (backward) f *= 2.5;
  const KernelPick k = pick_kernel(op);
  const double rate = attention_flops_per_s(k.attention, d, s, hd, causal, backward);
  // time9: dropout inside the kernel (attention_dropout_factor)
  f *= attention_dropout_factor(k.attention, d, op.attn_dropout);
  // time6 (issue 11): a load-balanced CP ring's steps after the first (Op::noncausal_calls of
  // the b calls) are non-causal calls of half a block's pairs: a causal call's FLOPs at the
  // kernel's non-causal rate (torch _templated_ring_attention's `is_causal_behavior`
  // NOT_IS_CAUSAL for i > 0; TE's AttnFuncWithCPAndKVP2P likewise). ASSUMPTION: looked up at the
  // local length s (each such call is s long in one dimension and s / 2 in the other; the
  // published tables are square).
  const int64_t nc = causal ? std::clamp<int64_t>(op.noncausal_calls, 0, b) : 0;
  if (nc == 0) return f / rate;
  const double share = static_cast<double>(nc) / static_cast<double>(b);
  const double nc_rate = attention_flops_per_s(k.attention, d, s, hd, false, backward);
  return f * (1 - share) / rate + f * share / nc_rate;
}

double gemm_seconds(const Op& op, bool backward, const Device& d, double peak,
                    double compute_efficiency) {
  const OpCost& c = backward ? op.bwd : op.fwd;
  if (c.flops == 0) return 0;
  const double rate = peak * compute_efficiency;
  const int sms = d.sm_count;
  // Each GEMM's FLOPs over its own efficiency; without shapes, one large GEMM.
  auto t = [&](int64_t m, int64_t n, int64_t k, int64_t batch) {
    const double fl = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k) * static_cast<double>(batch);
    return fl / (rate * gemm_shape_efficiency(m, n, k, batch, sms, op.math16));
  };
  const auto& sh = op.shape;
  if (op.kind == OpKind::kLinear && sh[0] > 0) {
    const int64_t rows = sh[0], in = sh[1], out = sh[2];
    if (!backward) return t(rows, out, in, 1);
    return t(rows, in, out, 1) + t(out, in, rows, 1);  // grad input, grad weight
  }
  if (op.kind == OpKind::kBmm && sh[0] > 0) {
    const int64_t batch = sh[0] * sh[1], s = sh[2], hd = sh[3];
    const bool qk = sh[4] == 1;
    if (qk) {  // scores = q k^T: s x s, K = d; backward dq, dk: s x d, K = s
      if (!backward) return t(s, s, hd, batch);
      return 2 * t(s, hd, s, batch);
    }
    // out = p v: s x d, K = s; backward dp: s x s, K = d; dv: s x d, K = s
    if (!backward) return t(s, hd, s, batch);
    return t(s, s, hd, batch) + t(s, hd, s, batch);
  }
  return static_cast<double>(c.flops) / rate;
}

double shape_efficiency(const Op& op, bool backward, const Device& d) {
  const OpCost& c = backward ? op.bwd : op.fwd;
  if (c.flops == 0 || pick_kernel(op).cls != KernelClass::kGemm) return 1.0;
  // gemm_seconds at a unit rate is the sum of FLOPs over efficiencies.
  return static_cast<double>(c.flops) / gemm_seconds(op, backward, d, 1.0, 1.0);
}

double fp8_gemm_relative_efficiency() {
  // kernels.hpp: MAMF fp8 share over bf16 share on the H100 SXM.
  return (1402.6 / 1979.0) / (794.5 / 989.0);
}

double fp8_gemm_peak_flops_per_s(const Device& d) {
  const double dense = d.peak_fp8_flops_per_s > 0 ? d.peak_fp8_flops_per_s
                                                  : 2.0 * d.peak_bf16_flops_per_s;
  return dense * fp8_gemm_relative_efficiency();
}

int64_t optimizer_launches(int64_t tensors, int64_t numel, int64_t ops, bool multi_tensor) {
  if (tensors <= 0) return ops;
  if (!multi_tensor) return tensors * ops;
  // PyTorch aten/src/ATen/native/cuda/MultiTensorApply.cuh: a launch carries at most
  // depth_to_max_tensors (36 at depth 4: param, grad, exp_avg, exp_avg_sq) tensors and
  // depth_to_max_blocks = 320 chunks of kChunkSize = 65536 elements. Chunks: at most
  // numel / 65536 + one partial chunk per tensor.
  const int64_t chunks = ceil_div(numel, 65536) + tensors;
  return ops * std::max(ceil_div(tensors, 36), ceil_div(chunks, 320));
}

}  // namespace sim
