// The CUDA backend's matmuls as cuBLAS calls, planned on the host (plain C++: built and tested
// without nvcc, against the CPU backend's loops through a column-major emulation of cuBLAS).
// Layouts are the executor's (cpu_backend.cpp): tokens t = batch * s + position; q, k, v and the
// attention output are [tokens, heads * d] rows (k and v with kv heads, shared by `grp` query
// heads); scores and probabilities [b, heads, s, s]; a weight [out, in]. Offsets, leading
// dimensions and strides count elements of the buffer they index; a leading dimension larger
// than the row is a column view (the q, k, v slices of a fused qkv output).
#pragma once

#include <cstdint>
#include <vector>

namespace cuda_harness {

// One operand of a call: which buffer (0 and 1: the op's two operands in the order the planning
// function names them; the result is always C), where it starts, its leading dimension and the
// distance between consecutive batch entries.
struct GemmOperand {
  int buffer = 0;
  int64_t offset = 0, ld = 0, stride = 0;
};

// Row-major C[M, N] = alpha op(A) op(B) + beta C for `batch` entries, as the backend thinks of it.
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  GemmOperand a, b, c;
  int64_t batch = 1;
};

// The same call as cublasGemmStridedBatchedEx takes it (column-major): C^T = op(B)^T op(A)^T,
// i.e. cuBLAS's A is our B and its B our A, with m and n swapped.
struct CublasGemm {
  bool trans_a = false, trans_b = false;  // CUBLAS_OP_T when true
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  GemmOperand a, b, c;
  int64_t batch = 1;
};
CublasGemm to_cublas(const RowMajorGemm& g);

// Leading dimensions of the operands as stored (or as converted to dense fp32).
// Linear: x [rows, in] (ld_x), w [out, in] (ld in), y/dy [rows, out] (ld out).
std::vector<RowMajorGemm> linear_forward(int64_t rows, int64_t in, int64_t out, int64_t ld_x);
// dx [rows, in] = dy w: buffers dy (0), w (1).
std::vector<RowMajorGemm> linear_dx(int64_t rows, int64_t in, int64_t out, int64_t ld_dy);
// dw [out, in] = dy^T x: buffers dy (0), x (1).
std::vector<RowMajorGemm> linear_dw(int64_t rows, int64_t in, int64_t out, int64_t ld_dy,
                                    int64_t ld_x);

struct AttnDims {
  int64_t b = 0, heads = 0, s = 0, d = 0, grp = 1;  // grp: query heads per kv head
  int64_t kv_heads() const { return heads / grp; }
};
// scores [b, heads, s, s] = scale q k^T: buffers q (0, ld_q), k (1, ld_k); C ld s.
std::vector<RowMajorGemm> qk_forward(const AttnDims& a, int64_t ld_q, int64_t ld_k, float scale);
// dq [tokens, heads * d] = scale ds k: buffers ds (0, ld s), k (1, ld_k); C ld heads * d.
std::vector<RowMajorGemm> qk_dq(const AttnDims& a, int64_t ld_k, float scale);
// dk [tokens, kv * d] = scale sum over the group's heads of ds^T q: buffers ds (0), q (1, ld_q);
// C ld kv * d.
std::vector<RowMajorGemm> qk_dk(const AttnDims& a, int64_t ld_q, float scale);
// out [tokens, heads * d] = p v: buffers p (0, ld s), v (1, ld_v); C ld heads * d.
std::vector<RowMajorGemm> av_forward(const AttnDims& a, int64_t ld_v);
// dp [b, heads, s, s] = dout v^T: buffers dout (0, ld_do), v (1, ld_v); C ld s.
std::vector<RowMajorGemm> av_dp(const AttnDims& a, int64_t ld_do, int64_t ld_v);
// dv [tokens, kv * d] = sum over the group's heads of p^T dout: buffers p (0), dout (1, ld_do).
std::vector<RowMajorGemm> av_dv(const AttnDims& a, int64_t ld_do);

}  // namespace cuda_harness
