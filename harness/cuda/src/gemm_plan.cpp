#include "cuda_harness/gemm_plan.hpp"

namespace cuda_harness {

CublasGemm to_cublas(const RowMajorGemm& g) {
  // A row-major matrix with leading dimension ld is, read column-major with the same ld, its
  // transpose; so row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and cuBLAS
  // gets B first with B's transposition flag, then A with A's.
  CublasGemm c;
  c.trans_a = g.trans_b;
  c.trans_b = g.trans_a;
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.alpha = g.alpha;
  c.beta = g.beta;
  c.a = g.b;
  c.b = g.a;
  c.c = g.c;
  c.batch = g.batch;
  return c;
}

namespace {

RowMajorGemm make(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, GemmOperand a,
                  GemmOperand b, float beta, GemmOperand c, int64_t batch) {
  RowMajorGemm g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.b = b;
  g.c = c;
  g.batch = batch;
  return g;
}

}  // namespace

std::vector<RowMajorGemm> linear_forward(int64_t rows, int64_t in, int64_t out, int64_t ld_x) {
  // y[r, o] = sum_k x[r, k] w[o, k]: y = x w^T.
  return {make(false, true, rows, out, in, 1.0f, {0, 0, ld_x, 0}, {1, 0, in, 0}, 0.0f,
               {2, 0, out, 0}, 1)};
}

std::vector<RowMajorGemm> linear_dx(int64_t rows, int64_t in, int64_t out, int64_t ld_dy) {
  // dx[r, k] = sum_o dy[r, o] w[o, k].
  return {make(false, false, rows, in, out, 1.0f, {0, 0, ld_dy, 0}, {1, 0, in, 0}, 0.0f,
               {2, 0, in, 0}, 1)};
}

std::vector<RowMajorGemm> linear_dw(int64_t rows, int64_t in, int64_t out, int64_t ld_dy,
                                    int64_t ld_x) {
  // dw[o, k] = sum_r dy[r, o] x[r, k]: A = dy stored [rows, out], transposed.
  return {make(true, false, out, in, rows, 1.0f, {0, 0, ld_dy, 0}, {1, 0, ld_x, 0}, 0.0f,
               {2, 0, in, 0}, 1)};
}

// Per batch entry bi and kv head g, the group's query heads h = g * grp .. g * grp + grp - 1 are
// consecutive column blocks of q-like rows (stride d) and consecutive [s, s] blocks of the
// scores (stride s * s); their kv head's block is shared (stride 0).
std::vector<RowMajorGemm> qk_forward(const AttnDims& a, int64_t ld_q, int64_t ld_k, float scale) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t g = 0; g < a.kv_heads(); ++g)
      out.push_back(make(false, true, s, s, d, scale,
                         {0, bi * s * ld_q + g * a.grp * d, ld_q, d},
                         {1, bi * s * ld_k + g * d, ld_k, 0}, 0.0f,
                         {2, (bi * a.heads + g * a.grp) * s * s, s, s * s}, a.grp));
  return out;
}

std::vector<RowMajorGemm> qk_dq(const AttnDims& a, int64_t ld_k, float scale) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d, ld_dq = a.heads * d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t g = 0; g < a.kv_heads(); ++g)
      out.push_back(make(false, false, s, d, s, scale,
                         {0, (bi * a.heads + g * a.grp) * s * s, s, s * s},
                         {1, bi * s * ld_k + g * d, ld_k, 0}, 0.0f,
                         {2, bi * s * ld_dq + g * a.grp * d, ld_dq, d}, a.grp));
  return out;
}

// dk sums over the group's heads: one call per head, the first writing (beta 0), the others
// adding (beta 1), in head order.
std::vector<RowMajorGemm> qk_dk(const AttnDims& a, int64_t ld_q, float scale) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d, ld_dk = a.kv_heads() * d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.heads; ++h)
      out.push_back(make(true, false, s, d, s, scale, {0, (bi * a.heads + h) * s * s, s, 0},
                         {1, bi * s * ld_q + h * d, ld_q, 0}, h % a.grp == 0 ? 0.0f : 1.0f,
                         {2, bi * s * ld_dk + (h / a.grp) * d, ld_dk, 0}, 1));
  return out;
}

std::vector<RowMajorGemm> av_forward(const AttnDims& a, int64_t ld_v) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d, ld_o = a.heads * d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t g = 0; g < a.kv_heads(); ++g)
      out.push_back(make(false, false, s, d, s, 1.0f,
                         {0, (bi * a.heads + g * a.grp) * s * s, s, s * s},
                         {1, bi * s * ld_v + g * d, ld_v, 0}, 0.0f,
                         {2, bi * s * ld_o + g * a.grp * d, ld_o, d}, a.grp));
  return out;
}

std::vector<RowMajorGemm> av_dp(const AttnDims& a, int64_t ld_do, int64_t ld_v) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t g = 0; g < a.kv_heads(); ++g)
      out.push_back(make(false, true, s, s, d, 1.0f, {0, bi * s * ld_do + g * a.grp * d, ld_do, d},
                         {1, bi * s * ld_v + g * d, ld_v, 0}, 0.0f,
                         {2, (bi * a.heads + g * a.grp) * s * s, s, s * s}, a.grp));
  return out;
}

std::vector<RowMajorGemm> av_dv(const AttnDims& a, int64_t ld_do) {
  std::vector<RowMajorGemm> out;
  const int64_t s = a.s, d = a.d, ld_dv = a.kv_heads() * d;
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.heads; ++h)
      out.push_back(make(true, false, s, d, s, 1.0f, {0, (bi * a.heads + h) * s * s, s, 0},
                         {1, bi * s * ld_do + h * d, ld_do, 0}, h % a.grp == 0 ? 0.0f : 1.0f,
                         {2, bi * s * ld_dv + (h / a.grp) * d, ld_dv, 0}, 1));
  return out;
}

}  // namespace cuda_harness
