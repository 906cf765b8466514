// The CPU backend of the reference executor: buffers of exactly a storage's bytes, and the forward
// and backward math of every Exec kind in double precision over values stored in their dtypes.
// Single-threaded and in a fixed order, so the same inputs give bitwise the same gradients.
// Conventions (the executor's own; they only need to agree between its kernels): tokens are
// t = batch * s + position; q, k, v and attention outputs are [tokens, heads * d]; scores and
// probabilities are [b, heads, s, s]; a weight is [out, in] with its bias (if stored with it)
// after it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "mla_rope.hpp"  // exec14
#include "numeric.hpp"

namespace executor {
namespace {

using sim::Exec;
using sim::Graph;
using sim::GradMode;
using sim::TensorRef;
using Vec = std::vector<double>;
using detail::uniform;

// Constants of the modelled layers (defaults of the libraries the op lists follow).
constexpr double kLayerNormEps = 1e-5;  // torch.nn.LayerNorm eps
constexpr double kRmsNormEps = 1e-6;    // HF LlamaConfig rms_norm_eps
// exec13: Megatron's TransformerConfig.layernorm_epsilon default (megatron/core/transformer/
// transformer_config.py @ d98e8a64ddf3), what TENorm and TELayerNormColumnParallelLinear get
constexpr double kTeNormEps = 1e-5;
constexpr double kRopeTheta = 10000.0;  // HF LlamaConfig rope_theta (Llama 2)
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi): GPT-2's tanh GeLU (gelu_new)
// exec11: bitsandbytes' NF4 code (functional.py get_4bit_type("nf4") @ 95f9af30)
constexpr double kNf4Code[16] = {
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Graph& g, const StepOptions& o) : g_(g), opt_(o) {
    buf_.resize(g.storages.size());
    live_.assign(g.storages.size(), 0);
    // Parameter offsets within a persistent main_grad buffer (bf16-mixed): parameters in order.
    int64_t at = 0;
    for (int32_t s : g.param_storages) {
      param_offset_.push_back(at);
      at += g.storages[s].bytes / sim::bytes_of(g.storages[s].dtype);
    }
    for (int32_t s : g.persistent)
      if (g.storages[s].category == sim::Category::kGrads) main_grad_ = s;
  }

  void allocate(int32_t s, int64_t bytes) override {
    // A workspace storage (cuBLAS's, Transformer Engine's) is held for the ledger and read by no
    // kernel here: it is not backed by host memory (32 MiB zeroed per step made finite-difference
    // runs of thousands of steps spend minutes in the kernel's page faults).
    if (g_.storages[s].category != sim::Category::kWorkspace)
      buf_[s].assign(static_cast<size_t>(bytes), 0);
    live_[s] = 1;
  }
  void release(int32_t s) override {
    std::vector<uint8_t>().swap(buf_[s]);
    live_[s] = 0;
  }
  // execreg (issue 10): the offload host pool, one buffer per storage copied out
  void copy_to_host(int32_t s) override {
    if (!live_[s]) throw ExecutionError("executor: copy to the host of a released storage");
    host_[s] = buf_[s];
  }
  void copy_to_device(int32_t s) override {
    if (live_[s]) throw ExecutionError("executor: copy to the device of a live storage");
    buf_[s] = std::move(host_.at(s));
    std::vector<uint8_t>().swap(host_[s]);
    live_[s] = 1;
  }
  void drop_host_copy(int32_t s) override { std::vector<uint8_t>().swap(host_.at(s)); }
  // An op's transient bytes (cuBLAS/TE workspaces, temporaries inside one kernel call) are
  // counted by the walker's ledger (Walker::sample); no kernel here reads or writes them, so they
  // are not backed by host memory either.
  void scratch(int64_t bytes) override { scratch_bytes_ = bytes; }
  void release_scratch() override { scratch_bytes_ = 0; }

  // execreg (issue 10): fsdp2-bf16 keeps fp32 parameter shards and computes on the bf16 copies
  // its all-gather makes (the graph's kComm storage). The shards are initialized to values bf16
  // represents exactly, so a copy equals its shard and the kernels read the shard: the step's
  // forward and backward see the values FSDP2's would (one step: the optimizer is not run).
  double compute_copy(double v) const {
    if (g_.precision != sim::Precision::kFsdp2Bf16) return v;
    return detail::from_bf16(detail::to_bf16(static_cast<float>(v)));
  }
  void initialize_persistent() override {
    for (size_t p = 0; p < g_.param_storages.size(); ++p) {
      const int32_t s = g_.param_storages[p];
      const sim::Storage& st = g_.storages[s];
      const int64_t n = numel(s);
      // Norm gains near one, everything else small and centred (any values would do: the tests
      // compare the executor with itself and with finite differences).
      const bool norm = std::string(st.role).find("norm") != std::string::npos;
      for (int64_t i = 0; i < n; ++i) {
        const double u = uniform(opt_.seed, 0x5eed, p, static_cast<uint64_t>(i)) - 0.5;
        double v = norm ? 1.0 + 0.4 * u : 0.8 * u;
        if (static_cast<int32_t>(p) == opt_.perturb_param && i == opt_.perturb_element)
          v += opt_.perturb_delta;
        detail::store(buf_[s].data(), st.dtype, i, compute_copy(v));
      }
    }
    if (opt_.perturb_param >= 0) {
      const int32_t s = g_.param_storages.at(static_cast<size_t>(opt_.perturb_param));
      perturbed_ = detail::load(buf_[s].data(), g_.storages[s].dtype, opt_.perturb_element);
    }
    // exec11: LoRA's frozen base weights (persistent, no gradient) get values as parameters do.
    for (int32_t s : g_.persistent) {
      const sim::Storage& st = g_.storages[s];
      if (!st.frozen) continue;
      const bool norm = std::string(st.role).find("norm") != std::string::npos;
      for (int64_t i = 0; i < numel(s); ++i) {
        const double u = uniform(opt_.seed, 0xf20ce, static_cast<uint64_t>(s), static_cast<uint64_t>(i)) - 0.5;
        detail::store(buf_[s].data(), st.dtype, i, compute_copy(norm ? 1.0 + 0.4 * u : 0.8 * u));
      }
    }
    // exec11: QLoRA's packed NF4 weights (Exec::kNf4Linear's input 1): random 4-bit codes and
    // quantized absmax bytes, a linear second-level code, absmax2 1, offset 0.05, and the NF4 code
    for (const sim::OpArgs& a : g_.args)
      if (a.exec == Exec::kNf4Linear) {
        const int64_t n = a.dim[1] * a.dim[2];
        const Nf4Layout l = nf4_layout(n);
        uint8_t* p = buf_[a.in[1].storage].data();
        for (int64_t i = 0; i < l.absmax2; ++i)
          p[i] = static_cast<uint8_t>(uniform(opt_.seed, 0x4b17, static_cast<uint64_t>(a.in[1].storage), static_cast<uint64_t>(i)) * 256.0);
        for (int64_t j = 0; j < (n + 63) / 64 + 255; j += 256) {
          const int64_t at = l.absmax2 + 4 * (j / 256);
          detail::store(p + at, sim::DType::kF32, 0, 1.0);
        }
        detail::store(p + l.offset, sim::DType::kF32, 0, 0.05);
        for (int64_t j = 0; j < 256; ++j)
          detail::store(p + l.code2, sim::DType::kF32, j, 0.02 * static_cast<double>(j) / 255.0);
        for (int64_t j = 0; j < 16; ++j) detail::store(p + l.code, sim::DType::kF32, j, kNf4Code[j]);
      }
    // exec12: nanoGPT's `bias` buffers, torch.tril(torch.ones(pos, pos)) in fp32 (model.py:49)
    for (const sim::OpArgs& a : g_.args)
      if (a.exec == Exec::kEqZero) {
        const int64_t pos = a.dim[1];
        Vec t(static_cast<size_t>(pos * pos), 0.0);
        for (int64_t i = 0; i < pos; ++i)
          for (int64_t j = 0; j <= i; ++j) t[i * pos + j] = 1.0;
        store(a.in[0], t);
      }
    // The causal mask buffers: true where the key is not after the query.
    for (const sim::OpArgs& a : g_.args)
      if (a.exec == Exec::kMask) {
        const int64_t s = a.dim[1];
        uint8_t* m = buf_[a.in[1].storage].data();
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j) m[i * s + j] = j <= i ? 1 : 0;
      }
  }

  void forward(int32_t op) override {
    op_ = op;
    reads_ = nullptr;
    run(g_.args[op], false);
  }
  void backward(int32_t op, const std::vector<int32_t>& reads) override {
    op_ = op;
    reads_ = &reads;
    run(g_.args[op], true);
    reads_ = nullptr;
  }

  void optimizer(StepResult& out) override {
    for (const sim::OpArgs& a : g_.args)
      if (a.root) out.loss = load_dense(a.out[loss_output(a)].storage)[0];
    out.perturbed_value = perturbed_;
    out.grads.clear();
    out.grad_bytes.clear();
    for (size_t p = 0; p < g_.param_storages.size(); ++p) {
      const int32_t gs = p < g_.param_grads.size() ? g_.param_grads[p] : -1;
      if (gs >= 0) {
        out.grads.push_back(load_dense(gs));
        out.grad_bytes.push_back(buf_[gs]);
      } else if (main_grad_ >= 0) {
        const int64_t n = numel(g_.param_storages[p]);
        Vec v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          v[i] = detail::load(data(main_grad_), sim::DType::kF32, param_offset_[p] + i);
        std::vector<uint8_t> raw(buf_[main_grad_].begin() + param_offset_[p] * 4,
                                 buf_[main_grad_].begin() + (param_offset_[p] + n) * 4);
        out.grads.push_back(std::move(v));
        out.grad_bytes.push_back(std::move(raw));
      } else {
        out.grads.emplace_back();
        out.grad_bytes.emplace_back();
      }
    }
  }

 private:
  int64_t numel(int32_t s) const {
    return g_.storages[s].bytes / sim::bytes_of(g_.storages[s].dtype);
  }
  int64_t numel(const TensorRef& r) const {
    if (r.cols == 0) return numel(r.storage);
    return numel(r.storage) / r.stride * r.cols;
  }
  const uint8_t* data(int32_t s) const {
    if (!live_[s])
      throw ExecutionError("executor: op " + std::to_string(op_) + " (" + g_.ops[op_].name +
                           ") reads storage " + std::to_string(s) + " (" + g_.storages[s].role +
                           "), whose buffer has been freed");
    return buf_[s].data();
  }
  Vec load_dense(int32_t s) const {
    const int64_t n = numel(s);
    Vec v(static_cast<size_t>(n));
    const uint8_t* p = data(s);
    for (int64_t i = 0; i < n; ++i) v[i] = detail::load(p, g_.storages[s].dtype, i);
    return v;
  }
  // A forward tensor read by a forward kernel. A backward kernel must use saved().
  Vec load(const TensorRef& r) const {
    if (reads_)
      throw ExecutionError("executor: the backward kernel of op " + std::to_string(op_) + " (" +
                           g_.ops[op_].name + ") reads storage " + std::to_string(r.storage) +
                           " without declaring it");
    return gather(r);
  }
  // A tensor's values, dense (a view gathered from its columns).
  Vec gather(const TensorRef& r) const {
    if (r.cols == 0) return load_dense(r.storage);
    const uint8_t* p = data(r.storage);
    const sim::DType dt = g_.storages[r.storage].dtype;
    const int64_t rows = numel(r.storage) / r.stride;
    Vec v(static_cast<size_t>(rows * r.cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < r.cols; ++c) v[i * r.cols + c] = detail::load(p, dt, i * r.stride + r.col + c);
    return v;
  }
  // A forward tensor read by a backward kernel: only what backward_reads() declares.
  Vec saved(const TensorRef& r) const {
    if (reads_ && std::find(reads_->begin(), reads_->end(), r.storage) == reads_->end())
      throw ExecutionError("executor: the backward kernel of op " + std::to_string(op_) + " (" +
                           g_.ops[op_].name + ") reads storage " + std::to_string(r.storage) +
                           " (" + g_.storages[r.storage].role + ") it did not declare");
    return gather(r);
  }
  void store(const TensorRef& r, const Vec& v) {
    if (r.cols != 0) throw ExecutionError("executor: a kernel writes into a view");
    if (!live_[r.storage]) throw ExecutionError("executor: a kernel writes a freed storage");
    const int64_t n = numel(r.storage);
    if (static_cast<int64_t>(v.size()) != n)
      throw ExecutionError("executor: op " + std::to_string(op_) + " (" + g_.ops[op_].name +
                           ") makes " + std::to_string(v.size()) + " values for storage " +
                           std::to_string(r.storage) + " (" + g_.storages[r.storage].role +
                           ") of " + std::to_string(n));
    uint8_t* p = buf_[r.storage].data();
    for (int64_t i = 0; i < n; ++i) detail::store(p, g_.storages[r.storage].dtype, i, v[i]);
  }
  // The loss among the root op's outputs.
  static int loss_output(const sim::OpArgs& a) { return a.exec == Exec::kVocabCe ? 1 : 0; }
  // The gradient of output k (zeros where no gradient reaches it; one for the loss).
  Vec grad_out(const sim::OpArgs& a, int k) const {
    if (a.out[k].grad >= 0) return load_dense(a.out[k].grad);
    return Vec(static_cast<size_t>(numel(a.out[k])), a.root && k == loss_output(a) ? 1.0 : 0.0);
  }
  // Hands the gradient of input k on as the static backward pass decided.
  void deliver(const sim::OpArgs& a, int k, const Vec& v) {
    const TensorRef& r = a.in[k];
    switch (r.mode) {
      case GradMode::kNone:
      case GradMode::kAlias: return;  // the output's gradient buffer is the input's already
      case GradMode::kWrite: store({r.grad}, v); return;
      case GradMode::kAccum: {
        Vec cur = load_dense(r.grad);
        for (size_t i = 0; i < cur.size(); ++i) cur[i] += v[i];
        store({r.grad}, cur);
        return;
      }
      case GradMode::kMainGrad: {
        if (main_grad_ < 0) throw ExecutionError("executor: no main_grad buffer");
        uint8_t* p = buf_[main_grad_].data();
        const int64_t off = param_offset_[static_cast<size_t>(r.grad)];
        for (size_t i = 0; i < v.size(); ++i) {
          const int64_t j = off + static_cast<int64_t>(i);
          detail::store(p, sim::DType::kF32, j, detail::load(p, sim::DType::kF32, j) + v[i]);
        }
        return;
      }
    }
  }
  double keep_scale(int32_t op, int64_t i, double p) const {
    return uniform(opt_.seed, static_cast<uint64_t>(op), static_cast<uint64_t>(i), opt_.step) >= p
               ? 1.0 / (1.0 - p)
               : 0.0;
  }

  // exec11: bitsandbytes' NF4 layout as sim/src/lora.cpp nf4_bytes counts it (byte offsets):
  // packed 4-bit codes (high nibble first), one uint8 quantized absmax per 64 values, fp32
  // absmax2 per 256 of those, the fp32 offset, the 256-entry fp32 code2, the 16-entry NF4 code.
  struct Nf4Layout {
    int64_t absmax2 = 0, offset = 0, code2 = 0, code = 0;
  };
  static Nf4Layout nf4_layout(int64_t n) {
    const int64_t blocks = (n + 63) / 64, blocks2 = (blocks + 255) / 256;
    Nf4Layout l;
    l.absmax2 = (n + 1) / 2 + blocks;  // the quantized absmax bytes start at (n + 1) / 2
    l.offset = l.absmax2 + 4 * blocks2;
    l.code2 = l.offset + 4;
    l.code = l.code2 + 256 * 4;
    return l;
  }
  // functional.py dequantize_4bit @ 95f9af30: absmax = code2[q] * absmax2 + offset (double
  // quantization), then w[i] = code[nibble i] * absmax[i / 64].
  Vec dequantize_nf4(int32_t s, int64_t n) const {
    const uint8_t* p = data(s);
    const Nf4Layout l = nf4_layout(n);
    const int64_t q0 = (n + 1) / 2;
    const double offset = detail::load(p + l.offset, sim::DType::kF32, 0);
    Vec w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t blk = i / 64;
      const double absmax = detail::load(p + l.code2, sim::DType::kF32, p[q0 + blk]) *
                                detail::load(p + l.absmax2, sim::DType::kF32, blk / 256) +
                            offset;
      const uint8_t byte = p[i / 2];
      const int nib = i % 2 == 0 ? byte >> 4 : byte & 15;
      w[i] = detail::load(p + l.code, sim::DType::kF32, nib) * absmax;
    }
    return w;
  }
  void run(const sim::OpArgs& a, bool bwd);
  void attention(const sim::OpArgs& a, bool bwd);
  void flash(const sim::OpArgs& a, bool bwd);
  void exec10(const sim::OpArgs& a, bool bwd);  // exec10: the kinds after kVocabCe
  void exec12(const sim::OpArgs& a, bool bwd);  // exec12: gelu_new's ops, nanoGPT's mask
  void moe(const sim::OpArgs& a, bool bwd);     // exec12: HF's router and loop over experts
  void te_rms_norm(const sim::OpArgs& a, bool bwd);  // exec13: Transformer Engine's RMSNorm
  // exec10: torch.matmul's broadcast of K or V with fewer heads (expand + reshape): `x` has
  // x.size() / (tokens * hd) heads, the copy `heads`; and its backward, the sum back.
  static Vec broadcast_heads(const Vec& x, int64_t tokens, int64_t heads, int64_t hd) {
    const int64_t g = static_cast<int64_t>(x.size()) / (tokens * hd), rep = heads / g;
    Vec y(static_cast<size_t>(tokens * heads * hd));
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < hd; ++e) y[(t * heads + h) * hd + e] = x[(t * g + h / rep) * hd + e];
    return y;
  }
  static Vec sum_heads(const Vec& dy, int64_t tokens, int64_t heads, int64_t hd, int64_t g) {
    const int64_t rep = heads / g;
    Vec dx(static_cast<size_t>(tokens * g * hd), 0.0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < hd; ++e) dx[(t * g + h / rep) * hd + e] += dy[(t * heads + h) * hd + e];
    return dx;
  }
  void norms(const sim::OpArgs& a, bool bwd);
  void head(const sim::OpArgs& a, bool bwd);

  const Graph& g_;
  StepOptions opt_;
  std::vector<std::vector<uint8_t>> buf_;
  std::map<int32_t, std::vector<uint8_t>> host_;  // execreg: the offload host pool
  std::vector<uint8_t> live_;
  int64_t scratch_bytes_ = 0;  // the current op's transient bytes (ledger only)
  std::vector<int64_t> param_offset_;
  int32_t main_grad_ = -1;
  int32_t op_ = -1;
  double perturbed_ = 0;
  const std::vector<int32_t>* reads_ = nullptr;
};

void CpuBackend::run(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  switch (a.exec) {
    case Exec::kNone: throw ExecutionError("executor: op without executable semantics");
    case Exec::kBatch: {
      if (bwd) return;
      Vec ids(static_cast<size_t>(d[0])), labels(ids.size());
      const int64_t classes = d[2] > 0 ? d[2] : d[1];  // a token classifier's labels (implhf)
      for (int64_t t = 0; t < d[0]; ++t) {
        ids[t] = std::floor(uniform(opt_.seed, 0x1d5, static_cast<uint64_t>(t)) * static_cast<double>(d[1]));
        labels[t] = std::floor(uniform(opt_.seed, 0x1abe1, static_cast<uint64_t>(t)) * static_cast<double>(classes));
      }
      store(a.out[0], ids);
      store(a.out[1], labels);
      return;
    }
    case Exec::kRopeTables: {  // HF LlamaRotaryEmbedding: cos, sin of position * theta^(-2j/d)
      if (bwd) return;
      const int64_t b = d[0], s = d[1], hd = d[2], half = hd / 2;
      Vec cs(static_cast<size_t>(2 * b * s * hd));
      for (int64_t t = 0; t < b * s; ++t)
        for (int64_t j = 0; j < hd; ++j) {
          const double f = std::pow(kRopeTheta, -2.0 * static_cast<double>(j % half) / static_cast<double>(hd));
          const double ang = static_cast<double>(t % s) * f;
          cs[t * hd + j] = std::cos(ang);
          cs[(b * s + t) * hd + j] = std::sin(ang);
        }
      store(a.out[0], cs);
      return;
    }
    case Exec::kEmbedding: {
      const int64_t n = d[0], h = d[1], s = d[2], maxp = d[3], types = d[4];
      const Vec ids = bwd ? saved(a.in[0]) : load(a.in[0]);
      if (!bwd) {
        const Vec w = load(a.in[1]);
        Vec pos = a.n_in > 2 ? load(a.in[2]) : Vec();
        Vec x(static_cast<size_t>(n * h));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t c = 0; c < h; ++c) {
            double v = w[static_cast<int64_t>(ids[t]) * h + c];
            if (maxp > 0) v += pos[(t % s) * h + c];
            if (types > 0) v += pos[maxp * h + c];  // token type 0
            x[t * h + c] = v;
          }
        store(a.out[0], x);
        return;
      }
      const Vec dx = grad_out(a, 0);
      Vec dw(static_cast<size_t>(numel(a.in[1])), 0.0);
      Vec dp(a.n_in > 2 ? static_cast<size_t>(numel(a.in[2])) : 0, 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < h; ++c) {
          const double g = dx[t * h + c];
          dw[static_cast<int64_t>(ids[t]) * h + c] += g;
          if (maxp > 0) dp[(t % s) * h + c] += g;
          if (types > 0) dp[maxp * h + c] += g;
        }
      deliver(a, 1, dw);
      if (a.n_in > 2) deliver(a, 2, dp);
      return;
    }
    case Exec::kCast: {
      if (!bwd) {
        // exec11: the inputs' elements in order (a frozen weight's cast takes a tied weight's
        // separate bias as a second input)
        Vec x = load(a.in[0]);
        for (int k = 1; k < a.n_in; ++k) {
          const Vec xk = load(a.in[k]);
          x.insert(x.end(), xk.begin(), xk.end());
        }
        size_t at = 0;
        for (int k = 0; k < a.n_out; ++k) {
          const size_t n = static_cast<size_t>(numel(a.out[k]));
          store(a.out[k], Vec(x.begin() + static_cast<std::ptrdiff_t>(at),
                              x.begin() + static_cast<std::ptrdiff_t>(at + n)));
          at += n;
        }
        return;
      }
      Vec dx;
      for (int k = 0; k < a.n_out; ++k) {
        const Vec gk = grad_out(a, k);
        dx.insert(dx.end(), gk.begin(), gk.end());
      }
      dx.resize(static_cast<size_t>(numel(a.in[0])), 0.0);
      deliver(a, 0, dx);
      return;
    }
    case Exec::kLinear: {
      const int64_t rows = d[0], in = d[1], out = d[2], bias = d[3];
      if (!bwd) {
        const Vec x = load(a.in[0]), w = load(a.in[1]);
        const Vec b = bias == 2 ? load(a.in[2]) : Vec();
        Vec y(static_cast<size_t>(rows * out));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < out; ++o) {
            double acc = bias == 1 ? w[out * in + o] : bias == 2 ? b[o] : 0.0;
            for (int64_t k = 0; k < in; ++k) acc += x[r * in + k] * w[o * in + k];
            y[r * out + o] = acc;
          }
        store(a.out[0], y);
        return;
      }
      // exec11: a frozen weight (mode kNone) takes no gradient and its op saved no x
      const bool wgrad = a.in[1].mode != GradMode::kNone, xgrad = a.in[0].mode != GradMode::kNone;
      const Vec x = wgrad ? saved(a.in[0]) : Vec(), w = xgrad ? saved(a.in[1]) : Vec();
      const Vec dy = grad_out(a, 0);
      Vec dx(static_cast<size_t>(rows * in), 0.0), dw(static_cast<size_t>(numel(a.in[1])), 0.0);
      Vec db(static_cast<size_t>(out), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
          const double g = dy[r * out + o];
          db[o] += g;
          for (int64_t k = 0; k < in; ++k) {
            if (xgrad) dx[r * in + k] += g * w[o * in + k];
            if (wgrad) dw[o * in + k] += g * x[r * in + k];
          }
        }
      if (bias == 1) std::copy(db.begin(), db.end(), dw.begin() + out * in);
      deliver(a, 0, dx);
      deliver(a, 1, dw);
      if (bias == 2) deliver(a, 2, db);
      return;
    }
    case Exec::kDropout: {
      const double p = a.p;
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec y(x.size()), m(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          const double k = keep_scale(op_, static_cast<int64_t>(i), p);
          m[i] = k != 0.0 ? 1.0 : 0.0;
          y[i] = x[i] * k;
        }
        store(a.out[0], y);
        store(a.out[1], m);
        return;
      }
      const Vec m = saved(a.out[1]);
      Vec dx = grad_out(a, 0);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= m[i] / (1.0 - p);
      deliver(a, 0, dx);
      return;
    }
    case Exec::kAdd: {
      if (!bwd) {
        Vec x = load(a.in[0]);
        const Vec y = load(a.in[1]);
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
        store(a.out[0], x);
        return;
      }
      const Vec dz = grad_out(a, 0);
      deliver(a, 0, dz);
      deliver(a, 1, dz);
      return;
    }
    case Exec::kCopy:
      if (!bwd) return store(a.out[0], load(a.in[0]));
      return deliver(a, 0, grad_out(a, 0));
    case Exec::kSplit: {
      if (!bwd) return;  // views
      const TensorRef& base = a.in[0];
      const int64_t w = a.out[0].stride, rows = numel(base.storage) / w;
      Vec dx(static_cast<size_t>(rows * w), 0.0);
      for (int k = 0; k < a.n_out; ++k) {
        const Vec gk = grad_out(a, k);
        const int64_t c0 = a.out[k].col, cols = a.out[k].cols;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) dx[r * w + c0 + c] = gk[r * cols + c];
      }
      deliver(a, 0, dx);
      return;
    }
    case Exec::kRepeatKv: {
      const int64_t n = d[0], g = d[1], hd = d[2], rep = d[3], heads = g * rep;
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec y(static_cast<size_t>(n * heads * hd));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t e = 0; e < hd; ++e) y[(t * heads + h) * hd + e] = x[(t * g + h / rep) * hd + e];
        store(a.out[0], y);
        return;
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(static_cast<size_t>(n * g * hd), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t e = 0; e < hd; ++e) dx[(t * g + h / rep) * hd + e] += dy[(t * heads + h) * hd + e];
      deliver(a, 0, dx);
      return;
    }
    case Exec::kRope: {  // HF apply_rotary_pos_emb: x cos + rotate_half(x) sin
      const int64_t b = d[0], s = d[1], heads = d[2], hd = d[3], half = hd / 2, n = b * s;
      const Vec cs = bwd ? saved(a.in[1]) : load(a.in[1]);
      auto cosv = [&](int64_t t, int64_t j) { return cs[t * hd + j]; };
      auto sinv = [&](int64_t t, int64_t j) { return cs[(n + t) * hd + j]; };
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec y(x.size());
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < hd; ++j) {
              const int64_t o = (t * heads + h) * hd;
              const double rot = j < half ? -x[o + j + half] : x[o + j - half];
              y[o + j] = x[o + j] * cosv(t, j) + rot * sinv(t, j);
            }
        store(a.out[0], y);
        return;
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(dy.size(), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t j = 0; j < hd; ++j) {
            const int64_t o = (t * heads + h) * hd;
            dx[o + j] += dy[o + j] * cosv(t, j);
            const double u = dy[o + j] * sinv(t, j);
            if (j < half) dx[o + j + half] -= u; else dx[o + j - half] += u;
          }
      deliver(a, 0, dx);
      return;
    }
    case Exec::kGelu: case Exec::kSilu: {
      const bool gelu = a.exec == Exec::kGelu;
      const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]);
      Vec y(x.size());
      const Vec dy = bwd ? grad_out(a, 0) : Vec();
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        if (gelu) {
          const double th = std::tanh(kGeluC * (v + 0.044715 * v * v * v));
          y[i] = bwd ? dy[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * kGeluC *
                                                     (1 + 3 * 0.044715 * v * v))
                     : 0.5 * v * (1 + th);
        } else {
          const double sg = 1.0 / (1.0 + std::exp(-v));
          y[i] = bwd ? dy[i] * sg * (1 + v * (1 - sg)) : v * sg;
        }
      }
      if (bwd) deliver(a, 0, y); else store(a.out[0], y);
      return;
    }
    case Exec::kMul: {
      // exec11: in backward, each operand only where the other takes a gradient
      const bool g0 = a.in[0].mode != GradMode::kNone, g1 = a.in[1].mode != GradMode::kNone;
      const Vec x = !bwd ? load(a.in[0]) : g1 ? saved(a.in[0]) : Vec(static_cast<size_t>(numel(a.in[0])), 0.0);
      const Vec y = !bwd ? load(a.in[1]) : g0 ? saved(a.in[1]) : Vec(static_cast<size_t>(numel(a.in[1])), 0.0);
      if (!bwd) {
        Vec z(x.size());
        for (size_t i = 0; i < x.size(); ++i) z[i] = x[i] * y[i];
        store(a.out[0], z);
        return;
      }
      const Vec dz = grad_out(a, 0);
      Vec dx(x.size()), dy(y.size());
      for (size_t i = 0; i < x.size(); ++i) dx[i] = dz[i] * y[i], dy[i] = dz[i] * x[i];
      deliver(a, 0, dx);
      deliver(a, 1, dy);
      return;
    }
    case Exec::kQk: case Exec::kMask: case Exec::kSoftmax: case Exec::kAv:
      return attention(a, bwd);
    case Exec::kFlash: case Exec::kMemEfficient: return flash(a, bwd);  // exec12
    case Exec::kLayerNorm: case Exec::kMeanSq: case Exec::kRsqrt: case Exec::kRowScale:
    case Exec::kColScale:
      return norms(a, bwd);
    case Exec::kLogSoftmax: case Exec::kNll: case Exec::kVocabCe: return head(a, bwd);
    case Exec::kIndexSplit: case Exec::kScale: case Exec::kAdditiveMask: case Exec::kMaskAdd:
    case Exec::kShiftRows:
      return exec10(a, bwd);
    case Exec::kPow: case Exec::kTanh: case Exec::kAddScalar: case Exec::kEqZero:
    case Exec::kMaskedFill:
      return exec12(a, bwd);
    case Exec::kTopK: case Exec::kRowSum: case Exec::kDivInPlace: case Exec::kOneHot:
    case Exec::kWhere: case Exec::kGatherRows: case Exec::kGatherWeight: case Exec::kIndexAdd:
      return moe(a, bwd);
    case Exec::kTeRmsNorm: return te_rms_norm(a, bwd);  // exec13
    case Exec::kSigmoid: {  // exec13: Qwen2-MoE's shared_expert_gate sigmoid
      if (!bwd) {
        Vec x = load(a.in[0]);
        for (double& v : x) v = 1.0 / (1.0 + std::exp(-v));
        return store(a.out[0], x);
      }
      const Vec y = saved(a.out[0]);
      Vec dx = grad_out(a, 0);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= y[i] * (1.0 - y[i]);
      return deliver(a, 0, dx);
    }
    case Exec::kSwiglu: {  // feat14: Megatron's SwiGLUFunction (fused_bias_swiglu.py swiglu,
      // swiglu_back @ d98e8a64ddf3): x [rows, 2f] -> silu(x[:, :f]) * x[:, f:]
      const int64_t rows = d[0], f = d[1];
      const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]);
      if (!bwd) {
        Vec y(static_cast<size_t>(rows * f));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < f; ++c) {
            const double g = x[r * 2 * f + c], u = x[r * 2 * f + f + c];
            y[r * f + c] = g / (1.0 + std::exp(-g)) * u;
          }
        return store(a.out[0], y);
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(x.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < f; ++c) {
          const double g = x[r * 2 * f + c], u = x[r * 2 * f + f + c], e = dy[r * f + c];
          const double sg = 1.0 / (1.0 + std::exp(-g));
          dx[r * 2 * f + c] = e * sg * (1 + g * (1 - sg)) * u;
          dx[r * 2 * f + f + c] = e * g * sg;
        }
      return deliver(a, 0, dx);
    }
    case Exec::kGateMul: {  // exec13: sigmoid(gate) [N, 1] * shared_expert(x) [N, h]
      const int64_t rows = d[0], h = d[1];
      const bool g0 = a.in[0].mode != GradMode::kNone, g1 = a.in[1].mode != GradMode::kNone;
      const Vec gt = !bwd ? load(a.in[0]) : g1 ? saved(a.in[0]) : Vec(static_cast<size_t>(rows), 0.0);
      const Vec y = !bwd ? load(a.in[1]) : g0 ? saved(a.in[1]) : Vec(static_cast<size_t>(rows * h), 0.0);
      if (!bwd) {
        Vec z(y.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < h; ++c) z[r * h + c] = gt[r] * y[r * h + c];
        return store(a.out[0], z);
      }
      const Vec dz = grad_out(a, 0);
      Vec dg(static_cast<size_t>(rows), 0.0), dy(y.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) {
          dg[r] += dz[r * h + c] * y[r * h + c];
          dy[r * h + c] = dz[r * h + c] * gt[r];
        }
      deliver(a, 0, dg);
      return deliver(a, 1, dy);
    }
    // exec14 (issue 10): Megatron's fused MLA rope (mla_rope.hpp)
    case Exec::kMlaRopeTables:
      if (!bwd) store(a.out[0], mla_rope::tables(d[0], d[1], kRopeTheta));
      return;
    case Exec::kMlaRopeQ: {  // in place: out 0 is q's storage; the backward in place on the gradient
      const Vec t = bwd ? saved(a.in[1]) : load(a.in[1]);
      Vec x = bwd ? grad_out(a, 0) : load(a.in[0]);
      mla_rope::rotate_q(x, t, d[1], d[2], d[3], d[4], bwd);
      if (!bwd) return store(a.out[0], x);
      // _FusedMLARoPEInplace.backward rotates the incoming gradient in place and returns it: the
      // input's gradient buffer is the output's (kAlias), rewritten here
      if (a.in[0].mode == GradMode::kAlias) {
        if (a.in[0].grad >= 0) store({a.in[0].grad}, x);
        return;
      }
      return deliver(a, 0, x);
    }
    case Exec::kMlaRopeKv: {
      const Vec t = bwd ? saved(a.in[2]) : load(a.in[2]);
      if (!bwd) {
        Vec key, value;
        mla_rope::kv_split_forward(load(a.in[0]), load(a.in[1]), t, d[1], d[2], d[3], d[4], d[5],
                                   key, value);
        store(a.out[0], key);
        return store(a.out[1], value);
      }
      Vec dkv, demb;
      mla_rope::kv_split_backward(grad_out(a, 0), grad_out(a, 1), t, d[1], d[2], d[3], d[4], d[5],
                                  dkv, demb);
      deliver(a, 0, dkv);
      return deliver(a, 1, demb);
    }
    case Exec::kHeld:  // exec11
      if (!bwd) store(a.out[0], Vec(static_cast<size_t>(numel(a.out[0])), 0.0));
      return;
    case Exec::kComplexRopeTables: {  // exec11: freqs_cis = polar(1, position * theta^(-2j/rope))
      if (bwd) return;
      const int64_t s = d[0], rope = d[1], half = rope / 2;
      Vec t(static_cast<size_t>(s * rope));
      for (int64_t p = 0; p < s; ++p)
        for (int64_t j = 0; j < half; ++j) {
          const double ang = static_cast<double>(p) *
                             std::pow(kRopeTheta, -2.0 * static_cast<double>(j) / static_cast<double>(rope));
          t[p * rope + 2 * j] = std::cos(ang);
          t[p * rope + 2 * j + 1] = std::sin(ang);
        }
      store(a.out[0], t);
      return;
    }
    case Exec::kComplexRope: {  // exec11: DeepSeek-V2's apply_rotary_emb on (re, im) pairs
      const int64_t s = d[1], heads = d[2], rope = d[3], half = rope / 2;
      const Vec t = bwd ? saved(a.in[1]) : load(a.in[1]);
      Vec x = bwd ? grad_out(a, 0) : load(a.in[0]);
      const int64_t rows = static_cast<int64_t>(x.size()) / rope;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = (r / heads) % s;
        for (int64_t j = 0; j < half; ++j) {
          const double c = t[p * rope + 2 * j], sn = bwd ? -t[p * rope + 2 * j + 1] : t[p * rope + 2 * j + 1];
          const double re = x[r * rope + 2 * j], im = x[r * rope + 2 * j + 1];
          x[r * rope + 2 * j] = re * c - im * sn;  // backward: times the conjugate
          x[r * rope + 2 * j + 1] = re * sn + im * c;
        }
      }
      if (bwd) deliver(a, 0, x); else store(a.out[0], x);
      return;
    }
    case Exec::kCat: {  // exec11: torch.cat of per-head column blocks (input 1 maybe expanded)
      const int64_t rows = d[0], heads = d[1], w0 = d[2], w1 = d[3], w = w0 + w1;
      const bool expand = numel(a.in[1]) == rows / heads * w1 && heads > 1;
      auto r1 = [&](int64_t r) { return expand ? r / heads : r; };
      if (!bwd) {
        const Vec x0 = load(a.in[0]), x1 = load(a.in[1]);
        Vec y(static_cast<size_t>(rows * w));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < w0; ++c) y[r * w + c] = x0[r * w0 + c];
          for (int64_t c = 0; c < w1; ++c) y[r * w + w0 + c] = x1[r1(r) * w1 + c];
        }
        store(a.out[0], y);
        return;
      }
      const Vec dy = grad_out(a, 0);
      Vec d0(static_cast<size_t>(rows * w0)), d1(static_cast<size_t>(numel(a.in[1])), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < w0; ++c) d0[r * w0 + c] = dy[r * w + c];
        for (int64_t c = 0; c < w1; ++c) d1[r1(r) * w1 + c] += dy[r * w + w0 + c];
      }
      deliver(a, 0, d0);
      deliver(a, 1, d1);
      return;
    }
    case Exec::kNf4Linear: {  // exec11: bitsandbytes MatMul4Bit over a dequantized weight
      const int64_t rows = d[0], in = d[1], out = d[2];
      const Vec w = dequantize_nf4(a.in[1].storage, in * out);  // into the op's transient
      if (!bwd) {
        const Vec x = load(a.in[0]);
        const Vec b = d[3] == 2 ? load(a.in[2]) : Vec();
        Vec y(static_cast<size_t>(rows * out));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < out; ++o) {
            double acc = d[3] == 2 ? b[o] : 0.0;
            for (int64_t k = 0; k < in; ++k) acc += x[r * in + k] * w[o * in + k];
            y[r * out + o] = acc;
          }
        store(a.out[0], y);
        return;
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(static_cast<size_t>(rows * in), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o)
          for (int64_t k = 0; k < in; ++k) dx[r * in + k] += dy[r * out + o] * w[o * in + k];
      deliver(a, 0, dx);
      return;
    }
  }
}

// exec10 (issue 10): the kernels of HF's masks and shifted loss, Falcon's index split and SDPA's
// math path (their op rows: sim/src/blocks_hfmask.cpp, graph_blocks.cpp, sdpa_math.cpp).
void CpuBackend::exec10(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  switch (a.exec) {
    case Exec::kIndexSplit: {
      // FalconAttention._split_heads (multi_query): fused_qkv viewed [b, s, a + 2, d];
      // query = [..., :-2, :] (a view), key = [..., [-2], :], value = [..., [-1], :] (advanced
      // indexing: copies; IndexBackward0 saves the index and scatters the gradient back).
      const int64_t w = d[0], wq = d[1], wkv = d[2], hd = d[3];
      const int64_t rows = numel(a.in[0].storage) / w;
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec k(static_cast<size_t>(rows * wkv)), v(k.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < wkv; ++c) {
            k[r * wkv + c] = x[r * w + wq + c];
            v[r * wkv + c] = x[r * w + wq + wkv + c];
          }
        store(a.out[1], k);
        store(a.out[2], v);
        // the head indices as Python gives them, [-2] and [-1] of a + 2 heads
        store(a.out[3], {-2.0, -1.0});
        return;
      }
      const Vec idx = saved(a.out[3]);
      const int64_t heads = w / hd;
      const int64_t col_k = (heads + static_cast<int64_t>(idx[0])) * hd;
      const int64_t col_v = (heads + static_cast<int64_t>(idx[1])) * hd;
      Vec dx(static_cast<size_t>(rows * w), 0.0);
      const Vec dq = grad_out(a, 0), dk = grad_out(a, 1), dv = grad_out(a, 2);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < wq; ++c) dx[r * w + c] = dq[r * wq + c];
        for (int64_t c = 0; c < wkv; ++c) {
          dx[r * w + col_k + c] += dk[r * wkv + c];
          dx[r * w + col_v + c] += dv[r * wkv + c];
        }
      }
      deliver(a, 0, dx);
      return;
    }
    case Exec::kScale: {
      Vec x = bwd ? grad_out(a, 0) : load(a.in[0]);
      for (double& v : x) v *= static_cast<double>(a.p);
      if (bwd) deliver(a, 0, x); else store(a.out[0], x);
      return;
    }
    case Exec::kAdditiveMask: {
      if (bwd) return;
      const int64_t copies = d[0], s = d[1], kind = d[2];
      const sim::DType dt = g_.storages[a.out[0].storage].dtype;
      // torch.finfo(dtype).min, what HF fills with (modeling_llama.py _prepare_4d_causal_
      // attention_mask_with_cache_position: full((s, s), min_dtype).triu(1))
      const double fmin = dt == sim::DType::kBF16  ? -3.3895313892515355e38
                          : dt == sim::DType::kF16 ? -65504.0
                                                   : -3.4028234663852886e38;
      const double masked = kind == 0 ? -INFINITY : fmin;
      if (kind == 2) return store(a.out[0], Vec(static_cast<size_t>(copies * s), 0.0));
      Vec m(static_cast<size_t>(copies * s * s));
      for (int64_t c = 0; c < copies; ++c)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j) m[(c * s + i) * s + j] = j <= i ? 0.0 : masked;
      store(a.out[0], m);
      return;
    }
    case Exec::kMaskAdd: {
      const int64_t b = d[0], heads = d[1], s = d[2], layout = d[3];
      if (bwd) return deliver(a, 0, grad_out(a, 0));  // AddBackward0: the gradient as it is
      Vec x = load(a.in[0]);
      const Vec m = load(a.in[1]);
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < s; ++i)
            for (int64_t j = 0; j < s; ++j) {
              const int64_t mi = layout == 0 ? i * s + j : layout == 1 ? (bi * s + i) * s + j
                                                                       : bi * s + j;
              x[((bi * heads + h) * s + i) * s + j] += m[mi];
            }
      store(a.out[0], x);
      return;
    }
    case Exec::kShiftRows: {
      const int64_t b = d[0], s = d[1], w = d[2], off = d[3];
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec y(static_cast<size_t>(b * (s - 1) * w));
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t i = 0; i + 1 < s; ++i)
            for (int64_t c = 0; c < w; ++c)
              y[(bi * (s - 1) + i) * w + c] = x[(bi * s + i + off) * w + c];
        store(a.out[0], y);
        return;
      }
      // CloneBackward, then SliceBackward: a zeroed [b, s, w] gradient with the rows scattered
      const Vec dy = grad_out(a, 0);
      Vec dx(static_cast<size_t>(b * s * w), 0.0);
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t i = 0; i + 1 < s; ++i)
          for (int64_t c = 0; c < w; ++c)
            dx[(bi * s + i + off) * w + c] = dy[(bi * (s - 1) + i) * w + c];
      deliver(a, 0, dx);
      return;
    }
    default: return;
  }
}

void CpuBackend::attention(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  if (a.exec == Exec::kMask) {
    const int64_t rows = d[0], s = d[1];
    const Vec m = bwd ? saved(a.in[1]) : load(a.in[1]);
    Vec v = bwd ? grad_out(a, 0) : load(a.in[0]);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < s; ++j)
        if (m[(r % s) * s + j] == 0.0) v[r * s + j] = bwd ? 0.0 : -INFINITY;
    if (bwd) deliver(a, 0, v); else store(a.out[0], v);
    return;
  }
  if (a.exec == Exec::kSoftmax) {
    const int64_t rows = d[0], cols = d[1];
    const bool causal = d[2] != 0;
    if (!bwd) {
      Vec x = load(a.in[0]);
      if (a.n_in > 1) {  // exec10: SDPA math's attn.add_(mask), an [s, s] additive mask
        const Vec mk = load(a.in[1]);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) x[r * cols + j] += mk[(r % cols) * cols + j];
      }
      Vec p(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t lim = causal ? r % cols + 1 : cols;
        double m = -INFINITY;
        for (int64_t j = 0; j < lim; ++j) m = std::max(m, x[r * cols + j]);
        double sum = 0;
        for (int64_t j = 0; j < lim; ++j) sum += std::exp(x[r * cols + j] - m);
        for (int64_t j = 0; j < cols; ++j)
          p[r * cols + j] = j < lim ? std::exp(x[r * cols + j] - m) / sum : 0.0;
      }
      store(a.out[0], p);
      return;
    }
    const Vec p = saved(a.out[0]), dy = grad_out(a, 0);
    Vec dx(p.size());
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (int64_t j = 0; j < cols; ++j) dot += dy[r * cols + j] * p[r * cols + j];
      for (int64_t j = 0; j < cols; ++j) dx[r * cols + j] = p[r * cols + j] * (dy[r * cols + j] - dot);
    }
    deliver(a, 0, dx);
    return;
  }
  const int64_t b = d[0], heads = d[1], s = d[2], hd = d[3], grp = d[4];
  const int64_t kvh = heads / grp;
  // exec10: dim[5] bit 8, SDPA math's qk: q and k were scaled before
  const double scale = a.exec == Exec::kQk && (d[5] & 8) ? 1.0 : 1.0 / std::sqrt(static_cast<double>(hd));
  const bool bcast = (d[5] & 4) != 0;  // exec10: the k / v operand copy broadcast (last output)
  auto sidx = [&](int64_t bi, int64_t h, int64_t i, int64_t j) { return ((bi * heads + h) * s + i) * s + j; };
  auto qidx = [&](int64_t bi, int64_t i, int64_t h, int64_t e) { return ((bi * s + i) * heads + h) * hd + e; };
  auto kidx = [&](int64_t bi, int64_t j, int64_t h, int64_t e) { return ((bi * s + j) * kvh + h / grp) * hd + e; };
  if (a.exec == Exec::kQk) {
    // The operands the bmm uses: the copies (outputs 1..) where the layout makes them.
    const int qc = (d[5] & 1) ? 1 : 0;
    const int kc = bcast ? a.n_out - 1 : (d[5] & 2) ? 1 + qc : 0;
    Vec q, k;
    if (!bwd) {
      q = load(a.in[0]);
      k = load(a.in[1]);
      if (qc) store(a.out[qc], q), q = load(a.out[qc]);
      if (bcast) {
        // an autocast cast of k first, where the layout makes one (the output before)
        if (kc > 1 + qc) store(a.out[kc - 1], k), k = load(a.out[kc - 1]);
        k = broadcast_heads(k, b * s, heads, hd);
      }
      if (kc) store(a.out[kc], k), k = load(a.out[kc]);
      Vec sc(static_cast<size_t>(b * heads * s * s));
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < s; ++i)
            for (int64_t j = 0; j < s; ++j) {
              double acc = 0;
              for (int64_t e = 0; e < hd; ++e) acc += q[qidx(bi, i, h, e)] * k[kidx(bi, j, h, e)];
              sc[sidx(bi, h, i, j)] = acc * scale;
            }
      store(a.out[0], sc);
      return;
    }
    q = saved(qc ? a.out[qc] : a.in[0]);
    k = saved(kc ? a.out[kc] : a.in[1]);
    const Vec ds = grad_out(a, 0);
    Vec dq(q.size(), 0.0), dk(k.size(), 0.0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j) {
            const double g = ds[sidx(bi, h, i, j)] * scale;
            for (int64_t e = 0; e < hd; ++e) {
              dq[qidx(bi, i, h, e)] += g * k[kidx(bi, j, h, e)];
              dk[kidx(bi, j, h, e)] += g * q[qidx(bi, i, h, e)];
            }
          }
    deliver(a, 0, dq);
    deliver(a, 1, bcast ? sum_heads(dk, b * s, heads, hd, numel(a.in[1]) / (b * s * hd)) : dk);
    return;
  }
  // kAv: out[t, h*d] = sum_j P[b, h, i, j] v[j]
  const int vc = bcast ? a.n_out - 1 : (d[5] & 2) ? 1 : 0;
  if (!bwd) {
    const Vec p = load(a.in[0]);
    Vec v = load(a.in[1]);
    if (bcast) {  // exec10: an autocast cast first where made, then the broadcast copy
      if (vc > 1) store(a.out[vc - 1], v), v = load(a.out[vc - 1]);
      v = broadcast_heads(v, b * s, heads, hd);
    }
    if (vc) store(a.out[vc], v), v = load(a.out[vc]);
    Vec o(static_cast<size_t>(b * s * heads * hd), 0.0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t e = 0; e < hd; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < s; ++j) acc += p[sidx(bi, h, i, j)] * v[kidx(bi, j, h, e)];
            o[qidx(bi, i, h, e)] = acc;
          }
    store(a.out[0], o);
    return;
  }
  const Vec p = saved(a.in[0]), v = saved(vc ? a.out[vc] : a.in[1]), dout = grad_out(a, 0);
  Vec dp(p.size(), 0.0), dv(v.size(), 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j)
          for (int64_t e = 0; e < hd; ++e) {
            const double g = dout[qidx(bi, i, h, e)];
            dp[sidx(bi, h, i, j)] += g * v[kidx(bi, j, h, e)];
            dv[kidx(bi, j, h, e)] += g * p[sidx(bi, h, i, j)];
          }
  deliver(a, 0, dp);
  deliver(a, 1, bcast ? sum_heads(dv, b * s, heads, hd, numel(a.in[1]) / (b * s * hd)) : dv);
}

// Flash-style attention (Dao 2023, FlashAttention-2 Alg. 1 and 2, computed row by row): forward
// keeps only the output and the log-sum-exp; backward rebuilds the probabilities from them and
// regenerates the dropout keep mask from the counter RNG.
void CpuBackend::flash(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  const int64_t b = d[0], heads = d[1], s = d[2], hd = d[3], grp = d[4], kvh = heads / grp;
  const bool causal = d[5] != 0;
  const double p = a.p, scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const Vec q = bwd ? saved(a.in[0]) : load(a.in[0]);
  const Vec k = bwd ? saved(a.in[1]) : load(a.in[1]);
  const Vec v = bwd ? saved(a.in[2]) : load(a.in[2]);
  // exec12 (kMemEfficient): v's own head dim (MLA), the logsumexp's padded rows, the attn_bias
  const int64_t vd = static_cast<int64_t>(v.size()) / (b * s * kvh);
  const int64_t lse_s = numel(a.out[1]) / (b * heads);
  const bool biased = a.exec == Exec::kMemEfficient && a.n_in > 3;
  const Vec bias = !biased ? Vec() : bwd ? saved(a.in[3]) : load(a.in[3]);
  const int64_t bias_b = biased ? static_cast<int64_t>(bias.size()) / (s * s) : 0;  // 1 or b
  auto qidx = [&](int64_t bi, int64_t i, int64_t h, int64_t e) { return ((bi * s + i) * heads + h) * hd + e; };
  auto kidx = [&](int64_t bi, int64_t j, int64_t h, int64_t e) { return ((bi * s + j) * kvh + h / grp) * hd + e; };
  auto oidx = [&](int64_t bi, int64_t i, int64_t h, int64_t e) { return ((bi * s + i) * heads + h) * vd + e; };
  auto vidx = [&](int64_t bi, int64_t j, int64_t h, int64_t e) { return ((bi * s + j) * kvh + h / grp) * vd + e; };
  auto score = [&](int64_t bi, int64_t h, int64_t i, int64_t j) {
    double acc = 0;
    for (int64_t e = 0; e < hd; ++e) acc += q[qidx(bi, i, h, e)] * k[kidx(bi, j, h, e)];
    acc *= scale;
    if (biased) acc += bias[((bi % bias_b) * s + i) * s + j];
    return acc;
  };
  auto keep = [&](int64_t bi, int64_t h, int64_t i, int64_t j) {
    return p > 0 ? keep_scale(op_, ((bi * heads + h) * s + i) * s + j, p) : 1.0;
  };
  if (!bwd) {
    Vec o(static_cast<size_t>(b * s * heads * vd), 0.0);
    Vec lse(static_cast<size_t>(b * heads * lse_s), 0.0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; ++i) {
          const int64_t lim = causal ? i + 1 : s;
          Vec sc(static_cast<size_t>(lim));
          double m = -INFINITY;
          for (int64_t j = 0; j < lim; ++j) sc[j] = score(bi, h, i, j), m = std::max(m, sc[j]);
          double sum = 0;
          for (int64_t j = 0; j < lim; ++j) sum += std::exp(sc[j] - m);
          const double l = m + std::log(sum);
          lse[(bi * heads + h) * lse_s + i] = l;
          for (int64_t j = 0; j < lim; ++j) {
            const double pj = std::exp(sc[j] - l) * keep(bi, h, i, j);
            for (int64_t e = 0; e < vd; ++e) o[oidx(bi, i, h, e)] += pj * v[vidx(bi, j, h, e)];
          }
        }
    store(a.out[0], o);
    store(a.out[1], lse);
    return;
  }
  const Vec o = saved(a.out[0]), lse = saved(a.out[1]), dout = grad_out(a, 0);
  (void)o;  // FlashAttention-2 uses rowsum(dO * O) for D; it equals sum_j P dP, computed below
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i) {
        const int64_t lim = causal ? i + 1 : s;
        const double l = lse[(bi * heads + h) * lse_s + i];
        Vec pr(static_cast<size_t>(lim)), dp(static_cast<size_t>(lim));
        double dsum = 0;
        for (int64_t j = 0; j < lim; ++j) {
          pr[j] = std::exp(score(bi, h, i, j) - l);
          const double kp = keep(bi, h, i, j);
          double g = 0;
          for (int64_t e = 0; e < vd; ++e) {
            g += dout[oidx(bi, i, h, e)] * v[vidx(bi, j, h, e)];
            dv[vidx(bi, j, h, e)] += pr[j] * kp * dout[oidx(bi, i, h, e)];
          }
          dp[j] = g * kp;
          dsum += pr[j] * dp[j];
        }
        for (int64_t j = 0; j < lim; ++j) {
          const double ds = pr[j] * (dp[j] - dsum) * scale;
          for (int64_t e = 0; e < hd; ++e) {
            dq[qidx(bi, i, h, e)] += ds * k[kidx(bi, j, h, e)];
            dk[kidx(bi, j, h, e)] += ds * q[qidx(bi, i, h, e)];
          }
        }
      }
  deliver(a, 0, dq);
  deliver(a, 1, dk);
  deliver(a, 2, dv);
}

void CpuBackend::norms(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  const int64_t rows = d[0], h = d[1];
  switch (a.exec) {
    case Exec::kLayerNorm: {  // torch native_layer_norm: biased variance, rstd = 1/sqrt(var+eps)
      const bool has_bias = d[2] != 0, stats = d[3] != 0;
      const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]), w = bwd ? saved(a.in[1]) : load(a.in[1]);
      Vec mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
      if (bwd && stats) {
        const Vec st = saved(a.out[1]);
        for (int64_t r = 0; r < rows; ++r) mean[r] = st[r], rstd[r] = st[rows + r];
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          double m = 0, var = 0;
          for (int64_t c = 0; c < h; ++c) m += x[r * h + c];
          m /= static_cast<double>(h);
          for (int64_t c = 0; c < h; ++c) var += (x[r * h + c] - m) * (x[r * h + c] - m);
          var /= static_cast<double>(h);
          // as stored (fp32), so forward and backward use the same statistics
          mean[r] = static_cast<float>(m);
          rstd[r] = static_cast<float>(1.0 / std::sqrt(var + kLayerNormEps));
        }
      }
      if (!bwd) {
        Vec y(x.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < h; ++c)
            y[r * h + c] = (x[r * h + c] - mean[r]) * rstd[r] * w[c] + (has_bias ? w[h + c] : 0.0);
        store(a.out[0], y);
        if (stats) {
          Vec st(static_cast<size_t>(2 * rows));
          for (int64_t r = 0; r < rows; ++r) st[r] = mean[r], st[rows + r] = rstd[r];
          store(a.out[1], st);
        }
        return;
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(x.size()), dw(w.size(), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        double m1 = 0, m2 = 0;
        for (int64_t c = 0; c < h; ++c) {
          const double xh = (x[r * h + c] - mean[r]) * rstd[r], g = dy[r * h + c];
          dw[c] += g * xh;
          if (has_bias) dw[h + c] += g;
          m1 += g * w[c];
          m2 += g * w[c] * xh;
        }
        m1 /= static_cast<double>(h);
        m2 /= static_cast<double>(h);
        for (int64_t c = 0; c < h; ++c) {
          const double xh = (x[r * h + c] - mean[r]) * rstd[r];
          dx[r * h + c] = rstd[r] * (dy[r * h + c] * w[c] - m1 - xh * m2);
        }
      }
      deliver(a, 0, dx);
      deliver(a, 1, dw);
      return;
    }
    case Exec::kMeanSq: {  // x.pow(2).mean(-1)
      const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]);
      if (!bwd) {
        Vec var(static_cast<size_t>(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < h; ++c) var[r] += x[r * h + c] * x[r * h + c];
          var[r] /= static_cast<double>(h);
        }
        store(a.out[0], var);
        return;
      }
      const Vec dv = grad_out(a, 0);
      Vec dx(x.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) dx[r * h + c] = dv[r] * 2.0 * x[r * h + c] / static_cast<double>(h);
      deliver(a, 0, dx);
      return;
    }
    case Exec::kRsqrt: {  // torch.rsqrt(var + eps): RsqrtBackward uses its result
      if (!bwd) {
        Vec v = load(a.in[0]);
        for (double& x : v) x = 1.0 / std::sqrt(x + kRmsNormEps);
        store(a.out[0], v);
        return;
      }
      const Vec rs = saved(a.out[0]);
      Vec dv = grad_out(a, 0);
      for (size_t i = 0; i < dv.size(); ++i) dv[i] *= -0.5 * rs[i] * rs[i] * rs[i];
      deliver(a, 0, dv);
      return;
    }
    case Exec::kRowScale: case Exec::kColScale: {
      const bool row = a.exec == Exec::kRowScale;
      // kRowScale: x (input 0) [rows, h] times r (input 1) [rows]; kColScale: w (input 0) [h]
      // times x (input 1) [rows, h].
      // exec11: in backward, each operand only where the other takes a gradient (a frozen
      // weight's op keeps the normalized input unsaved); the missing one reads as zeros
      const bool g0 = a.in[0].mode != GradMode::kNone, g1 = a.in[1].mode != GradMode::kNone;
      const Vec u = !bwd ? load(a.in[0]) : g1 ? saved(a.in[0]) : Vec(static_cast<size_t>(numel(a.in[0])), 0.0);
      const Vec v = !bwd ? load(a.in[1]) : g0 ? saved(a.in[1]) : Vec(static_cast<size_t>(numel(a.in[1])), 0.0);
      const Vec& x = row ? u : v;
      const Vec& sc = row ? v : u;
      auto factor = [&](int64_t r, int64_t c) { return row ? sc[r] : sc[c]; };
      if (!bwd) {
        Vec z(x.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < h; ++c) z[r * h + c] = x[r * h + c] * factor(r, c);
        store(a.out[0], z);
        return;
      }
      const Vec dz = grad_out(a, 0);
      Vec dx(x.size()), ds(sc.size(), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) {
          dx[r * h + c] = dz[r * h + c] * factor(r, c);
          ds[row ? r : c] += dz[r * h + c] * x[r * h + c];
        }
      deliver(a, row ? 0 : 1, dx);
      deliver(a, row ? 1 : 0, ds);
      return;
    }
    default: return;
  }
}

void CpuBackend::head(const sim::OpArgs& a, bool bwd) {
  const int64_t rows = a.dim[0], v = a.dim[1];
  auto softmax_rows = [&](const Vec& x, bool log) {
    Vec y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < v; ++j) m = std::max(m, x[r * v + j]);
      for (int64_t j = 0; j < v; ++j) sum += std::exp(x[r * v + j] - m);
      const double lz = m + std::log(sum);
      for (int64_t j = 0; j < v; ++j) y[r * v + j] = log ? x[r * v + j] - lz : std::exp(x[r * v + j] - lz);
    }
    return y;
  };
  switch (a.exec) {
    case Exec::kLogSoftmax: {
      if (!bwd) return store(a.out[0], softmax_rows(load(a.in[0]), true));
      const Vec lp = saved(a.out[0]), dy = grad_out(a, 0);
      Vec dx(lp.size());
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t j = 0; j < v; ++j) sum += dy[r * v + j];
        for (int64_t j = 0; j < v; ++j) dx[r * v + j] = dy[r * v + j] - std::exp(lp[r * v + j]) * sum;
      }
      deliver(a, 0, dx);
      return;
    }
    case Exec::kNll: {  // mean reduction: loss = -sum_t logp[t, label t] / total_weight
      const Vec labels = bwd ? saved(a.in[1]) : load(a.in[1]);
      if (!bwd) {
        const Vec lp = load(a.in[0]);
        double sum = 0;
        for (int64_t r = 0; r < rows; ++r) sum -= lp[r * v + static_cast<int64_t>(labels[r])];
        store(a.out[0], {sum / static_cast<double>(rows)});
        store(a.out[1], {static_cast<double>(rows)});
        return;
      }
      const double tw = saved(a.out[1])[0], dl = grad_out(a, 0)[0];
      Vec dx(static_cast<size_t>(rows * v), 0.0);
      for (int64_t r = 0; r < rows; ++r) dx[r * v + static_cast<int64_t>(labels[r])] = -dl / tw;
      deliver(a, 0, dx);
      return;
    }
    case Exec::kVocabCe: {  // Megatron vocab_parallel_cross_entropy on one rank, mean over tokens
      if (!bwd) {
        const Vec x = load(a.in[0]), labels = load(a.in[1]);
        const Vec lp = softmax_rows(x, true);
        Vec sm(lp.size());
        for (size_t i = 0; i < lp.size(); ++i) sm[i] = std::exp(lp[i]);
        double sum = 0;
        for (int64_t r = 0; r < rows; ++r) sum -= lp[r * v + static_cast<int64_t>(labels[r])];
        store(a.out[0], sm);
        store(a.out[1], {sum / static_cast<double>(rows)});
        return;
      }
      const Vec sm = saved(a.out[0]), labels = saved(a.in[1]);
      const double dl = grad_out(a, 1)[0];
      Vec dx(sm.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < v; ++j)
          dx[r * v + j] = (sm[r * v + j] - (j == static_cast<int64_t>(labels[r]) ? 1.0 : 0.0)) *
                          dl / static_cast<double>(rows);
      deliver(a, 0, dx);
      return;
    }
    default: return;
  }
}

// exec12 (issues 10, 13): HF's gelu_new as its pointwise ops (sim/src/ops.hpp Ops::gelu) and
// nanoGPT's slow-path mask (sim/src/graph_blocks.cpp core_attention), each with the backward
// torch's derivatives.yaml gives it from what it saves.
void CpuBackend::exec12(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  const double p = static_cast<double>(a.p);
  switch (a.exec) {
    case Exec::kPow: {  // pow.Tensor_Scalar: grad * p * self^(p - 1)
      const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]);
      if (!bwd) {
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = std::pow(x[i], p);
        return store(a.out[0], y);
      }
      Vec dx = grad_out(a, 0);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= p * std::pow(x[i], p - 1.0);
      return deliver(a, 0, dx);
    }
    case Exec::kTanh: {  // tanh: grad * (1 - result^2)
      if (!bwd) {
        Vec x = load(a.in[0]);
        for (double& v : x) v = std::tanh(v);
        return store(a.out[0], x);
      }
      const Vec y = saved(a.out[0]);
      Vec dx = grad_out(a, 0);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= 1.0 - y[i] * y[i];
      return deliver(a, 0, dx);
    }
    case Exec::kAddScalar: {
      if (bwd) return deliver(a, 0, grad_out(a, 0));
      Vec x = load(a.in[0]);
      for (double& v : x) v += p;
      return store(a.out[0], x);
    }
    case Exec::kEqZero: {  // self.bias[:, :, :T, :T] == 0
      if (bwd) return;
      const int64_t s = d[0], pos = d[1];
      const Vec b = load(a.in[0]);
      Vec m(static_cast<size_t>(s * s));
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j) m[i * s + j] = b[i * pos + j] == 0.0 ? 1.0 : 0.0;
      return store(a.out[0], m);
    }
    case Exec::kMaskedFill: {  // masked_fill(fill, -inf); MaskedFillBackward0 keeps `fill`
      const int64_t rows = d[0], s = d[1];
      const Vec fill = bwd ? saved(a.in[1]) : load(a.in[1]);
      Vec x = bwd ? grad_out(a, 0) : load(a.in[0]);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < s; ++j)
          if (fill[(r % s) * s + j] != 0.0) x[r * s + j] = bwd ? 0.0 : -INFINITY;
      if (bwd) return deliver(a, 0, x);
      return store(a.out[0], x);
    }
    default: throw ExecutionError("executor: exec12 reached with another kind");
  }
}

// exec12 (issue 13): HF's router (F.softmax, torch.topk, the renormalization) and its loop over
// experts (MixtralSparseMoeBlock.forward: one_hot, torch.where, the gathers, index_add_), as
// sim/src/blocks_moe.cpp hf_router and hf_loop build them; backward as derivatives.yaml gives it
// from what each node saves.
void CpuBackend::moe(const sim::OpArgs& a, bool bwd) {
  const auto& d = a.dim;
  auto at = [](const Vec& v, int64_t i) { return static_cast<int64_t>(v[static_cast<size_t>(i)]); };
  switch (a.exec) {
    case Exec::kTopK: {  // largest first; ties to the lower index
      const int64_t n = d[0], e = d[1], k = d[2];
      if (!bwd) {
        const Vec p = load(a.in[0]);
        Vec w(static_cast<size_t>(n * k)), idx(w.size());
        // exec13: forced (dim[3] 1): token r's candidates are the k experts the graph's counts
        // give it (executor.hpp forced_counts), ordered as topk orders its picks
        std::vector<int64_t> slots;
        if (d[3] == 1) {
          const std::vector<int64_t> c = forced_counts(g_, op_);
          for (int64_t j = 0; j < e; ++j) slots.insert(slots.end(), static_cast<size_t>(c[j]), j);
        }
        for (int64_t r = 0; r < n; ++r) {
          std::vector<int64_t> order;
          if (d[3] == 1) {
            for (int64_t j = 0; j < k; ++j) order.push_back(slots[static_cast<size_t>(r + j * n)]);
          } else {
            for (int64_t j = 0; j < e; ++j) order.push_back(j);
          }
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t x, int64_t y) { return p[r * e + x] > p[r * e + y]; });
          for (int64_t j = 0; j < k; ++j) {
            w[r * k + j] = p[r * e + order[j]];
            idx[r * k + j] = static_cast<double>(order[j]);
          }
        }
        store(a.out[0], w);
        return store(a.out[1], idx);
      }
      const Vec idx = saved(a.out[1]), dw = grad_out(a, 0);
      Vec dp(static_cast<size_t>(n * e), 0.0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k; ++j) dp[r * e + at(idx, r * k + j)] += dw[r * k + j];
      return deliver(a, 0, dp);
    }
    case Exec::kRowSum: {
      const int64_t n = d[0], k = d[1];
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec s(static_cast<size_t>(n), 0.0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < k; ++j) s[r] += x[r * k + j];
        return store(a.out[0], s);
      }
      const Vec ds = grad_out(a, 0);
      Vec dx(static_cast<size_t>(n * k));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k; ++j) dx[r * k + j] = ds[r];
      return deliver(a, 0, dx);
    }
    case Exec::kDivInPlace: {  // self /= other: d self = g / other, d other = -g self / other^2
      const int64_t n = d[0], k = d[1];
      if (!bwd) {
        const Vec x = load(a.in[0]), s = load(a.in[1]);
        Vec y(x.size());
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j < k; ++j) y[r * k + j] = x[r * k + j] / s[r];
        store(a.out[1], x);  // the original self, kept for the backward
        return store(a.out[0], y);
      }
      const Vec s = saved(a.in[1]), x = saved(a.out[1]), g = grad_out(a, 0);
      Vec dx(g.size()), ds(static_cast<size_t>(n), 0.0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k; ++j) {
          dx[r * k + j] = g[r * k + j] / s[r];
          ds[r] -= g[r * k + j] * x[r * k + j] / (s[r] * s[r]);
        }
      deliver(a, 0, dx);
      return deliver(a, 1, ds);
    }
    case Exec::kOneHot: {
      if (bwd) return;
      const int64_t n = d[0], k = d[1], e = d[2];
      const Vec idx = load(a.in[0]);
      Vec m(static_cast<size_t>(e * k * n), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < k; ++j) m[(at(idx, t * k + j) * k + j) * n + t] = 1.0;
      return store(a.out[0], m);
    }
    case Exec::kWhere: {
      if (bwd) return;
      const int64_t n = d[0], k = d[1], ex = d[2], ne = d[3];
      const Vec m = load(a.in[0]);
      Vec ids;
      for (int64_t j = 0; j < k; ++j)
        for (int64_t t = 0; t < n; ++t)
          if (m[(ex * k + j) * n + t] != 0.0) {
            ids.push_back(static_cast<double>(j));
            ids.push_back(static_cast<double>(t));
          }
      if (static_cast<int64_t>(ids.size()) != 2 * ne)
        throw ExecutionError("executor: op " + std::to_string(op_) + " (" + g_.ops[op_].name +
                             "): the router sent " + std::to_string(ids.size() / 2) +
                             " tokens to expert " + std::to_string(ex) + ", the graph " +
                             std::to_string(ne));
      return store(a.out[0], ids);
    }
    case Exec::kGatherRows: {  // IndexBackward0: index_put (accumulate) into zeros
      const int64_t ne = d[0], h = d[1];
      const Vec ids = bwd ? saved(a.in[1]) : load(a.in[1]);
      if (!bwd) {
        const Vec x = load(a.in[0]);
        Vec y(static_cast<size_t>(ne * h));
        for (int64_t i = 0; i < ne; ++i)
          for (int64_t c = 0; c < h; ++c) y[i * h + c] = x[at(ids, 2 * i + 1) * h + c];
        return store(a.out[0], y);
      }
      const Vec dy = grad_out(a, 0);
      Vec dx(static_cast<size_t>(numel(a.in[0])), 0.0);
      for (int64_t i = 0; i < ne; ++i)
        for (int64_t c = 0; c < h; ++c) dx[at(ids, 2 * i + 1) * h + c] += dy[i * h + c];
      return deliver(a, 0, dx);
    }
    case Exec::kGatherWeight: {  // routing_weights[top_x, idx, None]
      const int64_t ne = d[0], k = d[1];
      const Vec ids = bwd ? saved(a.in[1]) : load(a.in[1]);
      (void)(bwd ? saved(a.in[2]) : load(a.in[2]));  // the slots: the same [ne, 2] storage
      auto src = [&](int64_t i) { return at(ids, 2 * i + 1) * k + at(ids, 2 * i); };
      if (!bwd) {
        const Vec w = load(a.in[0]);
        Vec y(static_cast<size_t>(ne));
        for (int64_t i = 0; i < ne; ++i) y[i] = w[src(i)];
        return store(a.out[0], y);
      }
      const Vec dy = grad_out(a, 0);
      Vec dw(static_cast<size_t>(numel(a.in[0])), 0.0);
      for (int64_t i = 0; i < ne; ++i) dw[src(i)] += dy[i];
      return deliver(a, 0, dw);
    }
    case Exec::kIndexAdd: {  // in place into input 0's storage; its gradient passes as it is
      const int64_t ne = d[0], h = d[1];
      const Vec ids = bwd ? saved(a.in[2]) : load(a.in[2]);
      if (!bwd) {
        Vec out = load(a.in[0]);
        const Vec y = load(a.in[1]);
        for (int64_t i = 0; i < ne; ++i)
          for (int64_t c = 0; c < h; ++c) out[at(ids, 2 * i + 1) * h + c] += y[i * h + c];
        return store(a.out[0], out);
      }
      const Vec g = grad_out(a, 0);
      Vec dy(static_cast<size_t>(ne * h));
      for (int64_t i = 0; i < ne; ++i)
        for (int64_t c = 0; c < h; ++c) dy[i * h + c] = g[at(ids, 2 * i + 1) * h + c];
      deliver(a, 0, g);
      return deliver(a, 1, dy);
    }
    default: throw ExecutionError("executor: moe reached with another kind");
  }
}

// exec13 (issue 10): Transformer Engine's RMSNorm (NVIDIA/TransformerEngine @ d0067d0da6cb,
// common/normalization/rmsnorm/rmsnorm_fwd_kernels.cuh and rmsnorm_bwd_kernels.cuh, zero-centred
// gamma off): in fp32, rsigma = rsqrt(mean(x^2) + eps), y = x rsigma gamma; rsigma is written as
// fp32 [rows] (what the op saves beside x and gamma). Backward from the saved rsigma, as the bwd
// kernel does: y_hat = x rsigma, dgamma = sum_rows dy y_hat,
// dx = rsigma (dy gamma - y_hat mean(dy gamma y_hat)).
void CpuBackend::te_rms_norm(const sim::OpArgs& a, bool bwd) {
  const int64_t rows = a.dim[0], h = a.dim[1];
  const Vec x = bwd ? saved(a.in[0]) : load(a.in[0]), w = bwd ? saved(a.in[1]) : load(a.in[1]);
  if (!bwd) {
    Vec rs(static_cast<size_t>(rows)), y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < h; ++c) ss += x[r * h + c] * x[r * h + c];
      // as stored (fp32), so the output and the backward use the same rsigma
      rs[r] = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + kTeNormEps));
      for (int64_t c = 0; c < h; ++c) y[r * h + c] = x[r * h + c] * rs[r] * w[c];
    }
    store(a.out[0], y);
    return store(a.out[1], rs);
  }
  const Vec rs = saved(a.out[1]), dy = grad_out(a, 0);
  Vec dx(x.size()), dw(w.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0;
    for (int64_t c = 0; c < h; ++c) {
      const double yh = x[r * h + c] * rs[r];
      dw[c] += dy[r * h + c] * yh;
      m += dy[r * h + c] * w[c] * yh;
    }
    m /= static_cast<double>(h);
    for (int64_t c = 0; c < h; ++c)
      dx[r * h + c] = rs[r] * (dy[r * h + c] * w[c] - x[r * h + c] * rs[r] * m);
  }
  deliver(a, 0, dx);
  deliver(a, 1, dw);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Graph& graph, const StepOptions& options) {
  return std::make_unique<CpuBackend>(graph, options);
}

}  // namespace executor
