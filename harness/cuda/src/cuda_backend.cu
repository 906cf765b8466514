// The CUDA backend of the executor: the same op semantics as harness/executor/src/cpu_backend.cpp
// (its header comment gives the layouts: tokens t = batch * s + position; q, k, v and attention
// outputs [tokens, heads * d]; scores and probabilities [b, heads, s, s]; a weight [out, in] with
// its bias, if stored with it, after it), on the GPU.
//
// Matmuls (linear, q k^T, probs v and their backward) go to cuBLAS (cublasGemmStridedBatchedEx,
// fp32 accumulation, CUBLAS_COMPUTE_32F): bf16 or fp16 operands are used as stored, so a bf16
// step runs bf16 tensor-core GEMMs; operands of mixed or other dtypes are first converted to fp32.
// Everything else is a small kernel of this file, computing in fp32 and rounding to the storage's
// dtype on store (bf16/fp16 round to nearest even, as numeric.hpp does). Dropout uses the CPU
// backend's counter-based generator (numeric.hpp: splitmix64 keyed by seed, op, element, step,
// compared in double), so masks are the same bits. Weights, token ids and labels are generated
// by the same formulas. Backward results are computed into fp32 work buffers and handed on by
// one deliver kernel (write, accumulate, or main_grad), as the CPU backend's deliver() does.
// Correctness over speed: reductions are one block per row, flash attention one thread per query
// row; where the CPU sums in a fixed order, atomics here may not (embedding, flash dk/dv), so
// the GPU's gradients are not bitwise repeatable across runs.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_harness/arena.hpp"
#include "cuda_harness/cuda_backend.hpp"
#include "cuda_harness/gemm_plan.hpp"
#include "cuda_harness/kernel_math.hpp"
#include "numeric.hpp"
#include "sim/error.hpp"

namespace cuda_harness {
namespace {

using sim::Exec;
using sim::GradMode;
using sim::TensorRef;

// Constants of the modelled layers: the CPU backend's (cpu_backend.cpp), same sources.
constexpr float kLayerNormEps = 1e-5f;  // torch.nn.LayerNorm eps
constexpr float kRmsNormEps = 1e-6f;    // HF LlamaConfig rms_norm_eps
constexpr double kRopeTheta = 10000.0;  // HF LlamaConfig rope_theta (Llama 2)

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 256;     // flash kernel's per-thread accumulator
constexpr int64_t kAlignment = 256;  // cudaMalloc's alignment, kept inside the arena

// dtype codes: sim::DType's values.
constexpr int kBool = 0, kF16 = 1, kBF16 = 2, kF32 = 3, kI64 = 4;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cublas: ") + what + ": " + cublasGetStatusString(s));
}
void launched(const char* kernel) { check(cudaGetLastError(), kernel); }

// ---- device helpers -------------------------------------------------------------------------

// An operand as kernels read it: element i of a dense tensor is base[off + i]; of a view (cols >
// 0) base[off + (i / cols) * stride + i % cols]; with no base, every element is cval.
struct DView {
  const char* base = nullptr;
  int dt = kF32;
  int64_t off = 0, cols = 0, stride = 0;
  float cval = 0;
};

__device__ __forceinline__ float ld(const char* p, int dt, int64_t i) {
  switch (dt) {
    case kBool: return p[i] ? 1.0f : 0.0f;
    case kF16: return __half2float(reinterpret_cast<const __half*>(p)[i]);
    case kBF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
    case kF32: return reinterpret_cast<const float*>(p)[i];
    default: return static_cast<float>(reinterpret_cast<const int64_t*>(p)[i]);
  }
}
__device__ __forceinline__ void st(char* p, int dt, int64_t i, float x) {
  switch (dt) {
    case kBool: p[i] = x != 0.0f ? 1 : 0; return;
    case kF16: reinterpret_cast<__half*>(p)[i] = __float2half_rn(x); return;
    case kBF16: reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x); return;
    case kF32: reinterpret_cast<float*>(p)[i] = x; return;
    default: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(x); return;
  }
}
__device__ __forceinline__ int64_t vidx(const DView& v, int64_t i) {
  return v.cols == 0 ? v.off + i : v.off + (i / v.cols) * v.stride + i % v.cols;
}
__device__ __forceinline__ float ldv(const DView& v, int64_t i) {
  return v.base ? ld(v.base, v.dt, vidx(v, i)) : v.cval;
}
// Integer elements (token ids, labels) exactly.
__device__ __forceinline__ int64_t ldi(const DView& v, int64_t i) {
  if (v.base && v.dt == kI64) return reinterpret_cast<const int64_t*>(v.base)[vidx(v, i)];
  return static_cast<int64_t>(ldv(v, i));
}

using math::keep_scale;

// Sum and max over a block of kThreads threads (every thread gets the result).
__device__ float block_sum(float v) {
  __shared__ float sh[kThreads];
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  return sh[0];
}
__device__ float block_max(float v) {
  __shared__ float sh[kThreads];
  __syncthreads();
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  return sh[0];
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---- kernels: data, casts, deliver ----------------------------------------------------------

__global__ void k_init_param(char* p, int dt, int64_t n, uint64_t seed, uint64_t pidx, int norm,
                             int64_t perturb, double delta) {
  GRID_STRIDE(i, n) {
    double v = math::param_value(seed, pidx, static_cast<uint64_t>(i), norm != 0);
    if (i == perturb) v += delta;
    st(p, dt, i, static_cast<float>(v));
  }
}
__global__ void k_causal_mask(char* m, int64_t s) {
  GRID_STRIDE(x, s * s) { m[x] = (x % s) <= (x / s) ? 1 : 0; }
}
__global__ void k_batch(char* ids, int ids_dt, char* labels, int labels_dt, int64_t n,
                        int64_t vocab, uint64_t seed) {
  GRID_STRIDE(t, n) {
    const int64_t id = math::token(seed, 0x1d5, static_cast<uint64_t>(t), vocab);
    const int64_t lb = math::token(seed, 0x1abe1, static_cast<uint64_t>(t), vocab);
    if (ids_dt == kI64) reinterpret_cast<int64_t*>(ids)[t] = id;
    else st(ids, ids_dt, t, static_cast<float>(id));
    if (labels_dt == kI64) reinterpret_cast<int64_t*>(labels)[t] = lb;
    else st(labels, labels_dt, t, static_cast<float>(lb));
  }
}
__global__ void k_rope_tables(char* out, int dt, int64_t b, int64_t s, int64_t hd) {
  const int64_t half = hd / 2;
  GRID_STRIDE(x, b * s * hd) {
    const int64_t t = x / hd, j = x % hd;
    const double f = pow(kRopeTheta, -2.0 * static_cast<double>(j % half) / static_cast<double>(hd));
    const double ang = static_cast<double>(t % s) * f;
    st(out, dt, x, static_cast<float>(cos(ang)));
    st(out, dt, b * s * hd + x, static_cast<float>(sin(ang)));
  }
}
// dst[i] = src[at + i], converted to dst's dtype.
__global__ void k_convert(DView src, int64_t at, char* dst, int dt, int64_t n) {
  GRID_STRIDE(i, n) { st(dst, dt, i, ldv(src, at + i)); }
}
__global__ void k_to_f32(DView src, float* dst, int64_t n) {
  GRID_STRIDE(i, n) { dst[i] = ldv(src, i); }
}
// The gradient of an input, handed on (cpu_backend's deliver()): 1 write, 2 accumulate,
// 3 add into the fp32 main_grad buffer at element `off`.
__global__ void k_deliver(DView src, char* g, int dt, int64_t n, int mode, int64_t off) {
  GRID_STRIDE(i, n) {
    const float v = ldv(src, i);
    if (mode == 1) st(g, dt, i, v);
    else if (mode == 2) st(g, dt, i, ld(g, dt, i) + v);
    else reinterpret_cast<float*>(g)[off + i] += v;
  }
}

// ---- kernels: elementwise ops -----------------------------------------------------------------

__global__ void k_embedding(DView ids, DView w, DView pos, char* out, int dt, int64_t n, int64_t h,
                            int64_t s, int64_t maxp, int64_t types) {
  GRID_STRIDE(x, n * h) {
    const int64_t t = x / h, c = x % h;
    float v = ldv(w, ldi(ids, t) * h + c);
    if (maxp > 0) v += ldv(pos, (t % s) * h + c);
    if (types > 0) v += ldv(pos, maxp * h + c);
    st(out, dt, x, v);
  }
}
__global__ void k_embedding_bwd(DView ids, DView dx, float* dw, float* dp, int64_t n, int64_t h,
                                int64_t s, int64_t maxp, int64_t types) {
  GRID_STRIDE(x, n * h) {
    const int64_t t = x / h, c = x % h;
    const float g = ldv(dx, x);
    atomicAdd(dw + ldi(ids, t) * h + c, g);
    if (maxp > 0) atomicAdd(dp + (t % s) * h + c, g);
    if (types > 0) atomicAdd(dp + maxp * h + c, g);
  }
}
// y = x w^T computed in fp32 (src), plus the bias, stored in y's dtype.
__global__ void k_bias_store(const float* src, DView bias, int has_bias, char* y, int dt,
                             int64_t rows, int64_t out) {
  GRID_STRIDE(x, rows * out) { st(y, dt, x, src[x] + (has_bias ? ldv(bias, x % out) : 0.0f)); }
}
// Column sums of a [rows, cols] operand (bias gradients), one thread per column, rows in order.
__global__ void k_colsum(DView v, float* dst, int64_t rows, int64_t cols) {
  GRID_STRIDE(c, cols) {
    float acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += ldv(v, r * cols + c);
    dst[c] = acc;
  }
}
__global__ void k_dropout(DView x, char* y, int ydt, char* m, int mdt, int64_t n, uint64_t seed,
                          uint64_t op, uint64_t step, double p) {
  GRID_STRIDE(i, n) {
    const float k = keep_scale(seed, op, static_cast<uint64_t>(i), step, p);
    st(m, mdt, i, k != 0.0f ? 1.0f : 0.0f);
    st(y, ydt, i, ldv(x, i) * k);
  }
}
__global__ void k_dropout_bwd(DView dy, DView m, float* dx, int64_t n, double p) {
  GRID_STRIDE(i, n) { dx[i] = ldv(dy, i) * ldv(m, i) * static_cast<float>(1.0 / (1.0 - p)); }
}
// op 0 add, 1 mul.
__global__ void k_binary(DView a, DView b, char* out, int dt, int64_t n, int op) {
  GRID_STRIDE(i, n) {
    const float u = ldv(a, i), v = ldv(b, i);
    st(out, dt, i, op == 0 ? u + v : u * v);
  }
}
__global__ void k_mul_bwd(DView x, DView y, DView dz, float* dx, float* dy, int64_t n) {
  GRID_STRIDE(i, n) {
    const float g = ldv(dz, i);
    dx[i] = g * ldv(y, i);
    dy[i] = g * ldv(x, i);
  }
}
// Split's backward: the output gradient k into columns [c0, c0 + cols) of a [rows, w] buffer.
__global__ void k_scatter_cols(DView g, float* dx, int64_t rows, int64_t w, int64_t c0, int64_t cols) {
  GRID_STRIDE(x, rows * cols) { dx[(x / cols) * w + c0 + x % cols] = ldv(g, x); }
}
// exec10 (issue 10): HF's additive masks (Exec::kAdditiveMask; kind 0 causal with -inf, 1 causal
// with the dtype's finfo.min `fmin`, 2 zeros), the eager mask add (kMaskAdd) and GPT-2's shifted
// copies (kShiftRows), as harness/executor/src/cpu_backend.cpp computes them.
__global__ void k_additive_mask(char* m, int dt, int64_t n, int64_t s, int kind, float fmin) {
  GRID_STRIDE(z, n) {
    const int64_t j = z % s, i = (z / s) % s;
    st(m, dt, z, kind == 2 || j <= i ? 0.0f : (kind == 0 ? -INFINITY : fmin));
  }
}
__global__ void k_mask_add(DView x, DView m, char* y, int dt, int64_t b, int64_t heads, int64_t s,
                           int layout) {
  GRID_STRIDE(z, b * heads * s * s) {
    const int64_t j = z % s, i = (z / s) % s, bi = z / (heads * s * s);
    const int64_t mi = layout == 0 ? i * s + j : layout == 1 ? (bi * s + i) * s + j : bi * s + j;
    st(y, dt, z, ldv(x, z) + ldv(m, mi));
  }
}
__global__ void k_shift_rows(DView x, char* y, int dt, int64_t b, int64_t s, int64_t w, int64_t off,
                             int bwd, float* dx) {
  GRID_STRIDE(z, b * (s - 1) * w) {
    const int64_t c = z % w, i = (z / w) % (s - 1), bi = z / (w * (s - 1));
    const int64_t src = (bi * s + i + off) * w + c;
    if (bwd) dx[src] = ldv(x, z);
    else st(y, dt, z, ldv(x, src));
  }
}
__global__ void k_repeat_kv(DView x, char* y, int dt, int64_t n, int64_t g, int64_t hd, int64_t rep) {
  const int64_t heads = g * rep;
  GRID_STRIDE(z, n * heads * hd) {
    const int64_t e = z % hd, h = (z / hd) % heads, t = z / (hd * heads);
    st(y, dt, z, ldv(x, (t * g + h / rep) * hd + e));
  }
}
__global__ void k_repeat_kv_bwd(DView dy, float* dx, int64_t n, int64_t g, int64_t hd, int64_t rep) {
  const int64_t heads = g * rep;
  GRID_STRIDE(z, n * g * hd) {
    const int64_t e = z % hd, gi = (z / hd) % g, t = z / (hd * g);
    float acc = 0;
    for (int64_t r = 0; r < rep; ++r) acc += ldv(dy, (t * heads + gi * rep + r) * hd + e);
    dx[z] = acc;
  }
}
// HF apply_rotary_pos_emb: y = x cos + rotate_half(x) sin; tables cos then sin, [b*s, d] each.
__global__ void k_rope(DView x, DView cs, char* y, int dt, int64_t n, int64_t heads, int64_t hd) {
  const int64_t half = hd / 2;
  GRID_STRIDE(z, n * heads * hd) {
    const int64_t j = z % hd, t = z / (heads * hd), o = z - j;
    const float rot = j < half ? -ldv(x, o + j + half) : ldv(x, o + j - half);
    st(y, dt, z, ldv(x, z) * ldv(cs, t * hd + j) + rot * ldv(cs, (n + t) * hd + j));
  }
}
// dx[m] = dy[m] cos[m] + (m < half ? dy[m + half] sin[m + half] : -dy[m - half] sin[m - half]).
__global__ void k_rope_bwd(DView dy, DView cs, float* dx, int64_t n, int64_t heads, int64_t hd) {
  const int64_t half = hd / 2;
  GRID_STRIDE(z, n * heads * hd) {
    const int64_t j = z % hd, t = z / (heads * hd), o = z - j;
    float v = ldv(dy, z) * ldv(cs, t * hd + j);
    if (j < half) v += ldv(dy, o + j + half) * ldv(cs, (n + t) * hd + j + half);
    else v -= ldv(dy, o + j - half) * ldv(cs, (n + t) * hd + j - half);
    dx[z] = v;
  }
}
// GeLU (tanh form) or SiLU; backward when dy has a base or is a constant (bwd != 0).
__global__ void k_act(DView x, DView dy, int bwd, int gelu, char* y, int dt, float* dx, int64_t n) {
  GRID_STRIDE(i, n) {
    const float v = ldv(x, i);
    const float r = bwd ? ldv(dy, i) * (gelu ? math::gelu_grad(v) : math::silu_grad(v))
                        : (gelu ? math::gelu(v) : math::silu(v));
    if (bwd) dx[i] = r; else st(y, dt, i, r);
  }
}
// Mask: forward -inf where the mask is false; backward zero there.
__global__ void k_mask(DView v, DView m, int bwd, char* out, int dt, float* dx, int64_t rows,
                       int64_t s) {
  GRID_STRIDE(x, rows * s) {
    const int64_t r = x / s, j = x % s;
    const bool off = ldv(m, (r % s) * s + j) == 0.0f;
    const float u = ldv(v, x);
    if (bwd) dx[x] = off ? 0.0f : u;
    else st(out, dt, x, off ? -INFINITY : u);
  }
}

// ---- kernels: rows (one block per row) ---------------------------------------------------------

// Softmax over the first lim columns of a row (lim = r % cols + 1 when causal), zeros after.
__global__ void k_softmax(DView x, char* p, int dt, int64_t cols, int causal) {
  const int64_t r = blockIdx.x, base = r * cols;
  const int64_t lim = causal ? r % cols + 1 : cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < lim; j += blockDim.x) m = fmaxf(m, ldv(x, base + j));
  m = block_max(m);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < lim; j += blockDim.x) sum += expf(ldv(x, base + j) - m);
  sum = block_sum(sum);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    st(p, dt, base + j, j < lim ? expf(ldv(x, base + j) - m) / sum : 0.0f);
}
__global__ void k_softmax_bwd(DView p, DView dy, float* dx, int64_t cols) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += ldv(dy, base + j) * ldv(p, base + j);
  dot = block_sum(dot);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dx[base + j] = ldv(p, base + j) * (ldv(dy, base + j) - dot);
}
// Log-softmax (log != 0) or softmax of a row; with labels, also the row's -log p[label] into nll.
__global__ void k_logsoftmax(DView x, char* y, int dt, int64_t v, int log, DView labels,
                             float* nll) {
  const int64_t r = blockIdx.x, base = r * v;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) m = fmaxf(m, ldv(x, base + j));
  m = block_max(m);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += expf(ldv(x, base + j) - m);
  sum = block_sum(sum);
  const float lz = m + logf(sum);
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float lp = ldv(x, base + j) - lz;
    st(y, dt, base + j, log ? lp : expf(lp));
  }
  if (nll != nullptr && threadIdx.x == 0) nll[r] = -(ldv(x, base + ldi(labels, r)) - lz);
}
__global__ void k_logsoftmax_bwd(DView lp, DView dy, float* dx, int64_t v) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * v;
  float sum = 0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += ldv(dy, base + j);
  sum = block_sum(sum);
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
    dx[base + j] = ldv(dy, base + j) - expf(ldv(lp, base + j)) * sum;
}
// One block: loss = (sum of the per-row values, or -lp[r, label r]) / rows; the total weight.
__global__ void k_mean_loss(const float* per_row, DView lp, DView labels, int64_t rows, int64_t v,
                            char* loss, int loss_dt, char* weight, int weight_dt) {
  float acc = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    acc += per_row ? per_row[r] : -ldv(lp, r * v + ldi(labels, r));
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    st(loss, loss_dt, 0, acc / static_cast<float>(rows));
    if (weight) st(weight, weight_dt, 0, static_cast<float>(rows));
  }
}
__global__ void k_nll_bwd(DView labels, DView tw, DView dl, float* dx, int64_t rows, int64_t v) {
  GRID_STRIDE(x, rows * v) {
    const int64_t r = x / v, j = x % v;
    dx[x] = j == ldi(labels, r) ? -ldv(dl, 0) / ldv(tw, 0) : 0.0f;
  }
}
__global__ void k_vocab_ce_bwd(DView sm, DView labels, DView dl, float* dx, int64_t rows, int64_t v) {
  GRID_STRIDE(x, rows * v) {
    const int64_t r = x / v, j = x % v;
    dx[x] = (ldv(sm, x) - (j == ldi(labels, r) ? 1.0f : 0.0f)) * ldv(dl, 0) / static_cast<float>(rows);
  }
}

// LayerNorm (torch native_layer_norm: biased variance); w holds gamma then beta when has_bias.
// Forward stores y and, with stats, [mean..., rstd...]; mean and rstd are rounded to fp32, as the
// CPU backend stores them.
__global__ void k_layernorm(DView x, DView w, int has_bias, char* y, int dt, char* stats,
                            int stats_dt, int64_t rows, int64_t h) {
  const int64_t r = blockIdx.x, base = r * h;
  float s = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) s += ldv(x, base + c);
  const float mean = block_sum(s) / static_cast<float>(h);
  float q = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = ldv(x, base + c) - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_sum(q) / static_cast<float>(h) + kLayerNormEps);
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
    st(y, dt, base + c,
       (ldv(x, base + c) - mean) * rstd * ldv(w, c) + (has_bias ? ldv(w, h + c) : 0.0f));
  if (stats && threadIdx.x == 0) {
    st(stats, stats_dt, r, mean);
    st(stats, stats_dt, rows + r, rstd);
  }
}
// Backward, rows: dx, and each row's mean and rstd (from the saved stats, or recomputed).
__global__ void k_layernorm_bwd_rows(DView x, DView w, DView stats, int has_stats, DView dy,
                                     float* dx, float* mean_out, float* rstd_out, int64_t rows,
                                     int64_t h) {
  const int64_t r = blockIdx.x, base = r * h;
  float mean, rstd;
  if (has_stats) {
    mean = ldv(stats, r);
    rstd = ldv(stats, rows + r);
  } else {
    float s = 0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) s += ldv(x, base + c);
    mean = block_sum(s) / static_cast<float>(h);
    float q = 0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
      const float d = ldv(x, base + c) - mean;
      q += d * d;
    }
    rstd = rsqrtf(block_sum(q) / static_cast<float>(h) + kLayerNormEps);
  }
  float m1 = 0, m2 = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float xh = (ldv(x, base + c) - mean) * rstd, g = ldv(dy, base + c) * ldv(w, c);
    m1 += g;
    m2 += g * xh;
  }
  m1 = block_sum(m1) / static_cast<float>(h);
  m2 = block_sum(m2) / static_cast<float>(h);
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float xh = (ldv(x, base + c) - mean) * rstd;
    dx[base + c] = rstd * (ldv(dy, base + c) * ldv(w, c) - m1 - xh * m2);
  }
  if (threadIdx.x == 0) mean_out[r] = mean, rstd_out[r] = rstd;
}
// Backward, columns: dgamma (and dbeta after it), rows in order.
__global__ void k_layernorm_bwd_cols(DView x, DView dy, const float* mean, const float* rstd,
                                     int has_bias, float* dw, int64_t rows, int64_t h) {
  GRID_STRIDE(c, h) {
    float g = 0, b = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float d = ldv(dy, r * h + c);
      g += d * (ldv(x, r * h + c) - mean[r]) * rstd[r];
      b += d;
    }
    dw[c] = g;
    if (has_bias) dw[h + c] = b;
  }
}
// x.pow(2).mean(-1), per row.
__global__ void k_meansq(DView x, char* out, int dt, int64_t h) {
  const int64_t r = blockIdx.x, base = r * h;
  float s = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float v = ldv(x, base + c);
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) st(out, dt, r, s / static_cast<float>(h));
}
__global__ void k_meansq_bwd(DView x, DView dv, float* dx, int64_t rows, int64_t h) {
  GRID_STRIDE(z, rows * h) { dx[z] = ldv(dv, z / h) * 2.0f * ldv(x, z) / static_cast<float>(h); }
}
__global__ void k_rsqrt(DView v, DView rs, int bwd, char* out, int dt, float* dv, int64_t n) {
  GRID_STRIDE(i, n) {
    if (bwd) {
      const float r = ldv(rs, i);
      dv[i] = ldv(v, i) * -0.5f * r * r * r;  // v is the output gradient here
    } else {
      st(out, dt, i, rsqrtf(ldv(v, i) + kRmsNormEps));
    }
  }
}
// kRowScale (row != 0): z = x[r, c] * s[r]; kColScale: z = s[c] * x[r, c].
__global__ void k_scale(DView x, DView s, int row, char* z, int dt, int64_t rows, int64_t h) {
  GRID_STRIDE(i, rows * h) { st(z, dt, i, ldv(x, i) * ldv(s, row ? i / h : i % h)); }
}
__global__ void k_scale_bwd_x(DView s, DView dz, int row, float* dx, int64_t rows, int64_t h) {
  GRID_STRIDE(i, rows * h) { dx[i] = ldv(dz, i) * ldv(s, row ? i / h : i % h); }
}
__global__ void k_scale_bwd_rows(DView x, DView dz, float* ds, int64_t h) {
  const int64_t r = blockIdx.x;
  float acc = 0;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) acc += ldv(dz, r * h + c) * ldv(x, r * h + c);
  acc = block_sum(acc);
  if (threadIdx.x == 0) ds[r] = acc;
}
__global__ void k_scale_bwd_cols(DView x, DView dz, float* ds, int64_t rows, int64_t h) {
  GRID_STRIDE(c, h) {
    float acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += ldv(dz, r * h + c) * ldv(x, r * h + c);
    ds[c] = acc;
  }
}

// ---- kernels: flash-style attention (FlashAttention-2 Alg. 1 and 2, one thread per query row) --

struct FlashDims {
  int64_t b, heads, s, hd, grp, kvh;
  int causal;
  float scale;
  double p;
  uint64_t seed, op, step;
};
__device__ __forceinline__ int64_t fq(const FlashDims& f, int64_t bi, int64_t i, int64_t h) {
  return ((bi * f.s + i) * f.heads + h) * f.hd;
}
__device__ __forceinline__ int64_t fk(const FlashDims& f, int64_t bi, int64_t j, int64_t h) {
  return ((bi * f.s + j) * f.kvh + h / f.grp) * f.hd;
}
__device__ __forceinline__ float fkeep(const FlashDims& f, int64_t bi, int64_t h, int64_t i, int64_t j) {
  return f.p > 0 ? keep_scale(f.seed, f.op, static_cast<uint64_t>(((bi * f.heads + h) * f.s + i) * f.s + j),
                              f.step, f.p)
                 : 1.0f;
}
__global__ void k_flash(DView q, DView k, DView v, FlashDims f, char* o, int odt, char* lse, int ldt) {
  GRID_STRIDE(row, f.b * f.heads * f.s) {
    const int64_t i = row % f.s, h = (row / f.s) % f.heads, bi = row / (f.s * f.heads);
    const int64_t lim = f.causal ? i + 1 : f.s, qo = fq(f, bi, i, h);
    float acc[kMaxHeadDim];
    for (int64_t e = 0; e < f.hd; ++e) acc[e] = 0;
    float m = -INFINITY, l = 0;
    for (int64_t j = 0; j < lim; ++j) {
      const int64_t ko = fk(f, bi, j, h);
      float sc = 0;
      for (int64_t e = 0; e < f.hd; ++e) sc += ldv(q, qo + e) * ldv(k, ko + e);
      sc *= f.scale;
      const float mn = fmaxf(m, sc), corr = expf(m - mn), w = expf(sc - mn);
      l = l * corr + w;
      const float wk = w * fkeep(f, bi, h, i, j);
      for (int64_t e = 0; e < f.hd; ++e) acc[e] = acc[e] * corr + wk * ldv(v, ko + e);
      m = mn;
    }
    for (int64_t e = 0; e < f.hd; ++e) st(o, odt, qo + e, acc[e] / l);
    st(lse, ldt, (bi * f.heads + h) * f.s + i, m + logf(l));
  }
}
__global__ void k_flash_bwd(DView q, DView k, DView v, DView lse, DView dout, FlashDims f,
                            float* dq, float* dk, float* dv) {
  GRID_STRIDE(row, f.b * f.heads * f.s) {
    const int64_t i = row % f.s, h = (row / f.s) % f.heads, bi = row / (f.s * f.heads);
    const int64_t lim = f.causal ? i + 1 : f.s, qo = fq(f, bi, i, h);
    const float l = ldv(lse, (bi * f.heads + h) * f.s + i);
    auto score = [&](int64_t ko) {
      float sc = 0;
      for (int64_t e = 0; e < f.hd; ++e) sc += ldv(q, qo + e) * ldv(k, ko + e);
      return sc * f.scale;
    };
    // D = sum_j P_j dP_j (FlashAttention-2 uses rowsum(dO * O), the same value).
    float dsum = 0;
    for (int64_t j = 0; j < lim; ++j) {
      const int64_t ko = fk(f, bi, j, h);
      float g = 0;
      for (int64_t e = 0; e < f.hd; ++e) g += ldv(dout, qo + e) * ldv(v, ko + e);
      dsum += expf(score(ko) - l) * g * fkeep(f, bi, h, i, j);
    }
    float acc[kMaxHeadDim];
    for (int64_t e = 0; e < f.hd; ++e) acc[e] = 0;
    for (int64_t j = 0; j < lim; ++j) {
      const int64_t ko = fk(f, bi, j, h);
      const float pr = expf(score(ko) - l), kp = fkeep(f, bi, h, i, j);
      float g = 0;
      for (int64_t e = 0; e < f.hd; ++e) {
        const float d = ldv(dout, qo + e);
        g += d * ldv(v, ko + e);
        atomicAdd(dv + ko + e, pr * kp * d);
      }
      const float ds = pr * (g * kp - dsum) * f.scale;
      for (int64_t e = 0; e < f.hd; ++e) {
        acc[e] += ds * ldv(k, ko + e);
        atomicAdd(dk + ko + e, ds * ldv(q, qo + e));
      }
    }
    for (int64_t e = 0; e < f.hd; ++e) dq[qo + e] = acc[e];
  }
}

#undef GRID_STRIDE

// ---- host side --------------------------------------------------------------------------------

int grid_for(int64_t n) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)));
}
int rows_grid(int64_t rows) {
  if (rows > INT_MAX) throw std::runtime_error("cuda: too many rows for one launch");
  return static_cast<int>(std::max<int64_t>(rows, 1));
}
int as_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw std::runtime_error(std::string("cublas: ") + what + " exceeds int");
  return static_cast<int>(v);
}
cudaDataType_t cuda_type(int dt) {
  switch (dt) {
    case kF16: return CUDA_R_16F;
    case kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}
bool gemm_dtype(int dt) { return dt == kF16 || dt == kBF16 || dt == kF32; }
int64_t esize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// A row-major matrix buffer for cuBLAS: element (r, c) at p + (r * ld + c) * esize(t).
struct Mat {
  char* p = nullptr;
  cudaDataType_t t = CUDA_R_32F;
  int64_t ld = 0;
};

class CudaBackend final : public executor::Backend {
 public:
  CudaBackend(const sim::Graph& g, const executor::StepOptions& o)
      : g_(g), opt_(o), phases_(g.ops.size()), arena_(g, kAlignment, arena_limit()) {
    check(cudaMalloc(&base_, static_cast<size_t>(arena_.planner().capacity())), "cudaMalloc (arena)");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    outside_.assign(g.storages.size(), nullptr);
    int64_t at = 0;
    for (int32_t s : g.param_storages) {
      param_offset_.push_back(at);
      at += numel(s);
    }
    for (int32_t s : g.persistent)
      if (g.storages[s].category == sim::Category::kGrads) main_grad_ = s;
  }
  ~CudaBackend() override {
    // Best effort: errors here cannot be reported.
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& c : calls_) cudaEventDestroy(c.start), cudaEventDestroy(c.stop);
    if (step_start_) cudaEventDestroy(step_start_);
    if (step_stop_) cudaEventDestroy(step_stop_);
    for (auto& w : work_) cudaFree(w.p);
    for (char* p : outside_) if (p) cudaFree(p);
    if (scratch_outside_) cudaFree(scratch_outside_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
    if (base_) cudaFree(base_);
  }

  // The arena takes at most three quarters of the free device memory: the rest is for the fp32
  // work buffers (the largest is a [tokens, vocab] gradient), cuBLAS and any storage the arena
  // cannot place.
  static int64_t arena_limit() {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    return static_cast<int64_t>(free_bytes / 4 * 3);
  }

  // ---- the walker's contract ----
  void allocate(int32_t s, int64_t bytes) override {
    if (bytes != g_.storages[s].bytes)
      throw executor::ExecutionError("cuda: storage " + std::to_string(s) + " allocated with " +
                                     std::to_string(bytes) + " B, the graph says " +
                                     std::to_string(g_.storages[s].bytes));
    if (arena_.live(s)) release(s);  // a second step re-makes the persistent storages
    const int64_t off = arena_.place(s);
    char* p;
    if (off >= 0) {
      p = base_ + off;
    } else {  // fragmentation: a buffer of its own, counted the same
      check(cudaMalloc(&outside_[s], static_cast<size_t>(std::max<int64_t>(bytes, 1))), "cudaMalloc");
      p = outside_[s];
    }
    if (bytes > 0) check(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream_), "cudaMemsetAsync");
  }
  void release(int32_t s) override {
    if (arena_.outside(s)) {
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      check(cudaFree(outside_[s]), "cudaFree");
      outside_[s] = nullptr;
    }
    arena_.remove(s);
  }
  void scratch(int64_t bytes) override {
    // The transient workspace is counted and placed; no kernel of this backend uses it (cuBLAS
    // keeps its own workspace, which the simulator models as a persistent storage).
    if (arena_.place_scratch(bytes) < 0)
      check(cudaMalloc(&scratch_outside_, static_cast<size_t>(std::max<int64_t>(bytes, 1))), "cudaMalloc");
  }
  void release_scratch() override {
    if (arena_.scratch_outside()) {
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      check(cudaFree(scratch_outside_), "cudaFree");
      scratch_outside_ = nullptr;
    }
    arena_.remove_scratch();
  }

  void initialize_persistent() override {
    for (size_t p = 0; p < g_.param_storages.size(); ++p) {
      const int32_t s = g_.param_storages[p];
      const bool norm = std::string(g_.storages[s].role).find("norm") != std::string::npos;
      const int64_t n = numel(s);
      const int64_t perturb = static_cast<int32_t>(p) == opt_.perturb_param ? opt_.perturb_element : -1;
      k_init_param<<<grid_for(n), kThreads, 0, stream_>>>(ptr(s), dt(s), n, opt_.seed, p, norm ? 1 : 0,
                                                          perturb, opt_.perturb_delta);
      launched("k_init_param");
    }
    if (opt_.perturb_param >= 0) {
      const int32_t s = g_.param_storages.at(static_cast<size_t>(opt_.perturb_param));
      const int64_t es = sim::bytes_of(g_.storages[s].dtype);
      std::vector<uint8_t> one(static_cast<size_t>(es));
      check(cudaMemcpyAsync(one.data(), ptr(s) + opt_.perturb_element * es, static_cast<size_t>(es),
                            cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      perturbed_ = executor::detail::load(one.data(), g_.storages[s].dtype, 0);
    }
    for (const sim::OpArgs& a : g_.args)
      if (a.exec == Exec::kMask) {
        k_causal_mask<<<grid_for(a.dim[1] * a.dim[1]), kThreads, 0, stream_>>>(ptr(a.in[1].storage), a.dim[1]);
        launched("k_causal_mask");
      }
    phases_.reset();
    for (Call& c : calls_) cudaEventDestroy(c.start), cudaEventDestroy(c.stop);
    calls_.clear();
    if (!step_start_) check(cudaEventCreate(&step_start_), "cudaEventCreate");
    if (!step_stop_) check(cudaEventCreate(&step_stop_), "cudaEventCreate");
    check(cudaEventRecord(step_start_, stream_), "cudaEventRecord");
  }

  void forward(int32_t op) override {
    timed(op, phases_.forward_phase(op), [&] { run(g_.args[op], false); });
  }
  void backward(int32_t op, const std::vector<int32_t>& reads) override {
    reads_ = &reads;
    timed(op, sim::Phase::kBackward, [&] { run(g_.args[op], true); });
    reads_ = nullptr;
  }

  void optimizer(executor::StepResult& out) override {
    check(cudaEventRecord(step_stop_, stream_), "cudaEventRecord");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    for (const sim::OpArgs& a : g_.args)
      if (a.root) out.loss = host_values(a.out[a.exec == Exec::kVocabCe ? 1 : 0].storage)[0];
    out.perturbed_value = perturbed_;
    out.grads.clear();
    out.grad_bytes.clear();
    for (size_t p = 0; p < g_.param_storages.size(); ++p) {
      const int32_t gs = p < g_.param_grads.size() ? g_.param_grads[p] : -1;
      if (gs >= 0) {
        out.grads.push_back(host_values(gs));
        out.grad_bytes.push_back(host_bytes(gs, 0, g_.storages[gs].bytes));
      } else if (main_grad_ >= 0) {
        const int64_t n = numel(g_.param_storages[p]);
        std::vector<uint8_t> raw = host_bytes(main_grad_, param_offset_[p] * 4, n * 4);
        std::vector<double> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[i] = executor::detail::load(raw.data(), sim::DType::kF32, i);
        out.grads.push_back(std::move(v));
        out.grad_bytes.push_back(std::move(raw));
      } else {
        out.grads.emplace_back();
        out.grad_bytes.emplace_back();
      }
    }
  }

  // ---- measurements ----
  const ArenaPlanner& arena() const { return arena_.planner(); }
  void reset_measurements() { arena_.planner().reset_peaks(); }
  int64_t work_bytes() const {
    int64_t t = 0;
    for (const Work& w : work_) t += w.bytes;
    return t;
  }
  // The step's calls, timed (after optimizer(), which synchronizes).
  std::vector<TimingRow> timings(int64_t row_index) const {
    std::vector<TimingRow> rows;
    for (const Call& c : calls_) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, c.start, c.stop), "cudaEventElapsedTime");
      rows.push_back(timing_row(g_, row_index, c.op, c.phase, elapsed_ns(ms)));
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, step_start_, step_stop_), "cudaEventElapsedTime");
    rows.push_back(step_row(row_index, rows, elapsed_ns(ms)));
    return rows;
  }

 private:
  struct Call {
    int32_t op;
    sim::Phase phase;
    cudaEvent_t start, stop;
  };
  struct Work {
    char* p = nullptr;
    int64_t bytes = 0;
  };

  template <class F>
  void timed(int32_t op, sim::Phase phase, F&& body) {
    op_ = op;
    n_work_ = 0;
    Call c{op, phase, nullptr, nullptr};
    check(cudaEventCreate(&c.start), "cudaEventCreate");
    check(cudaEventCreate(&c.stop), "cudaEventCreate");
    calls_.push_back(c);
    check(cudaEventRecord(c.start, stream_), "cudaEventRecord");
    body();
    check(cudaEventRecord(c.stop, stream_), "cudaEventRecord");
  }

  // ---- storages and operands ----
  bool live(int32_t s) const { return arena_.live(s); }
  int64_t numel(int32_t s) const { return g_.storages[s].bytes / sim::bytes_of(g_.storages[s].dtype); }
  int64_t numel(const TensorRef& r) const { return r.cols == 0 ? numel(r.storage) : numel(r.storage) / r.stride * r.cols; }
  int dt(int32_t s) const { return static_cast<int>(g_.storages[s].dtype); }
  char* ptr(int32_t s) const {
    if (!live(s))
      throw executor::ExecutionError("executor: op " + std::to_string(op_) + " (" +
                                     (op_ >= 0 ? g_.ops[op_].name : "") + ") uses storage " +
                                     std::to_string(s) + " (" + g_.storages[s].role +
                                     "), whose buffer has been freed");
    return arena_.outside(s) ? outside_[s] : base_ + arena_.offset(s);
  }
  DView view(const TensorRef& r) const {
    DView v;
    v.base = ptr(r.storage);
    v.dt = dt(r.storage);
    v.off = r.cols ? r.col : 0;
    v.cols = r.cols;
    v.stride = r.stride;
    return v;
  }
  // A forward tensor read by a forward kernel (a backward kernel must use saved()).
  DView load(const TensorRef& r) const {
    if (reads_)
      throw executor::ExecutionError("executor: the backward kernel of op " + std::to_string(op_) +
                                     " (" + g_.ops[op_].name + ") reads storage " +
                                     std::to_string(r.storage) + " without declaring it");
    return view(r);
  }
  DView saved(const TensorRef& r) const {
    if (reads_ && std::find(reads_->begin(), reads_->end(), r.storage) == reads_->end())
      throw executor::ExecutionError("executor: the backward kernel of op " + std::to_string(op_) +
                                     " (" + g_.ops[op_].name + ") reads storage " +
                                     std::to_string(r.storage) + " (" + g_.storages[r.storage].role +
                                     ") it did not declare");
    return view(r);
  }
  DView in(const TensorRef& r, bool bwd) const { return bwd ? saved(r) : load(r); }
  char* out(const TensorRef& r) const {
    if (r.cols != 0) throw executor::ExecutionError("executor: a kernel writes into a view");
    return ptr(r.storage);
  }
  // The gradient of output k: its buffer, or a constant (zero; one for the loss).
  DView grad_out(const sim::OpArgs& a, int k) const {
    if (a.out[k].grad >= 0) return view(TensorRef{a.out[k].grad});
    DView v;
    v.cval = a.root && k == (a.exec == Exec::kVocabCe ? 1 : 0) ? 1.0f : 0.0f;
    return v;
  }
  static DView f32(const float* p) {
    DView v;
    v.base = reinterpret_cast<const char*>(p);
    v.dt = kF32;
    return v;
  }
  static bool wanted(const TensorRef& r) {
    return r.mode == GradMode::kWrite || r.mode == GradMode::kAccum || r.mode == GradMode::kMainGrad;
  }
  // An fp32 work buffer of n elements for the running call (zeroed when asked).
  float* work(int64_t n, bool zero = false) {
    const int64_t bytes = std::max<int64_t>(n, 1) * 4;
    if (n_work_ == work_.size()) work_.emplace_back();
    Work& w = work_[n_work_++];
    if (w.bytes < bytes) {
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      if (w.p) check(cudaFree(w.p), "cudaFree");
      w.p = nullptr;
      check(cudaMalloc(&w.p, static_cast<size_t>(bytes)), "cudaMalloc (work)");
      w.bytes = bytes;
    }
    if (zero) check(cudaMemsetAsync(w.p, 0, static_cast<size_t>(bytes), stream_), "cudaMemsetAsync");
    return reinterpret_cast<float*>(w.p);
  }
  float* to_f32(const DView& v, int64_t n) {
    float* t = work(n);
    k_to_f32<<<grid_for(n), kThreads, 0, stream_>>>(v, t, n);
    launched("k_to_f32");
    return t;
  }
  // Hands the gradient of input k on as the static backward pass decided (cpu's deliver()).
  void deliver(const sim::OpArgs& a, int k, const DView& src) {
    const TensorRef& r = a.in[k];
    switch (r.mode) {
      case GradMode::kNone: case GradMode::kAlias: return;
      case GradMode::kWrite: case GradMode::kAccum: {
        const int64_t n = numel(r.grad);
        k_deliver<<<grid_for(n), kThreads, 0, stream_>>>(src, ptr(r.grad), dt(r.grad), n,
                                                         r.mode == GradMode::kWrite ? 1 : 2, 0);
        launched("k_deliver");
        return;
      }
      case GradMode::kMainGrad: {
        if (main_grad_ < 0) throw executor::ExecutionError("executor: no main_grad buffer");
        const int64_t n = numel(g_.param_storages.at(static_cast<size_t>(r.grad)));
        k_deliver<<<grid_for(n), kThreads, 0, stream_>>>(src, ptr(main_grad_), kF32, n, 3,
                                                         param_offset_[static_cast<size_t>(r.grad)]);
        launched("k_deliver");
        return;
      }
    }
  }

  // A GEMM operand pair as cuBLAS takes them: both as stored when they share a 16-bit or fp32
  // dtype and are dense or column views, otherwise both converted to dense fp32.
  std::pair<Mat, Mat> operands(const DView& a, int64_t ra, int64_t ca, const DView& b, int64_t rb,
                               int64_t cb) {
    auto direct = [](const DView& v, int64_t cols) {
      Mat m;
      m.p = const_cast<char*>(v.base) + v.off * esize(cuda_type(v.dt));
      m.t = cuda_type(v.dt);
      m.ld = v.cols ? v.stride : cols;
      return m;
    };
    if (a.base && b.base && a.dt == b.dt && gemm_dtype(a.dt)) return {direct(a, ca), direct(b, cb)};
    return {Mat{reinterpret_cast<char*>(to_f32(a, ra * ca)), CUDA_R_32F, ca},
            Mat{reinterpret_cast<char*>(to_f32(b, rb * cb)), CUDA_R_32F, cb}};
  }
  // Issues a planned sequence of GEMMs (gemm_plan.hpp) over buffers 0, 1 (operands) and 2 (C).
  void gemms(const std::vector<RowMajorGemm>& plan, const Mat& a, const Mat& b, const Mat& c) {
    const Mat* buf[3] = {&a, &b, &c};
    for (const RowMajorGemm& rm : plan) {
      const CublasGemm g = to_cublas(rm);
      const Mat& A = *buf[g.a.buffer];
      const Mat& B = *buf[g.b.buffer];
      const Mat& C = *buf[g.c.buffer];
      check(cublasGemmStridedBatchedEx(
                blas_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                as_int(g.m, "m"), as_int(g.n, "n"), as_int(g.k, "k"), &g.alpha,
                A.p + g.a.offset * esize(A.t), A.t, as_int(g.a.ld, "lda"), g.a.stride,
                B.p + g.b.offset * esize(B.t), B.t, as_int(g.b.ld, "ldb"), g.b.stride, &g.beta,
                C.p + g.c.offset * esize(C.t), C.t, as_int(g.c.ld, "ldc"), g.c.stride,
                as_int(g.batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    }
  }
  // The output matrix of a forward GEMM: the storage itself when cuBLAS can write its dtype from
  // these operands, else an fp32 work buffer (then finish() converts).
  Mat result(const TensorRef& r, cudaDataType_t operand, int64_t rows, int64_t cols) {
    const int d = dt(r.storage);
    // cublasGemmEx's combinations: C in the operands' type, or fp32 C from 16-bit operands.
    if (gemm_dtype(d) && (cuda_type(d) == operand || d == kF32)) return Mat{out(r), cuda_type(d), cols};
    return Mat{reinterpret_cast<char*>(work(rows * cols)), CUDA_R_32F, cols};
  }
  void finish(const TensorRef& r, const Mat& c, int64_t n) {
    if (c.p == ptr(r.storage)) return;
    k_convert<<<grid_for(n), kThreads, 0, stream_>>>(f32(reinterpret_cast<float*>(c.p)), 0,
                                                     out(r), dt(r.storage), n);
    launched("k_convert");
  }
  void convert(const DView& src, const TensorRef& dst, int64_t at = 0) {
    const int64_t n = numel(dst);
    k_convert<<<grid_for(n), kThreads, 0, stream_>>>(src, at, out(dst), dt(dst.storage), n);
    launched("k_convert");
  }

  void run(const sim::OpArgs& a, bool bwd);
  void linear(const sim::OpArgs& a, bool bwd);
  void attention(const sim::OpArgs& a, bool bwd);
  void flash(const sim::OpArgs& a, bool bwd);
  void norms(const sim::OpArgs& a, bool bwd);
  void head(const sim::OpArgs& a, bool bwd);

  std::vector<uint8_t> host_bytes(int32_t s, int64_t at, int64_t n) const {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    if (n > 0)
      check(cudaMemcpy(v.data(), ptr(s) + at, static_cast<size_t>(n), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }
  std::vector<double> host_values(int32_t s) const {
    const std::vector<uint8_t> raw = host_bytes(s, 0, g_.storages[s].bytes);
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = executor::detail::load(raw.data(), g_.storages[s].dtype, static_cast<int64_t>(i));
    return v;
  }

  const sim::Graph& g_;
  executor::StepOptions opt_;
  PhaseTracker phases_;
  StorageArena arena_;
  char* base_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::vector<char*> outside_;  // storages the arena could not place (fragmentation)
  char* scratch_outside_ = nullptr;
  std::vector<Work> work_;
  size_t n_work_ = 0;
  std::vector<Call> calls_;
  cudaEvent_t step_start_ = nullptr, step_stop_ = nullptr;
  std::vector<int64_t> param_offset_;
  int32_t main_grad_ = -1;
  int32_t op_ = -1;
  double perturbed_ = 0;
  const std::vector<int32_t>* reads_ = nullptr;
};

void CudaBackend::run(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  switch (a.exec) {
    case Exec::kNone: throw executor::ExecutionError("executor: op without executable semantics");
    case Exec::kBatch:
      if (bwd) return;
      k_batch<<<grid_for(d[0]), kThreads, 0, stream_>>>(out(a.out[0]), dt(a.out[0].storage), out(a.out[1]),
                                                        dt(a.out[1].storage), d[0], d[1], opt_.seed);
      return launched("k_batch");
    case Exec::kRopeTables:
      if (bwd) return;
      k_rope_tables<<<grid_for(d[0] * d[1] * d[2]), kThreads, 0, stream_>>>(
          out(a.out[0]), dt(a.out[0].storage), d[0], d[1], d[2]);
      return launched("k_rope_tables");
    case Exec::kEmbedding: {
      const int64_t n = d[0], h = d[1];
      const DView ids = in(a.in[0], bwd);
      if (!bwd) {
        const DView pos = a.n_in > 2 ? load(a.in[2]) : DView{};
        k_embedding<<<grid_for(n * h), kThreads, 0, stream_>>>(ids, load(a.in[1]), pos, out(a.out[0]),
                                                               dt(a.out[0].storage), n, h, d[2], d[3], d[4]);
        return launched("k_embedding");
      }
      float* dw = work(numel(a.in[1]), true);
      float* dp = work(a.n_in > 2 ? numel(a.in[2]) : 1, true);
      k_embedding_bwd<<<grid_for(n * h), kThreads, 0, stream_>>>(ids, grad_out(a, 0), dw, dp, n, h,
                                                                 d[2], d[3], d[4]);
      launched("k_embedding_bwd");
      deliver(a, 1, f32(dw));
      if (a.n_in > 2) deliver(a, 2, f32(dp));
      return;
    }
    case Exec::kCast: {
      if (!bwd) {
        const DView x = load(a.in[0]);
        int64_t at = 0;
        for (int k = 0; k < a.n_out; ++k) {
          convert(x, a.out[k], at);
          at += numel(a.out[k]);
        }
        return;
      }
      if (!wanted(a.in[0])) return;
      float* dx = work(numel(a.in[0]), true);
      int64_t at = 0;
      for (int k = 0; k < a.n_out; ++k) {
        const int64_t n = numel(a.out[k]);
        k_to_f32<<<grid_for(n), kThreads, 0, stream_>>>(grad_out(a, k), dx + at, n);
        launched("k_to_f32");
        at += n;
      }
      return deliver(a, 0, f32(dx));
    }
    case Exec::kLinear: return linear(a, bwd);
    case Exec::kDropout: {
      const int64_t n = numel(a.out[0]);
      if (!bwd) {
        k_dropout<<<grid_for(n), kThreads, 0, stream_>>>(load(a.in[0]), out(a.out[0]), dt(a.out[0].storage),
                                                         out(a.out[1]), dt(a.out[1].storage), n, opt_.seed,
                                                         static_cast<uint64_t>(op_), opt_.step, a.p);
        return launched("k_dropout");
      }
      float* dx = work(n);
      k_dropout_bwd<<<grid_for(n), kThreads, 0, stream_>>>(grad_out(a, 0), saved(a.out[1]), dx, n, a.p);
      launched("k_dropout_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kAdd: case Exec::kMul: {
      const bool add = a.exec == Exec::kAdd;
      const int64_t n = numel(a.out[0]);
      if (!bwd) {
        k_binary<<<grid_for(n), kThreads, 0, stream_>>>(load(a.in[0]), load(a.in[1]), out(a.out[0]),
                                                        dt(a.out[0].storage), n, add ? 0 : 1);
        return launched("k_binary");
      }
      if (add) {
        deliver(a, 0, grad_out(a, 0));
        return deliver(a, 1, grad_out(a, 0));
      }
      float* dx = work(n);
      float* dy = work(n);
      k_mul_bwd<<<grid_for(n), kThreads, 0, stream_>>>(saved(a.in[0]), saved(a.in[1]), grad_out(a, 0), dx, dy, n);
      launched("k_mul_bwd");
      deliver(a, 0, f32(dx));
      return deliver(a, 1, f32(dy));
    }
    case Exec::kCopy:
      if (!bwd) return convert(load(a.in[0]), a.out[0]);
      return deliver(a, 0, grad_out(a, 0));
    case Exec::kSplit: {
      if (!bwd || !wanted(a.in[0])) return;  // views forward
      const int64_t w = a.out[0].stride, rows = numel(a.in[0].storage) / w;
      float* dx = work(rows * w, true);
      for (int k = 0; k < a.n_out; ++k) {
        const int64_t cols = a.out[k].cols;
        k_scatter_cols<<<grid_for(rows * cols), kThreads, 0, stream_>>>(grad_out(a, k), dx, rows, w,
                                                                        a.out[k].col, cols);
        launched("k_scatter_cols");
      }
      return deliver(a, 0, f32(dx));
    }
    case Exec::kRepeatKv: {
      const int64_t n = d[0], g = d[1], hd = d[2], rep = d[3];
      if (!bwd) {
        k_repeat_kv<<<grid_for(n * g * rep * hd), kThreads, 0, stream_>>>(load(a.in[0]), out(a.out[0]),
                                                                          dt(a.out[0].storage), n, g, hd, rep);
        return launched("k_repeat_kv");
      }
      float* dx = work(n * g * hd);
      k_repeat_kv_bwd<<<grid_for(n * g * hd), kThreads, 0, stream_>>>(grad_out(a, 0), dx, n, g, hd, rep);
      launched("k_repeat_kv_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kRope: {
      const int64_t n = d[0] * d[1], heads = d[2], hd = d[3];
      if (!bwd) {
        k_rope<<<grid_for(n * heads * hd), kThreads, 0, stream_>>>(load(a.in[0]), load(a.in[1]), out(a.out[0]),
                                                                   dt(a.out[0].storage), n, heads, hd);
        return launched("k_rope");
      }
      float* dx = work(n * heads * hd);
      k_rope_bwd<<<grid_for(n * heads * hd), kThreads, 0, stream_>>>(grad_out(a, 0), saved(a.in[1]), dx, n,
                                                                      heads, hd);
      launched("k_rope_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kGelu: case Exec::kSilu: {
      const int64_t n = numel(a.in[0]);
      const int gelu = a.exec == Exec::kGelu ? 1 : 0;
      if (!bwd) {
        k_act<<<grid_for(n), kThreads, 0, stream_>>>(load(a.in[0]), DView{}, 0, gelu, out(a.out[0]),
                                                     dt(a.out[0].storage), nullptr, n);
        return launched("k_act");
      }
      float* dx = work(n);
      k_act<<<grid_for(n), kThreads, 0, stream_>>>(saved(a.in[0]), grad_out(a, 0), 1, gelu, nullptr, kF32, dx, n);
      launched("k_act");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kQk: case Exec::kMask: case Exec::kSoftmax: case Exec::kAv: return attention(a, bwd);
    case Exec::kFlash: return flash(a, bwd);
    case Exec::kLayerNorm: case Exec::kMeanSq: case Exec::kRsqrt: case Exec::kRowScale:
    case Exec::kColScale:
      return norms(a, bwd);
    case Exec::kLogSoftmax: case Exec::kNll: case Exec::kVocabCe: return head(a, bwd);
    case Exec::kAdditiveMask: {  // exec10
      if (bwd) return;
      const int64_t copies = d[0], s = d[1], kind = d[2];
      const int odt = dt(a.out[0].storage);
      const float fmin = odt == kBF16 ? -3.3895313892515355e38f : odt == kF16 ? -65504.0f
                                                                              : -3.4028234663852886e38f;
      const int64_t n = kind == 2 ? copies * s : copies * s * s;
      k_additive_mask<<<grid_for(n), kThreads, 0, stream_>>>(out(a.out[0]), odt, n, s,
                                                             static_cast<int>(kind), fmin);
      return launched("k_additive_mask");
    }
    case Exec::kMaskAdd: {  // exec10
      if (bwd) return deliver(a, 0, grad_out(a, 0));
      const int64_t b = d[0], heads = d[1], s = d[2];
      k_mask_add<<<grid_for(b * heads * s * s), kThreads, 0, stream_>>>(
          load(a.in[0]), load(a.in[1]), out(a.out[0]), dt(a.out[0].storage), b, heads, s,
          static_cast<int>(d[3]));
      return launched("k_mask_add");
    }
    case Exec::kShiftRows: {  // exec10
      const int64_t b = d[0], s = d[1], w = d[2], off = d[3];
      if (!bwd) {
        k_shift_rows<<<grid_for(b * (s - 1) * w), kThreads, 0, stream_>>>(
            load(a.in[0]), out(a.out[0]), dt(a.out[0].storage), b, s, w, off, 0, nullptr);
        return launched("k_shift_rows");
      }
      float* dx = work(b * s * w, true);
      k_shift_rows<<<grid_for(b * (s - 1) * w), kThreads, 0, stream_>>>(grad_out(a, 0), nullptr, 0, b,
                                                                         s, w, off, 1, dx);
      launched("k_shift_rows");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kIndexSplit: case Exec::kScale:  // exec10: refused up front (run_cuda)
    case Exec::kHeld: case Exec::kNf4Linear:    // exec11: refused up front (run_cuda)
    case Exec::kComplexRopeTables: case Exec::kComplexRope: case Exec::kCat:
    case Exec::kPow: case Exec::kTanh: case Exec::kAddScalar:   // exec12: refused up front
    case Exec::kEqZero: case Exec::kMaskedFill: case Exec::kMemEfficient:  // (run_cuda)
    case Exec::kTopK: case Exec::kRowSum: case Exec::kDivInPlace: case Exec::kOneHot:
    case Exec::kWhere: case Exec::kGatherRows: case Exec::kGatherWeight: case Exec::kIndexAdd:
    case Exec::kTeRmsNorm: case Exec::kSigmoid: case Exec::kGateMul:  // exec13: refused up front
    case Exec::kMlaRopeTables: case Exec::kMlaRopeQ: case Exec::kMlaRopeKv:  // exec14: refused up front
    case Exec::kSwiglu:  // feat14: refused up front (run_cuda: past kHeld)
      throw executor::ExecutionError("executor: op without a CUDA kernel");
  }
}

void CudaBackend::linear(const sim::OpArgs& a, bool bwd) {
  const int64_t rows = a.dim[0], in_f = a.dim[1], out_f = a.dim[2], bias = a.dim[3];
  if (!bwd) {
    const DView x = load(a.in[0]), w = load(a.in[1]);
    const auto [X, W] = operands(x, rows, in_f, w, out_f, in_f);
    const Mat Y = bias ? Mat{reinterpret_cast<char*>(work(rows * out_f)), CUDA_R_32F, out_f}
                       : result(a.out[0], X.t, rows, out_f);
    gemms(linear_forward(rows, in_f, out_f, X.ld), X, W, Y);
    if (bias) {
      DView b = bias == 2 ? load(a.in[2]) : w;
      if (bias == 1) b.off += out_f * in_f;  // stored after the weight
      k_bias_store<<<grid_for(rows * out_f), kThreads, 0, stream_>>>(
          reinterpret_cast<float*>(Y.p), b, 1, out(a.out[0]), dt(a.out[0].storage), rows, out_f);
      return launched("k_bias_store");
    }
    return finish(a.out[0], Y, rows * out_f);
  }
  const DView x = saved(a.in[0]), w = saved(a.in[1]), dy = grad_out(a, 0);
  if (wanted(a.in[0])) {
    const auto [DY, W] = operands(dy, rows, out_f, w, out_f, in_f);
    const Mat DX{reinterpret_cast<char*>(work(rows * in_f)), CUDA_R_32F, in_f};
    gemms(linear_dx(rows, in_f, out_f, DY.ld), DY, W, DX);
    deliver(a, 0, f32(reinterpret_cast<float*>(DX.p)));
  }
  if (wanted(a.in[1]) || (bias == 2 && wanted(a.in[2]))) {
    float* dw = work(numel(a.in[1]));
    const auto [DY, X] = operands(dy, rows, out_f, x, rows, in_f);
    gemms(linear_dw(rows, in_f, out_f, DY.ld, X.ld), DY, X,
          Mat{reinterpret_cast<char*>(dw), CUDA_R_32F, in_f});
    float* db = bias == 1 ? dw + out_f * in_f : work(out_f);
    if (bias) {
      k_colsum<<<grid_for(out_f), kThreads, 0, stream_>>>(dy, db, rows, out_f);
      launched("k_colsum");
    }
    deliver(a, 1, f32(dw));
    if (bias == 2) deliver(a, 2, f32(db));
  }
}

void CudaBackend::attention(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  if (a.exec == Exec::kMask) {
    const int64_t rows = d[0], s = d[1];
    const DView m = in(a.in[1], bwd);
    if (!bwd) {
      k_mask<<<grid_for(rows * s), kThreads, 0, stream_>>>(load(a.in[0]), m, 0, out(a.out[0]),
                                                           dt(a.out[0].storage), nullptr, rows, s);
      return launched("k_mask");
    }
    float* dx = work(rows * s);
    k_mask<<<grid_for(rows * s), kThreads, 0, stream_>>>(grad_out(a, 0), m, 1, nullptr, kF32, dx, rows, s);
    launched("k_mask");
    return deliver(a, 0, f32(dx));
  }
  if (a.exec == Exec::kSoftmax) {
    const int64_t rows = d[0], cols = d[1];
    if (!bwd) {
      k_softmax<<<rows_grid(rows), kThreads, 0, stream_>>>(load(a.in[0]), out(a.out[0]), dt(a.out[0].storage),
                                                           cols, d[2] != 0 ? 1 : 0);
      return launched("k_softmax");
    }
    float* dx = work(rows * cols);
    k_softmax_bwd<<<rows_grid(rows), kThreads, 0, stream_>>>(saved(a.out[0]), grad_out(a, 0), dx, cols);
    launched("k_softmax_bwd");
    return deliver(a, 0, f32(dx));
  }
  const AttnDims ad{d[0], d[1], d[2], d[3], d[4]};
  const int64_t b = ad.b, heads = ad.heads, s = ad.s, hd = ad.d;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t qw = heads * hd, kw = ad.kv_heads() * hd;  // row widths of q-like, k-like tensors
  if (a.exec == Exec::kQk) {
    const int qc = (d[5] & 1) ? 1 : 0, kc = (d[5] & 2) ? 1 + qc : 0;
    DView q, k;
    if (!bwd) {
      q = load(a.in[0]);
      k = load(a.in[1]);
      if (qc) convert(q, a.out[qc]), q = view(a.out[qc]);
      if (kc) convert(k, a.out[kc]), k = view(a.out[kc]);
      const auto [Q, K] = operands(q, b * s, qw, k, b * s, kw);
      const Mat S = result(a.out[0], Q.t, b * heads * s, s);
      gemms(qk_forward(ad, Q.ld, K.ld, scale), Q, K, S);
      return finish(a.out[0], S, b * heads * s * s);
    }
    q = saved(qc ? a.out[qc] : a.in[0]);
    k = saved(kc ? a.out[kc] : a.in[1]);
    const DView ds = grad_out(a, 0);
    if (wanted(a.in[0])) {
      const auto [DS, K] = operands(ds, b * heads * s, s, k, b * s, kw);
      const Mat DQ{reinterpret_cast<char*>(work(b * s * qw)), CUDA_R_32F, qw};
      gemms(qk_dq(ad, K.ld, scale), DS, K, DQ);
      deliver(a, 0, f32(reinterpret_cast<float*>(DQ.p)));
    }
    if (wanted(a.in[1])) {
      const auto [DS, Q] = operands(ds, b * heads * s, s, q, b * s, qw);
      const Mat DK{reinterpret_cast<char*>(work(b * s * kw)), CUDA_R_32F, kw};
      gemms(qk_dk(ad, Q.ld, scale), DS, Q, DK);
      deliver(a, 1, f32(reinterpret_cast<float*>(DK.p)));
    }
    return;
  }
  // kAv: out[t, h*d] = sum_j P[b, h, i, j] v[j]
  const int vc = (d[5] & 2) ? 1 : 0;
  if (!bwd) {
    const DView p = load(a.in[0]);
    DView v = load(a.in[1]);
    if (vc) convert(v, a.out[vc]), v = view(a.out[vc]);
    const auto [P, V] = operands(p, b * heads * s, s, v, b * s, kw);
    const Mat O = result(a.out[0], P.t, b * s, qw);
    gemms(av_forward(ad, V.ld), P, V, O);
    return finish(a.out[0], O, b * s * qw);
  }
  const DView p = saved(a.in[0]), v = saved(vc ? a.out[vc] : a.in[1]), dout = grad_out(a, 0);
  if (wanted(a.in[0])) {
    const auto [DO, V] = operands(dout, b * s, qw, v, b * s, kw);
    const Mat DP{reinterpret_cast<char*>(work(b * heads * s * s)), CUDA_R_32F, s};
    gemms(av_dp(ad, DO.ld, V.ld), DO, V, DP);
    deliver(a, 0, f32(reinterpret_cast<float*>(DP.p)));
  }
  if (wanted(a.in[1])) {
    const auto [P, DO] = operands(p, b * heads * s, s, dout, b * s, qw);
    const Mat DV{reinterpret_cast<char*>(work(b * s * kw)), CUDA_R_32F, kw};
    gemms(av_dv(ad, DO.ld), P, DO, DV);
    deliver(a, 1, f32(reinterpret_cast<float*>(DV.p)));
  }
}

void CudaBackend::flash(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  FlashDims f{d[0], d[1], d[2], d[3], d[4], d[1] / d[4], d[5] != 0 ? 1 : 0,
              static_cast<float>(1.0 / std::sqrt(static_cast<double>(d[3]))), a.p, opt_.seed,
              static_cast<uint64_t>(op_), opt_.step};
  if (f.hd > kMaxHeadDim)
    throw sim::Unsupported("--model", "head_dim", "the CUDA flash kernel above 256 per head");
  const int64_t rows = f.b * f.heads * f.s;
  const DView q = in(a.in[0], bwd), k = in(a.in[1], bwd), v = in(a.in[2], bwd);
  if (!bwd) {
    k_flash<<<grid_for(rows), kThreads, 0, stream_>>>(q, k, v, f, out(a.out[0]), dt(a.out[0].storage),
                                                      out(a.out[1]), dt(a.out[1].storage));
    return launched("k_flash");
  }
  (void)saved(a.out[0]);  // declared (FlashAttention-2 reads O for D); D is computed from P dP here
  float* dq = work(numel(a.in[0]), true);
  float* dk = work(numel(a.in[1]), true);
  float* dv = work(numel(a.in[2]), true);
  k_flash_bwd<<<grid_for(rows), kThreads, 0, stream_>>>(q, k, v, saved(a.out[1]), grad_out(a, 0), f, dq, dk, dv);
  launched("k_flash_bwd");
  deliver(a, 0, f32(dq));
  deliver(a, 1, f32(dk));
  deliver(a, 2, f32(dv));
}

void CudaBackend::norms(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  const int64_t rows = d[0], h = d[1];
  switch (a.exec) {
    case Exec::kLayerNorm: {
      const int has_bias = d[2] != 0 ? 1 : 0, stats = d[3] != 0 ? 1 : 0;
      const DView x = in(a.in[0], bwd), w = in(a.in[1], bwd);
      if (!bwd) {
        k_layernorm<<<rows_grid(rows), kThreads, 0, stream_>>>(
            x, w, has_bias, out(a.out[0]), dt(a.out[0].storage), stats ? out(a.out[1]) : nullptr,
            stats ? dt(a.out[1].storage) : kF32, rows, h);
        return launched("k_layernorm");
      }
      float* dx = work(rows * h);
      float* mean = work(rows);
      float* rstd = work(rows);
      k_layernorm_bwd_rows<<<rows_grid(rows), kThreads, 0, stream_>>>(
          x, w, stats ? saved(a.out[1]) : DView{}, stats, grad_out(a, 0), dx, mean, rstd, rows, h);
      launched("k_layernorm_bwd_rows");
      float* dw = work(numel(a.in[1]));
      k_layernorm_bwd_cols<<<grid_for(h), kThreads, 0, stream_>>>(x, grad_out(a, 0), mean, rstd, has_bias,
                                                                   dw, rows, h);
      launched("k_layernorm_bwd_cols");
      deliver(a, 0, f32(dx));
      return deliver(a, 1, f32(dw));
    }
    case Exec::kMeanSq: {
      const DView x = in(a.in[0], bwd);
      if (!bwd) {
        k_meansq<<<rows_grid(rows), kThreads, 0, stream_>>>(x, out(a.out[0]), dt(a.out[0].storage), h);
        return launched("k_meansq");
      }
      float* dx = work(rows * h);
      k_meansq_bwd<<<grid_for(rows * h), kThreads, 0, stream_>>>(x, grad_out(a, 0), dx, rows, h);
      launched("k_meansq_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kRsqrt: {
      const int64_t n = d[0];
      if (!bwd) {
        k_rsqrt<<<grid_for(n), kThreads, 0, stream_>>>(load(a.in[0]), DView{}, 0, out(a.out[0]),
                                                       dt(a.out[0].storage), nullptr, n);
        return launched("k_rsqrt");
      }
      float* dv = work(n);
      k_rsqrt<<<grid_for(n), kThreads, 0, stream_>>>(grad_out(a, 0), saved(a.out[0]), 1, nullptr, kF32, dv, n);
      launched("k_rsqrt");
      return deliver(a, 0, f32(dv));
    }
    case Exec::kRowScale: case Exec::kColScale: {
      const int row = a.exec == Exec::kRowScale ? 1 : 0;
      const DView u = in(a.in[0], bwd), v = in(a.in[1], bwd);
      const DView& x = row ? u : v;
      const DView& sc = row ? v : u;
      if (!bwd) {
        k_scale<<<grid_for(rows * h), kThreads, 0, stream_>>>(x, sc, row, out(a.out[0]),
                                                              dt(a.out[0].storage), rows, h);
        return launched("k_scale");
      }
      const DView dz = grad_out(a, 0);
      float* dx = work(rows * h);
      k_scale_bwd_x<<<grid_for(rows * h), kThreads, 0, stream_>>>(sc, dz, row, dx, rows, h);
      launched("k_scale_bwd_x");
      float* ds = work(row ? rows : h);
      if (row) {
        k_scale_bwd_rows<<<rows_grid(rows), kThreads, 0, stream_>>>(x, dz, ds, h);
        launched("k_scale_bwd_rows");
      } else {
        k_scale_bwd_cols<<<grid_for(h), kThreads, 0, stream_>>>(x, dz, ds, rows, h);
        launched("k_scale_bwd_cols");
      }
      deliver(a, row ? 0 : 1, f32(dx));
      return deliver(a, row ? 1 : 0, f32(ds));
    }
    default: return;
  }
}

void CudaBackend::head(const sim::OpArgs& a, bool bwd) {
  const int64_t rows = a.dim[0], v = a.dim[1];
  switch (a.exec) {
    case Exec::kLogSoftmax: {
      if (!bwd) {
        k_logsoftmax<<<rows_grid(rows), kThreads, 0, stream_>>>(load(a.in[0]), out(a.out[0]),
                                                                dt(a.out[0].storage), v, 1, DView{}, nullptr);
        return launched("k_logsoftmax");
      }
      float* dx = work(rows * v);
      k_logsoftmax_bwd<<<rows_grid(rows), kThreads, 0, stream_>>>(saved(a.out[0]), grad_out(a, 0), dx, v);
      launched("k_logsoftmax_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kNll: {
      const DView labels = in(a.in[1], bwd);
      if (!bwd) {
        k_mean_loss<<<1, kThreads, 0, stream_>>>(nullptr, load(a.in[0]), labels, rows, v, out(a.out[0]),
                                                 dt(a.out[0].storage), out(a.out[1]), dt(a.out[1].storage));
        return launched("k_mean_loss");
      }
      float* dx = work(rows * v);
      k_nll_bwd<<<grid_for(rows * v), kThreads, 0, stream_>>>(labels, saved(a.out[1]), grad_out(a, 0), dx, rows, v);
      launched("k_nll_bwd");
      return deliver(a, 0, f32(dx));
    }
    case Exec::kVocabCe: {
      if (!bwd) {
        const DView labels = load(a.in[1]);
        float* nll = work(rows);
        k_logsoftmax<<<rows_grid(rows), kThreads, 0, stream_>>>(load(a.in[0]), out(a.out[0]),
                                                                dt(a.out[0].storage), v, 0, labels, nll);
        launched("k_logsoftmax");
        k_mean_loss<<<1, kThreads, 0, stream_>>>(nll, DView{}, labels, rows, v, out(a.out[1]),
                                                 dt(a.out[1].storage), nullptr, kF32);
        return launched("k_mean_loss");
      }
      float* dx = work(rows * v);
      k_vocab_ce_bwd<<<grid_for(rows * v), kThreads, 0, stream_>>>(saved(a.out[0]), saved(a.in[1]),
                                                                    grad_out(a, 1), dx, rows, v);
      launched("k_vocab_ce_bwd");
      return deliver(a, 0, f32(dx));
    }
    default: return;
  }
}

}  // namespace

std::string device_unavailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
           cudaGetErrorString(e) + ")";
  if (n == 0) return "no CUDA device (cudaGetDeviceCount found 0)";
  return "";
}

std::string device_description() {
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  return std::string(prop.name) + ", driver API " + std::to_string(driver / 1000) + "." +
         std::to_string(driver % 1000 / 10) + ", runtime " + std::to_string(runtime / 1000) + "." +
         std::to_string(runtime % 1000 / 10);
}

CudaStep run_cuda(const sim::Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                  const executor::StepOptions& options, int64_t row_index) {
  // exec10 (issue 10): the CPU executor's kernels for Falcon's index split, K/V broadcast and
  // SDPA's math path have no CUDA counterpart yet: refused by op name (HF's masks and GPT-2's
  // shifted copies have theirs above, not yet run on a GPU).
  for (size_t i = 0; i < graph.args.size(); ++i) {
    const sim::OpArgs& a = graph.args[i];
    const bool extra = a.exec == Exec::kIndexSplit || a.exec == Exec::kScale ||
                       ((a.exec == Exec::kQk || a.exec == Exec::kAv) && (a.dim[5] & ~3) != 0) ||
                       (a.exec == Exec::kSoftmax && a.n_in > 1);
    if (extra)
      throw sim::Unsupported("--backend", "backend",
                             std::string("running op \"") + graph.ops[i].name +
                                 "\" on CUDA (the CPU executor has its kernel, harness/cuda not yet)");
  }
  // exec11 (issues 10, 13): LoRA graphs (frozen weights: input-only linear and norm-weight
  // backwards, a tied weight's two-input cast), QLoRA's NF4 matmul and the held input embeddings
  // run in the CPU executor only.
  if (graph.lora_rank > 0)
    throw sim::Unsupported("--backend", "backend",
                           "running a LoRA graph on CUDA (frozen weights and adapters: the CPU "
                           "executor has their kernels, harness/cuda not yet)");
  for (size_t i = 0; i < graph.args.size(); ++i)
    if (graph.args[i].exec >= Exec::kHeld)
      throw sim::Unsupported("--backend", "backend",
                             std::string("running op \"") + graph.ops[i].name +
                                 "\" on CUDA (the CPU executor has its kernel, harness/cuda not yet)");
  CudaBackend backend(graph, options);
  (void)executor::run_step(graph, plan, schedule, backend);  // warm-up: cuBLAS, work buffers
  backend.reset_measurements();
  CudaStep out;
  out.step = executor::run_step(graph, plan, schedule, backend);
  out.ledger_peak_bytes = backend.arena().peak_live_bytes();
  out.arena_high_water = backend.arena().high_water();
  out.work_bytes = backend.work_bytes();
  out.timings = backend.timings(row_index);
  if (out.ledger_peak_bytes != out.step.peak_bytes)
    throw executor::ExecutionError("cuda: the device ledger's peak (" +
                                   std::to_string(out.ledger_peak_bytes) +
                                   " B) differs from the walker's (" +
                                   std::to_string(out.step.peak_bytes) + " B)");
  return out;
}

}  // namespace cuda_harness
