// Builds the Graph: the Builder's bookkeeping (storages, views, use counts, attribution), the
// static backward pass of the event protocol, and the persistent state per rank (DESIGN.md §3).
#include <algorithm>
#include <stdexcept>
#include <cmath>
#include <string>

#include "blocks_encdec.hpp"  // famenc
#include "blocks_famdec.hpp"  // famdec
#include "blocks_feat14.hpp"  // feat14 (issue 13)
#include "builder.hpp"
#include "deepspeed.hpp"  // hfds
#include "inductor.hpp"  // inductor (issue 10)
#include "sim/device.hpp"
#include "sim/error.hpp"

namespace sim {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kLayerNorm: return "layer_norm";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kLinear: return "linear";
    case OpKind::kBmm: return "bmm";
    case OpKind::kMask: return "mask";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kDropout: return "dropout";
    case OpKind::kGelu: return "gelu";
    case OpKind::kSilu: return "silu";
    case OpKind::kMul: return "mul";
    case OpKind::kAdd: return "add";
    case OpKind::kCast: return "cast";
    case OpKind::kCopy: return "copy";
    case OpKind::kSplit: return "split";
    case OpKind::kRope: return "rope";
    case OpKind::kFlashAttention: return "flash_attention";
    case OpKind::kLogSoftmax: return "log_softmax";
    case OpKind::kNllLoss: return "nll_loss";
    case OpKind::kVocabCe: return "vocab_parallel_cross_entropy";
  }
  return "?";
}

namespace detail {

int32_t Builder::fresh(int64_t bytes, DType dtype, const char* role, Category cat) {
  Storage s;
  s.bytes = bytes;
  s.dtype = dtype;
  s.category = cat;
  s.block = current_block;
  s.role = role;
  g_.storages.push_back(s);
  persistent_.push_back(false);
  Tensor t;
  t.storage = static_cast<int32_t>(g_.storages.size() - 1);
  t.bytes = bytes;
  t.dtype = dtype;
  tensors_.push_back(t);
  return static_cast<int32_t>(tensors_.size() - 1);
}

int32_t Builder::view(int32_t base, int64_t bytes, DType dtype, int32_t col, int32_t cols,
                      int32_t stride) {
  Tensor t = tensors_[base];
  t.bytes = bytes;
  t.dtype = dtype;
  t.col = col;
  t.cols = cols;
  t.stride = stride;
  tensors_.push_back(t);
  return static_cast<int32_t>(tensors_.size() - 1);
}

int32_t Builder::param(int64_t numel, DType dtype, const char* role) {
  // feat (LoRA): a frozen base weight is persistent but no parameter of the optimizer: the
  // backward computes no gradient for it (requires_grad=False) and holds no state.
  if (freeze_params) {
    const int32_t t = buffer(checked_mul(numel, bytes_of(dtype), "weights bytes"), dtype, role);
    g_.storages[tensors_[t].storage].frozen = true;  // feat3: sharded under ZeRO-3 / FSDP2
    if (expert_params) mark_expert(t);  // lora6
    return t;
  }
  int32_t t = fresh(checked_mul(numel, bytes_of(dtype), "weights bytes"), dtype, role,
                    Category::kWeights);
  int32_t s = tensors_[t].storage;
  if (expert_params) g_.storages[s].expert = true;  // lora6: marked where it is made
  persistent_[s] = true;
  g_.persistent.push_back(s);
  g_.param_storages.push_back(s);
  tensors_[t].param = true;
  tensors_[t].param_index = static_cast<int32_t>(params.size());
  params.push_back({t, tensors_[t].bytes, numel, -1});
  return t;
}

int32_t Builder::buffer(int64_t bytes, DType dtype, const char* role) {
  int32_t t = fresh(bytes, dtype, role, Category::kWeights);
  persistent_[tensors_[t].storage] = true;
  g_.persistent.push_back(tensors_[t].storage);
  return t;
}

int32_t Builder::causal_mask(int64_t bytes) {
  if (mask_ < 0) mask_ = buffer(bytes, DType::kBool, "causal mask buffer");
  return mask_;
}

int32_t Builder::global_buffer(int64_t bytes, DType dtype) {
  if (global_buffer_ < 0) {
    global_buffer_ = fresh(bytes, dtype, "global memory buffer", Category::kWorkspace);
    persistent_[tensors_[global_buffer_].storage] = true;
    g_.persistent.push_back(tensors_[global_buffer_].storage);
  }
  return global_buffer_;
}

void Builder::set_loss(int32_t t) {
  hold_until_step_end(t);
  loss_op_ = static_cast<int32_t>(drafts_.size() - 1);
  drafts_.back().root = true;
}

int32_t Builder::add_op(OpDraft draft) {
  const int32_t index = static_cast<int32_t>(drafts_.size());
  draft.op.block = current_block;
  if (ignore_transients) draft.op.fwd_transient_bytes = draft.op.bwd_transient_bytes = 0;
  for (int32_t t : draft.outputs) {
    Storage& s = g_.storages[tensors_[t].storage];
    if (s.producer < 0 && !persistent_[tensors_[t].storage]) {
      s.producer = index;
      s.block = current_block;
    }
  }
  drafts_.push_back(std::move(draft));
  return index;
}

namespace {

// Appends distinct values to g.idx, ascending, and returns their range.
template <typename V>
IdxRange push_sorted(Graph& g, V v) {
  std::sort(v.begin(), v.end());
  IdxRange r{static_cast<int32_t>(g.idx.size()), static_cast<int32_t>(v.size())};
  g.idx.insert(g.idx.end(), v.begin(), v.end());
  return r;
}

}  // namespace

void Builder::finalize() {
  const int32_t n_ops = static_cast<int32_t>(drafts_.size());
  const size_t n_st = g_.storages.size();
  using Ids = SmallVec<int32_t, 8>;
  std::vector<Ids> in_st(n_ops), pers_st(n_ops), out_st(n_ops), save_st(n_ops), allocs(n_ops), frees(n_ops);
  std::vector<int32_t> first_consumer(n_st, -1);
  g_.initial_uses.assign(n_st, 0);
  auto add_distinct = [](Ids& v, int32_t x) {
    for (int32_t y : v)
      if (y == x) return;
    v.push_back(x);
  };

  for (int32_t i = 0; i < n_ops; ++i) {
    const OpDraft& d = drafts_[i];
    for (const InputUse& u : d.inputs) {
      int32_t s = tensors_[u.tensor].storage;
      if (!persistent_[s]) add_distinct(in_st[i], s);
      else add_distinct(pers_st[i], s);  // ds3
    }
    for (int32_t s : in_st[i]) {
      ++g_.initial_uses[s];
      if (first_consumer[s] < 0) first_consumer[s] = i;
    }
    for (int32_t t : d.outputs) {
      int32_t s = tensors_[t].storage;
      if (g_.storages[s].producer == i) add_distinct(out_st[i], s);
    }
    for (int32_t t : d.saves) {
      int32_t s = tensors_[t].storage;
      if (!persistent_[s]) add_distinct(save_st[i], s);
    }
  }
  // Attribution (DESIGN.md §3 activation_bytes_per_layer): the block of a storage's first
  // forward consumer, else of its producer; model-level tensors belong to no block.
  for (size_t s = 0; s < n_st; ++s) {
    if (first_consumer[s] >= 0) g_.storages[s].block = drafts_[first_consumer[s]].op.block;
  }
  for (int32_t s : model_level_) g_.storages[s].block = -1;

  // Static backward pass: nodes in reverse forward order. slot[t] is the gradient storage of
  // tensor t; a storage is referenced by every slot that aliases it (AddBackward hands the same
  // buffer to both inputs) and freed when the last such slot has been consumed by its producer.
  std::vector<int32_t> slot(tensors_.size(), -1);
  std::vector<int32_t> gref(n_st, 0);
  std::vector<int64_t> accum(n_ops, 0);
  std::vector<bool> has_bwd(n_ops, false);
  g_.storages.reserve(n_st + static_cast<size_t>(n_ops) * 2);
  auto new_grad = [&](int32_t op, int64_t bytes, DType dt, Category cat, const char* role) {
    Storage s;
    s.bytes = bytes;
    s.dtype = dt;
    s.category = cat;
    s.block = drafts_[op].op.block;
    s.producer = op;
    s.role = role;
    g_.storages.push_back(s);
    gref.push_back(0);
    g_.initial_uses.push_back(0);
    return static_cast<int32_t>(g_.storages.size() - 1);
  };
  // Executor only: per op, each input's gradient delivery and each output's gradient storage.
  struct GradRoute {
    std::array<GradMode, 6> mode{};
    std::array<int32_t, 6> in{-1, -1, -1, -1, -1, -1};
    std::array<int32_t, 4> out{-1, -1, -1, -1};
  };
  std::vector<GradRoute> route(record_exec ? n_ops : 0);
  for (int32_t i = n_ops - 1; i >= 0; --i) {
    const OpDraft& d = drafts_[i];
    bool any = d.root;
    for (int32_t t : d.outputs) any = any || slot[t] >= 0;
    if (!any) continue;  // no gradient reaches this op: autograd never runs its node
    has_bwd[i] = true;
    for (int k = 0; k < d.inputs.size(); ++k) {
      const InputUse& u = d.inputs[k];
      // What this input's gradient does, for the executor (set before each `continue` below).
      auto routed = [&](GradMode m, int32_t target) {
        if (record_exec) route[i].mode[k] = m, route[i].in[k] = target;
      };
      if (u.rule == GradRule::kNone) continue;
      const Tensor& t = tensors_[u.tensor];
      if (persistent_[t.storage] && !t.param) continue;
      int32_t produced = -1;
      bool is_new = true;
      if (u.rule == GradRule::kPass) {
        int32_t src = slot[d.outputs[u.pass_from]];
        if (src < 0) continue;
        if (g_.storages[src].dtype == t.dtype) produced = src, is_new = false;
      }
      if (t.param) {
        Param& p = params[t.param_index];
        if (persistent_grads) {
          // Megatron main_grad (or a ZeRO-2/3 partition): the wgrad GEMM accumulates into it
          // directly (gradient-accumulation fusion); other ops make a gradient that is added in.
          if (!d.fused_wgrad) accum[i] += t.bytes;
          routed(GradMode::kMainGrad, t.param_index);
          continue;
        }
        if (p.grad_storage < 0) {  // lazy: first touch allocates param.grad (set_to_none before)
          p.grad_storage = new_grad(i, t.bytes, t.dtype, Category::kGrads, "parameter grad");
          allocs[i].push_back(p.grad_storage);
          g_.step_end_frees.push_back(p.grad_storage);
          routed(GradMode::kWrite, p.grad_storage);
        } else if (is_new) {
          accum[i] += t.bytes;  // AccumulateGrad adds into the existing .grad
          routed(GradMode::kAccum, p.grad_storage);
        }
        continue;
      }
      if (slot[u.tensor] < 0) {
        if (is_new) {
          produced = new_grad(i, t.bytes, t.dtype, Category::kActGrads, "activation grad");
          allocs[i].push_back(produced);
        }
        routed(is_new ? GradMode::kWrite : GradMode::kAlias, produced);
        slot[u.tensor] = produced;
        ++gref[produced];
      } else {
        // accumulated in place into the first arrival (a passed-on gradient too), then freed
        if (is_new) accum[i] += t.bytes;
        routed(GradMode::kAccum, slot[u.tensor]);
      }
    }
    for (int k = 0; k < d.outputs.size(); ++k) {
      const int32_t t = d.outputs[k];
      int32_t gs = slot[t];
      if (record_exec) route[i].out[k] = gs;
      if (gs < 0) continue;
      slot[t] = -1;
      if (--gref[gs] == 0) frees[i].push_back(gs);
    }
  }

  g_.ops.clear();
  g_.ops.reserve(n_ops);
  g_.idx.reserve(static_cast<size_t>(n_ops) * 8);
  std::vector<char> param_seen(n_st, 0);
  for (int32_t i = 0; i < n_ops; ++i) {
    Op op = drafts_[i].op;
    op.has_backward = has_bwd[i];
    // Parameters first read here: their gradients are complete after this op's backward.
    for (const InputUse& u : drafts_[i].inputs) {
      const Tensor& x = tensors_[u.tensor];
      if (!x.param || param_seen[x.storage]) continue;
      param_seen[x.storage] = 1;
      const Storage& st = g_.storages[x.storage];
      op.param_numel += st.bytes / bytes_of(st.dtype);
      if (st.expert) op.expert_param_numel += st.bytes / bytes_of(st.dtype);  // moetp
    }
    // An op autograd does not record saves nothing (no node holds the tensors).
    if (!has_bwd[i]) save_st[i].clear();
    op.inputs = push_sorted(g_, in_st[i]);
    op.persistent_reads = push_sorted(g_, pers_st[i]);  // ds3
    op.outputs = push_sorted(g_, out_st[i]);
    op.saves = push_sorted(g_, save_st[i]);
    op.bwd_allocs = push_sorted(g_, allocs[i]);
    op.bwd_frees = push_sorted(g_, frees[i]);
    op.bwd_accum_bytes = ignore_transients ? 0 : accum[i];
    // Bytes moved (DESIGN.md §5): forward reads its inputs and writes its outputs; backward
    // reads gradients of outputs and saved tensors and writes gradients of inputs.
    int64_t fb = 0, bb = 0;
    for (const InputUse& u : drafts_[i].inputs) fb += tensors_[u.tensor].bytes;
    for (int32_t t : drafts_[i].outputs) fb += tensors_[t].bytes;
    for (int32_t t : drafts_[i].saves) bb += tensors_[t].bytes;
    for (int32_t s : allocs[i]) bb += g_.storages[s].bytes;
    for (int32_t s : frees[i]) bb += g_.storages[s].bytes;
    op.fwd.bytes = fb + drafts_[i].fwd_inner_bytes;  // time3: + intermediates' traffic
    op.bwd.bytes = bb + op.bwd_accum_bytes * 2 + drafts_[i].bwd_inner_bytes;
    // --- time7 (issue 11): --deterministic (Megatron's --deterministic-mode). Under
    // torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (torch's default)
    // the dispatcher's empty_cuda fills each new tensor with NaN before it is returned
    // (aten/src/ATen/native/cuda/TensorFactories.cu; TensorFactories.h fill_empty_deterministic_:
    // one fill_ kernel writing the tensor). Structured ATen kernels allocate their outputs through
    // at::detail::empty_cuda, which does not fill (torchgen/dest/register_dispatch_key.py
    // gen_empty_impl_names), so the fill falls on code that calls at::empty / torch.empty itself:
    // Transformer Engine's modules (transformer_engine/pytorch/csrc/quantizer.cpp
    // NoneQuantizer::create_tensor -> at::empty for GEMM, LayerNorm and fused-attention outputs
    // and their gradients). Modeled on the TE layer spec's ops: linears other than the output
    // layer (Megatron's own ColumnParallelLinear, torch.matmul), the fused attention and the
    // LayerNorm: forward, one write of every storage the op allocates; backward, one of every
    // gradient it makes (allocated, or made and then added in). One launch per forward output;
    // backward, one per allocated gradient and one for the added ones together. Not counted:
    // torch.empty in Megatron's own code (SP gathers, none in a run without SP) and cuDNN's and
    // cuBLAS's workspaces.
    if (deterministic_fill && !local_spec &&  // tece: the local spec has no TE op
        ((drafts_[i].exec == Exec::kLinear && op.site != LinearSite::kLmHead) ||
         drafts_[i].exec == Exec::kFlash || drafts_[i].exec == Exec::kLayerNorm ||
         drafts_[i].te_alloc)) {  // tece: TE's RMSNorm (norm_te.cpp)
      int64_t fwd_fill = 0, bwd_fill = accum[i];
      for (int32_t s : out_st[i]) fwd_fill += g_.storages[s].bytes;
      for (int32_t s : allocs[i]) bwd_fill += g_.storages[s].bytes;
      op.fwd_serial_bytes += fwd_fill;
      op.fwd_serial_kernels += static_cast<int32_t>(out_st[i].size());
      if (has_bwd[i]) {
        op.bwd_serial_bytes += bwd_fill;
        op.bwd_serial_kernels += static_cast<int32_t>(allocs[i].size()) + (accum[i] > 0 ? 1 : 0);
      }
    }
    // --- end time7 ---
    // Kernel-class shapes (DESIGN.md §5): a linear's rows are those its matmul runs on (the
    // gathered sequence under SP), recovered exactly from its 2 m n k FLOPs.
    const OpDraft& dr = drafts_[i];
    if (dr.exec == Exec::kLinear && dr.dim[1] > 0 && dr.dim[2] > 0 && op.fwd.flops > 0) {
      op.shape = {op.fwd.flops / (2 * dr.dim[1] * dr.dim[2]), dr.dim[1], dr.dim[2], 0, 0};
    } else if (dr.exec == Exec::kQk || dr.exec == Exec::kAv) {  // shape[4]: 1 qk, 2 av
      op.shape = {dr.dim[0], dr.dim[1], dr.dim[2], dr.dim[3], dr.exec == Exec::kQk ? 1 : 2};
    } else if (dr.exec == Exec::kFlash) {
      op.shape = {dr.dim[0], dr.dim[1], dr.dim[2], dr.dim[3], dr.dim[5]};
      op.attn_dropout = dr.p;  // time9 (issue 11): dropout inside the kernel, timed (kernels.cpp)
    }
    g_.ops.push_back(op);
  }
  if (record_exec) {
    g_.args.resize(n_ops);
    auto ref = [&](int32_t t) {
      const Tensor& x = tensors_[t];
      TensorRef r;
      r.storage = x.storage;
      r.col = x.col, r.cols = x.cols, r.stride = x.stride;
      return r;
    };
    for (int32_t i = 0; i < n_ops; ++i) {
      const OpDraft& d = drafts_[i];
      OpArgs& a = g_.args[i];
      a.exec = d.exec;
      a.dim = d.dim;
      a.p = d.p;
      a.root = d.root;
      a.n_in = static_cast<uint8_t>(d.inputs.size());
      a.n_out = static_cast<uint8_t>(d.outputs.size());
      for (int k = 0; k < d.inputs.size(); ++k) {
        a.in[k] = ref(d.inputs[k].tensor);
        if (has_bwd[i]) a.in[k].mode = route[i].mode[k], a.in[k].grad = route[i].in[k];
      }
      for (int k = 0; k < d.outputs.size(); ++k) {
        a.out[k] = ref(d.outputs[k]);
        a.out[k].grad = has_bwd[i] ? route[i].out[k] : -1;
      }
    }
    g_.param_grads.clear();
    for (const Param& p : params) g_.param_grads.push_back(p.grad_storage);
  }
  g_.autocast_cached.clear();
  for (int32_t s : autocast_cached_) g_.autocast_cached.push_back(s);
  g_.forward_held.assign(forward_held_.begin(), forward_held_.end());  // hfimpl
  for (int32_t s : step_end_holds) g_.step_end_frees.push_back(s);
}

// Per-storage consumer lists (CSR in g.idx), for the scheduler's replay-use counts.
void index_consumers(Graph& g) {
  const size_t n = g.storages.size();
  g.initial_uses.resize(n, 0);
  g.consumers.assign(n, IdxRange{});
  int32_t at = static_cast<int32_t>(g.idx.size());
  for (size_t s = 0; s < n; ++s) {
    g.consumers[s] = {at, 0};
    at += g.initial_uses[s];
  }
  g.idx.resize(static_cast<size_t>(at));
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    const Op& op = g.ops[i];
    for (int32_t k = 0; k < op.inputs.count; ++k) {
      IdxRange& c = g.consumers[g.idx[op.inputs.begin + k]];
      g.idx[c.begin + c.count++] = i;
    }
  }
}

}  // namespace detail

namespace {

using detail::Builder;
using detail::Dims;

Dims make_dims(const ModelConfig& m, const TrainSetup& s) {
  Dims dm;
  dm.model = &m;
  dm.profile = s.profile;
  dm.paper = s.profile == Profile::kPaper;
  dm.precision = resolved_precision(s);
  dm.attention = resolved_attention(s);
  dm.impl = s.impl ? &spec(*s.impl, s.impl_version) : nullptr;  // implver: the release
  dm.amp = dm.precision == Precision::kBf16Amp || dm.precision == Precision::kFp16Amp;
  dm.b = s.micro_batch;
  // feat: context parallelism gives each rank s / cp tokens of every sequence (2 cp chunks,
  // load-balanced, when causal): every token-wise shape is the local one.
  dm.cp = s.cp;
  dm.fp8 = s.fp8;
  dm.padding = s.padding;  // hfimpl
  dm.triton_norm = s.norm_kernel == NormKernel::kTriton;  // time5 (issue 11)
  dm.compile = s.compile;  // fp8sac (issue 10)
  dm.grad_accum_fusion = s.grad_accum_fusion;             // time6 (issue 11)
  dm.ce_loss_fusion = s.cross_entropy_loss_fusion;        // te_norm (issue 10)
  dm.local_spec = s.local_spec;                           // tece (issue 10)
  dm.s = s.seq / s.cp;
  dm.t = s.tp;
  dm.sp = s.sp && s.tp > 1;
  dm.s_local = dm.sp ? dm.s / s.tp : dm.s;
  dm.h = m.hidden;
  dm.a = m.heads / s.tp;
  dm.g = m.kv_heads % s.tp == 0 ? m.kv_heads / s.tp : 1;  // fewer KV heads than ranks: replicated
  dm.d = m.head_dim;
  dm.f = m.ffn_hidden / s.tp;
  // Megatron pads the vocabulary to a multiple of 128 * t (--make-vocab-size-divisible-by 128,
  // megatron/training/vocab_utils.py:58 @ d98e8a6), at every t: the implementation's
  // vocab_multiple. The paper profile pads only vocab-parallel layers (t > 1).
  const int64_t pad = dm.impl ? dm.impl->vocab_multiple : (s.tp > 1 ? 128 : 0);
  const int64_t mult = pad * s.tp;
  dm.v_full = mult > 0 ? (m.vocab + mult - 1) / mult * mult : m.vocab;
  dm.v = dm.v_full / s.tp;
  switch (dm.precision) {
    case Precision::kBf16Mixed:
    case Precision::kFsdp2Bf16:  // the ops see the all-gathered bf16 parameters (no autocast)
    case Precision::kDeepspeedBf16:  // hfds: the module cast to bf16 (no autocast)
      dm.param_dt = DType::kBF16, dm.half_dt = DType::kBF16, dm.resid_dt = DType::kBF16;
      break;
    case Precision::kBf16Amp:
      dm.param_dt = DType::kF32, dm.half_dt = DType::kBF16, dm.resid_dt = DType::kF32;
      break;
    case Precision::kFp16Amp:
      dm.param_dt = DType::kF32, dm.half_dt = DType::kF16, dm.resid_dt = DType::kF32;
      break;
    case Precision::kFp32:
      dm.param_dt = DType::kF32, dm.half_dt = DType::kF32, dm.resid_dt = DType::kF32;
      break;
  }
  // feat3 (issue 13): QLoRA without autocast (bf16-mixed: a bf16 load, the Trainer's bf16 off).
  // prepare_model_for_kbit_training (peft utils/other.py @ 5d602fdb) casts every parameter that
  // is not 4-bit to fp32 (embeddings, norms, the lm head), so every op outside the 4-bit matmuls
  // runs in fp32, as under --precision fp32; Linear4bit casts its input to the compute dtype and
  // its output back (bitsandbytes nn/modules.py @ 95f9af30). The persistent state stays
  // bf16-mixed's (g.precision): fp32 adapters, no master copy.
  dm.qlora_compute_dt = dm.half_dt;
  if (s.qlora && dm.precision == Precision::kBf16Mixed) {
    dm.precision = Precision::kFp32;
    dm.param_dt = dm.half_dt = dm.resid_dt = DType::kF32;
    dm.qlora_compute_dt = DType::kBF16;
  }
  dm.p_attn = s.dropout ? *s.dropout : m.attn_dropout;
  if (m.no_attention_dropout) dm.p_attn = 0.0;  // census12: Falcon's rotary attention
  dm.p_hidden = s.dropout ? *s.dropout : m.hidden_dropout;
  dm.p_embd = s.dropout ? *s.dropout : m.embd_dropout;
  dm.p_classifier = s.dropout ? *s.dropout : m.classifier_dropout;  // implhf
  // Q/K/V as the implementation projects them; as the architecture's own code (GPT-2 and
  // Megatron's GPT fuse them into one projection; Llama-family and BERT use three) by default.
  const QkvVariant qkv = dm.impl ? dm.impl->qkv : QkvVariant::kArchitecture;
  dm.fused_qkv = qkv == QkvVariant::kFused ||
                 (qkv == QkvVariant::kArchitecture &&
                  (m.family == "gpt2" || m.family == "megatron-gpt" || m.fused_qkv));  // famdec
  // Eager attention's matmuls: copies of permuted operands (torch.matmul) or strided batched
  // GEMMs on views (Megatron's baddbmm; the paper profile's).
  dm.eager_copies = dm.impl && dm.impl->eager_matmul == EagerMatmul::kCopies;
  // implmt: Megatron's and torchtitan's op variants (sim/impl.hpp); the paper profile's loss is
  // Megatron's (Korthikanti §4.3).
  dm.vocab_parallel_ce = dm.paper || s.tp > 1 ||
                         (dm.impl && dm.impl->loss == LossVariant::kVocabParallel);
  dm.megatron_softmax = dm.impl && dm.impl->eager_softmax == EagerSoftmax::kMegatronFused;
  dm.qk_global_buffer = dm.impl && dm.impl->qk_global_buffer;
  // moe
  dm.ep = s.ep;
  dm.moe_imbalance = s.moe_imbalance;
  dm.moe_aux_loss_coeff = s.moe_aux_loss_coeff;  // mla5
  dm.moe_capacity = s.moe_capacity.value_or(0.0);
  dm.etp = is_moe(*dm.model) ? resolved_etp(s) : 1;  // etp (issue 13)
  dm.shared_overlap = s.moe_shared_expert_overlap;    // moetp (issue 13)
  // feat (issue 13): LoRA / QLoRA
  dm.lora_rank = s.lora_rank;
  dm.lora_targets = s.lora_targets;
  dm.qlora = s.qlora;
  dm.lora_dropout = s.lora_dropout;  // feat13
  return dm;
}

// Persistent state per rank (DESIGN.md §3 precision table; Megatron-LM
// theoretical_memory_usage.py: 18 B/param, distributed optimizer 6 + 12/d).
void add_persistent_state(Graph& g, const ModelConfig& model, const TrainSetup& s,
                          const Device& dev) {
  const char* f = "persistent bytes";
  const Precision prec = g.precision;
  int64_t numel = 0, max_block_weights = 0;
  std::vector<int64_t> block_weights(static_cast<size_t>(g.n_blocks), 0);
  for (int32_t sid : g.param_storages) {
    const Storage& st = g.storages[sid];
    numel = checked_add(numel, st.bytes / bytes_of(st.dtype), f);
    // weights of a block: those created while building it
    if (st.block >= 0 && st.block < g.n_blocks) block_weights[st.block] += st.bytes;
  }
  // feat3 (issue 13): LoRA's frozen base parameters (Storage::frozen) are no optimizer
  // parameters, but ZeRO-3 and FSDP2 shard and all-gather them with the trainable ones:
  // DeepSpeed stage 3 partitions every module parameter (partition_parameters.py
  // _convert_to_zero_parameters over module.parameters()), FSDP2's fully_shard every parameter
  // of the module (_fsdp_param_group.py: one FSDPParam per parameter, requires_grad or not).
  // They have no gradient, so nothing of theirs is reduce-scattered or kept in the optimizer.
  std::vector<int32_t> sharded_params(g.param_storages);
  const bool shards_params = prec == Precision::kFsdp2Bf16 || s.zero >= 3;
  if (shards_params)
    for (int32_t sid : g.persistent)
      if (g.storages[sid].frozen) {
        sharded_params.push_back(sid);
        const Storage& st = g.storages[sid];
        if (st.block >= 0 && st.block < g.n_blocks) block_weights[st.block] += st.bytes;
      }
  for (int64_t w : block_weights) max_block_weights = std::max(max_block_weights, w);
  g.params_per_rank = numel;
  // feat: context-parallel ranks hold the same weights; Megatron's distributed optimizer and
  // torchtitan's FSDP shard over the data-parallel group with cp (dp x cp ranks).
  const int64_t d = s.dp * s.cp;
  auto add = [&](int64_t bytes, Category cat, const char* role) {
    if (bytes <= 0) return;
    Storage st;
    st.bytes = bytes;
    st.dtype = DType::kF32;
    st.category = cat;
    st.role = role;
    g.storages.push_back(st);
    g.initial_uses.push_back(0);
    g.persistent.push_back(static_cast<int32_t>(g.storages.size() - 1));
  };
  int64_t weights = 0, buffers = 0;
  for (int32_t sid : g.persistent)
    (g.storages[sid].category == Category::kWorkspace ? buffers : weights) += g.storages[sid].bytes;
  // hfds (issue 10): HF's Trainer under DeepSpeed: weights, gradients and buckets per stage
  // (sim/src/deepspeed.cpp); the optimizer state below, partitioned at every stage.
  const bool deepspeed = prec == Precision::kDeepspeedBf16;
  detail::DeepspeedStep ds_step;
  if (deepspeed)
    ds_step = detail::add_deepspeed_state(g, model, s, sharded_params, numel, add);
  // FSDP2 (torchtitan parallelize_llama.py apply_fsdp @ 9dec370, MixedPrecisionPolicy(
  // param_dtype=bf16, reduce_dtype=fp32)): the sharded parameters are fp32 (4 B per parameter
  // over d ranks, torch/distributed/_composable/fsdp/_fsdp_param.py: the sharded param keeps
  // the module's dtype); compute runs on bf16 all-gathered copies (the graph's bf16 weights).
  // The root module (embedding, final norm, output) is gathered at the forward's start and
  // resharded after it, and gathered again for the whole backward (its post-backward runs
  // last): its bf16 copy is counted live throughout, beside the current and prefetched block.
  if (deepspeed) {
    // hfds: done above
  } else if (prec == Precision::kFsdp2Bf16) {
    int64_t root = 0;
    for (int32_t sid : sharded_params) {  // feat3: the frozen ones too
      Storage& st = g.storages[sid];
      if (st.block < 0 || st.block >= g.n_blocks) root = checked_add(root, st.bytes, f);
      st.bytes = checked_mul(st.bytes / bytes_of(st.dtype), 4, f) / d;  // fp32 shard
      st.dtype = DType::kF32;
    }
    // feat: torchao tensorwise fp8 with enable_fsdp_float8_all_gather gathers the blocks' linear
    // weights in fp8 (1 B instead of 2; the norms' small share is counted at 1 B too)
    if (s.fp8 == Fp8Recipe::kTorchaoTensorwise) max_block_weights /= 2;
    add(checked_add(checked_mul(2, max_block_weights, f), root, f), Category::kComm,
        "FSDP2 all-gathered bf16 parameters (root, current and prefetched block)");
    weights = 0;
    for (int32_t sid : g.persistent)
      if (g.storages[sid].category == Category::kWeights) weights += g.storages[sid].bytes;
  } else if (s.zero >= 3) {
    // ZeRO-3 shards the parameters (not the buffers: every rank keeps its causal mask); the
    // current and the prefetched block are gathered whole.
    for (int32_t sid : sharded_params) g.storages[sid].bytes /= d;  // feat3: frozen ones too
    add(checked_mul(2, max_block_weights, f), Category::kComm, "ZeRO-3 gathered weights");
    weights = 0;
    for (int32_t sid : g.persistent)
      if (g.storages[sid].category == Category::kWeights) weights += g.storages[sid].bytes;
  }
  if (!deepspeed) g.weights_bytes = weights;

  // Gradients: fp32, one per parameter.
  const int64_t grad_all = checked_mul(4, numel, f);
  if (deepspeed) {
    // hfds: add_deepspeed_state's
  } else if (prec == Precision::kBf16Mixed) {
    g.grads_bytes = s.zero >= 2 ? grad_all / d : grad_all;
    add(g.grads_bytes, Category::kGrads, "main_grad buffer (fp32)");
  } else if (s.zero >= 2 || prec == Precision::kFsdp2Bf16) {
    // FSDP2: reduce_dtype fp32, the reduce-scattered gradient is the fp32 shard's .grad
    g.grads_bytes = grad_all / d;
    add(g.grads_bytes, Category::kGrads, "partitioned grads (fp32)");
  } else if (!resolved_set_to_none(s)) {
    // zero_grad(set_to_none=False) (torch < 2.0's default, HF's Trainer of early 2022): every
    // .grad, allocated by the first step's backward, is zeroed in place and kept.
    g.grads_bytes = grad_all;
    add(grad_all, Category::kGrads, "parameter grads (zeroed, kept: --set-to-none off)");
    if (d > 1) add(grad_all, Category::kComm, "DDP gradient buckets");
  } else if (s.microbatches > 1) {
    // Gradient accumulation: from the second micro-batch on, every .grad exists (allocated by
    // the first micro-batch's backward, kept until zero_grad after the optimizer step).
    g.grads_bytes = grad_all;
    add(grad_all, Category::kGrads, "parameter grads (accumulated over micro-batches)");
    if (d > 1) add(grad_all, Category::kComm, "DDP gradient buckets");
  } else {
    g.grads_bytes = grad_all;  // allocated lazily during backward
    if (d > 1) add(grad_all, Category::kComm, "DDP gradient buckets");
  }

  // Optimizer state, per parameter: Adam m and v (8 B), SGD momentum (4 B), plus fp32 master
  // weights when the parameters are bf16 (bf16-mixed).
  const Optimizer optim = resolved_optimizer(s);  // implver: the implementation's default
  int64_t per_param = optim == Optimizer::kSgd ? 4 : 8;
  // moe2: LoRA's trainable adapters are fp32 under bf16-mixed (PEFT upcasts them): no master copy
  if (prec == Precision::kBf16Mixed && g.lora_rank == 0) per_param += 4;
  // hfds: DeepSpeed's fp32 master partition (every stage, BF16_Optimizer's too), LoRA's included
  if (deepspeed) per_param += 4;
  int64_t opt = checked_mul(per_param, numel, f);
  const bool sharded = s.zero >= 1 || prec == Precision::kFsdp2Bf16 || deepspeed;
  // etp (issue 13): Megatron's expert grid is etp x ep x edp x pp over the same world as
  // tp x cp x dp x pp (megatron/core/parallel_state.py @ d98e8a64 initialize_model_parallel,
  // expert_data_parallel_size = world_size // (etp * ep * pp)): edp = tp cp dp / (etp ep)
  const int64_t etp = is_moe(model) ? resolved_etp(s) : 1;
  if (sharded && (s.ep > 1 || etp != s.tp)) {
    // moe: a routed expert's state is sharded over its expert-data-parallel group, dp / ep ranks
    // (Megatron's distributed optimizer per expert_data_parallel_group); the rest over dp
    int64_t expert = 0;
    for (int32_t sid : g.param_storages)
      if (g.storages[sid].expert) expert += g.storages[sid].bytes / bytes_of(g.storages[sid].dtype);
    const int64_t edp = d * s.tp / (etp * s.ep);
    opt = checked_mul(per_param, numel - expert, f) / d +
          checked_mul(per_param, expert, f) / edp;
  } else if (sharded) {
    opt /= d;
  }
  if (prec == Precision::kFp16Amp) opt += 8;  // GradScaler: fp32 scale + int32 growth tracker
  g.optimizer_bytes = opt;
  add(opt, Category::kOptimizer, "optimizer state");

  // Foreach Adam allocates sqrt(v) for the whole group (torch/optim/adam.py _multi_tensor_adam:
  // exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)), and torch 1.13 also the
  // out-of-place `denom` (ImplSpec::foreach_eps); per group, so the largest group's (the
  // implementation's param_groups); fused Adam and SGD none.
  const int64_t shard = sharded ? numel / d : numel;
  int64_t per_foreach = 4, group = shard;
  if (g.impl && g.profile != Profile::kPaper) {
    const ImplSpec& im = spec(*g.impl, s.impl_version);
    const bool eager = s.attention && *s.attention == AttentionKind::kStandard;
    if ((eager ? im.foreach_eps_eager : im.foreach_eps) == ForeachEps::kOutOfPlace)
      per_foreach = 8;
    // feat: under LoRA the trainable parameters are the adapters' matrices, one group.
    if (im.param_groups == ParamGroups::kDecayNoDecay && numel > 0 && g.lora_rank == 0) {
      const int64_t vec = vector_parameter_count(model);
      const int64_t all = parameter_count(model);
      // the larger group, as a share of this rank's shard
      const int64_t larger = std::max(vec, all - vec);
      group = shard == all ? larger
                           : static_cast<int64_t>(std::llround(static_cast<double>(shard) *
                                                               static_cast<double>(larger) /
                                                               static_cast<double>(all)));
    }
  }
  g.optimizer_transient_bytes =
      optim == Optimizer::kAdamForeach && g.profile != Profile::kPaper
          ? checked_mul(per_foreach, group, f)
          : 0;
  // A per-parameter loop: HF's adamw_hf (transformers optimization.py AdamW.step:
  // `denom = exp_avg_sq.sqrt().add_(eps)`) holds one fp32 temporary of the parameter being
  // updated, so the largest parameter's (the word embeddings, typically). torch's single-tensor
  // AdamW (torch/optim/adamw.py _single_tensor_adamw, 1.13 line 316 and 2.x alike:
  // `(exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`) holds two at the division: the
  // release's ImplSpec::loop_temporaries (implver; measured: validation/real-code/nanogpt-optimizer.csv).
  if (optim == Optimizer::kAdamLoop && g.profile != Profile::kPaper) {
    int64_t largest = 0;
    for (int32_t sid : g.param_storages)
      largest = std::max(largest, g.storages[sid].bytes / bytes_of(g.storages[sid].dtype));
    if (s.zero >= 1) largest /= d;
    if (deepspeed) largest = shard;  // hfds: AdamW sees one flat fp32 partition per group
    const int64_t temps = g.impl ? spec(*g.impl, s.impl_version).loop_temporaries : 1;
    g.optimizer_transient_bytes = checked_mul(4 * temps, largest, f);
  }
  // hfds: DeepSpeed's fp32 gradient partition beside the optimizer's temporaries, or its
  // all-reduce copy before the step (sim/src/deepspeed.cpp)
  if (deepspeed)
    g.optimizer_transient_bytes =
        std::max(checked_add(g.optimizer_transient_bytes, ds_step.with_optimizer, f),
                 ds_step.before_step);
  // Bytes moved per parameter of the shard: foreach Adam runs lerp_(m), mul_(v), addcmul_(v),
  // sqrt, div_, add_, addcdiv_(p) and the decoupled weight decay mul_(p): 80 B; fused Adam reads
  // and writes p, m, v and reads g: 28 B; SGD with momentum: 20 B; bf16 params add a 2 B copy.
  int64_t moved = optim == Optimizer::kAdamForeach || optim == Optimizer::kAdamLoop ? 80
                  : optim == Optimizer::kAdamFused ? 28 : 20;
  if (prec == Precision::kBf16Mixed && g.lora_rank == 0) moved += 2;  // moe2: LoRA's are fp32
  if (deepspeed) moved += 2;  // hfds: the bf16 partition copied from the fp32 master
  // --- time9 (issue 11): gradient-norm clipping before the update, on by default in every code
  // base modeled (Megatron --clip-grad 1.0, arguments.py, also set by the functional tests'
  // model_config.yaml; torchtitan training.max_norm 1.0 with clip_grad_norm_(foreach=True);
  // HF Trainer max_grad_norm 1.0; nanoGPT grad_clip 1.0; Megatron 2021 likewise). torch's
  // clip_grad_norm_ (torch/nn/utils/clip_grad.py): _foreach_norm reads every gradient of the
  // shard once, then _foreach_mul_ by the clamped coefficient reads and writes it again, always;
  // Megatron's clip_grads.py: multi_tensor_l2norm, then multi_tensor_scale when the norm exceeds
  // the threshold (ASSUMPTION: it does, as early in training; the golden values do not log the
  // norm). The gradients the optimizer reads are fp32 under every precision modeled (main_grad,
  // FSDP2's fp32 shards, autocast's fp32 parameters, DeepSpeed's fp32 partition): 4 + 8 B per
  // element of the shard. Left out: the few scalar kernels (stack, norm of norms, coefficient,
  // clamp) and the norm's one-element all-reduce, microseconds each. ---
  moved += 12;
  // --- end time9 ---
  g.optimizer_cost.bytes = checked_mul(moved, shard, f);
  // time (issue 11): adam-loop launches these 8 per parameter tensor (HF's adamw_hf, transformers
  // optimization.py AdamW.step: mul_, add_, mul_, addcmul_, sqrt, add_, addcdiv_, add_ per p);
  // foreach runs them as 8 multi_tensor_apply calls; fused Adam as one.
  g.optimizer_cost.kernels =
      optim == Optimizer::kAdamForeach || optim == Optimizer::kAdamLoop ? 8 : 1;
  g.optimizer_multi_tensor = optim != Optimizer::kAdamLoop;

  // cuBLAS workspace: allocated at the first matmul through the allocator, kept (steady state).
  int64_t cublas = g.profile == Profile::kPaper ? 0 : dev.cublas_workspace_bytes;
  // --- tece (issue 10): Megatron's --deterministic-mode sets CUBLAS_WORKSPACE_CONFIG=:4096:8
  // unless the launcher set it (megatron/training/determinism.py @ d98e8a64dd:27-31,
  // apply_determinism_env's setdefault), and PyTorch sizes its workspace from that variable on
  // every GPU (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize: the sum of
  // size_KiB x count over the ":SIZE:COUNT" pairs): 8 x 4096 KiB = 32 MiB, where the device
  // file's figure is PyTorch's default for its architecture (8,519,680 B on an A100). ---
  if (cublas > 0 && s.deterministic) cublas = int64_t{8} * 4096 * 1024;
  // Transformer Engine's own cuBLAS workspace under the TE layer spec: its GEMMs take
  // get_cublas_workspace (transformer_engine/pytorch/cpp_extensions/gemm.py:40-67 @ d0067d0da6cb,
  // lru_cache'd torch.empty: allocated at the first TE GEMM and kept): 32 MiB + 1 KiB on sm_90
  // and later, 4 MiB before. The output layer (Megatron's ColumnParallelLinear, torch.matmul)
  // still uses PyTorch's. Not counted: the per-stream workspaces of TE's grouped GEMM (MoE).
  int64_t te_cublas = 0;
  if (g.profile != Profile::kPaper && g.impl && spec(*g.impl, s.impl_version).te_norms &&
      !s.local_spec)
    te_cublas = dev.sm_arch >= 90 ? int64_t{32} * 1024 * 1024 + 1024 : int64_t{4'194'304};
  if (te_cublas > 0) add(te_cublas, Category::kWorkspace, "TE cuBLAS workspace");
  // --- end tece ---
  if (cublas > 0) add(cublas, Category::kWorkspace, "cuBLAS workspace");
  g.workspace_bytes = cublas + te_cublas + buffers;  // and Megatron's global memory buffer (graph_blocks.cpp)
  int64_t comm = 0;
  for (int32_t sid : g.persistent)
    if (g.storages[sid].category == Category::kComm) comm += g.storages[sid].bytes;
  g.comm_persistent_bytes = comm;
}


// torchtitan's op-level SAC policy (torchtitan/parallelisms/parallelize_llama.py @ 9dec370,
// _get_custom_policy): a counter per checkpoint context (one block) counts aten.mm calls, and
// every op of _save_list is saved "except every second mm" (count % 2 == 0): of a Llama block's
// wq, wk, wv, wo, w1, w3, w2 the outputs of wq, wv, w1 and w2 are saved; SDPA's always.
// fp8sac: torchao's Float8 linears count too (the policy sees their aten.mm: fp8.cpp).
//
// fp8sac (issue 10), `compile`: torchtitan compiles each checkpoint-wrapped block
// (parallelize_llama.py @ 9dec370:68-77, apply_ac then apply_compile), so AOTAutograd applies
// the policy to the traced region: MUST_SAVE nodes are banned from recomputation, the others
// (PREFER_RECOMPUTE) must be recomputed, and the min-cut partitioner
// (torch/_functorch/partitioners.py, min_cut_rematerialization_partition) saves only what the
// backward reads. A must-save output no backward op of the block reads, directly or through
// ops it recomputes, is then not kept (the w2 output: the residual add's backward reads
// nothing) and its op is not run again: `sac_mm_outputs = 0` keeps none of its outputs while
// the replay still takes its matmul as cached (no recompute time).
void mark_torchtitan_sac(Graph& g, bool compile) {
  int32_t block = -1;
  int64_t mm = 0;
  for (Op& op : g.ops) {
    if (op.block != block) block = op.block, mm = 0;
    op.sac_save_torchtitan = op.sac_save;
    if (op.kind == OpKind::kLinear && op.sac_save) op.sac_save_torchtitan = ++mm % 2 == 1;
  }
  if (!compile) return;
  std::vector<uint8_t> needed(g.storages.size(), 0);
  std::vector<int32_t> touched;
  auto need = [&](int32_t s) {
    if (!needed[s]) needed[s] = 1, touched.push_back(s);
  };
  for (int32_t i = static_cast<int32_t>(g.ops.size()) - 1; i >= 0; --i) {
    Op& op = g.ops[i];
    if (op.block < 0) continue;
    if (i + 1 == static_cast<int32_t>(g.ops.size()) || g.ops[i + 1].block != op.block) {
      for (int32_t s : touched) needed[s] = 0;  // a new block (reverse order): a new region
      touched.clear();
    }
    if (op.has_backward)
      for (const int32_t* s = g.begin(op.saves); s != g.end(op.saves); ++s) need(*s);
    // the matmul's outputs (what the policy keeps) and the others (an fp8 cast: recomputed)
    const int mm_out = op.sac_mm_outputs < 0 ? static_cast<int>(op.outputs.count) : op.sac_mm_outputs;
    bool mm_needed = false, other_needed = false;
    int idx = 0;
    for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s, ++idx)
      (idx < mm_out ? mm_needed : other_needed) |= needed[*s] != 0;
    const bool kept = op.sac_save_torchtitan;
    if (kept && !mm_needed) op.sac_mm_outputs = 0;  // not kept, not run again
    if ((!kept && mm_needed) || other_needed)  // recomputed: its inputs are read again
      for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) need(*s);
  }
}

// What one rank's graph covers: `layers` blocks, with or without the embedding before them and
// the head and loss after them (pipeline stages, DESIGN.md §3; Korthikanti §4.2.3).
struct Stage {
  int64_t layers = 0;
  bool embedding = true;
  bool head = true;
  int64_t first = 0;  // moe: the model layer of the stage's first block
};
Stage whole(const ModelConfig& m) { return {m.layers, true, true, 0}; }

// The ops and storages of the stage's blocks built one by one, before persistent state.
// `record_exec`: also the executor's per-op arguments (build_graph_exec).
Graph build_ops(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                const Stage& st, bool record_exec = false) {
  // feat: fp8 tensor cores from compute capability 8.9 (Ada, Hopper, Blackwell)
  if (setup.fp8 != Fp8Recipe::kOff && device.sm_arch < 89)
    throw ConfigError("--fp8", "fp8",
                      std::string(name(setup.fp8)) + " needs fp8 tensor cores (compute capability " +
                          "8.9 or later); the device's is " + std::to_string(device.sm_arch / 10) +
                          "." + std::to_string(device.sm_arch % 10));
  Graph g;
  g.n_blocks = st.layers;
  g.precision = resolved_precision(setup);
  g.profile = setup.profile;
  g.impl = setup.impl;
  g.impl_version = setup.impl_version;  // implver
  g.reentrant = setup.reentrant;
  g.allocator = setup.allocator;
  g.prefetch = setup.prefetch;
  g.tokens = checked_mul(setup.micro_batch, setup.seq, "tokens");
  g.tp = setup.tp;
  // feat: context-parallel ranks hold the same weights and reduce gradients with the data-
  // parallel ones (Megatron's dp-cp group, torchtitan's dp_shard_cp mesh): the graph's
  // data-parallel group is dp x cp.
  g.dp = checked_mul(setup.dp, setup.cp, "dp x cp");
  g.zero = setup.zero;
  g.pp = setup.pp;
  g.ep = setup.ep;  // moe
  g.etp = is_moe(model) ? resolved_etp(setup) : 1;  // etp (issue 13)
  Dims dm = make_dims(model, setup);
  dm.layer0 = st.first;  // moe
  dm.sm_count = device.sm_count;  // polish: per-SM buffers (norm_kernels.cpp)
  dm.sm_arch = device.sm_arch;    // tece (issue 10): TE norm occupancy (norm_te.cpp)
  Builder bld(g);
  bld.reserve(static_cast<size_t>(st.layers) * 48 + 64);
  // With gradient accumulation (N > 1 micro-batches) the steady state is a micro-batch after the
  // first, whose backward finds every .grad already allocated by the one before.
  bld.persistent_grads =
      g.precision == Precision::kBf16Mixed || g.precision == Precision::kFsdp2Bf16 ||
      setup.zero >= 2 || setup.microbatches > 1 || !resolved_set_to_none(setup);
  bld.ignore_transients = dm.paper;
  bld.deterministic_fill = setup.deterministic;  // time7 (issue 11)
  bld.local_spec = setup.local_spec;             // tece (issue 10)
  bld.record_exec = record_exec;
  bld.freeze_params = dm.lora_rank > 0;  // feat: LoRA freezes every base parameter
  g.lora_rank = setup.lora_rank;
  g.cp = setup.cp;
  if (detail::builds_encdec(model)) {
    // famenc: T5 and ViT (blocks_encdec.cpp); one stage (no implementation pipelines them)
    detail::build_encdec(bld, dm, st.layers, setup.target_seq.value_or(setup.seq));
    bld.finalize();
    mark_torchtitan_sac(g, setup.compile);
    if (setup.compile) detail::inductor_partition(g), g.compiled = true;  // inductor (issue 10)
    return g;
  }
  int32_t table = -1;
  int32_t x = st.embedding ? detail::build_embedding(bld, dm, &table, st.head)
                           : detail::build_stage_input(bld, dm, st.head);
  for (int32_t i = 0; i < st.layers; ++i) x = detail::build_block(bld, dm, x, i);
  if (st.head) detail::build_head(bld, dm, x, table);
  else detail::build_stage_output(bld, dm, x);
  bld.finalize();
  mark_torchtitan_sac(g, setup.compile);
  // inductor (issue 10): what the compiled block's min-cut partition saves (after the SAC
  // marks, which read the eager saves)
  if (setup.compile) detail::inductor_partition(g), g.compiled = true;
  return g;
}

// Recomputes per-block op ranges, use counts and consumer lists, then persistent state.
void complete(Graph& g, const ModelConfig& model, const TrainSetup& setup, const Device& device) {
  g.block_ops.assign(static_cast<size_t>(g.n_blocks), IdxRange{});
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    int32_t b = g.ops[i].block;
    if (b < 0) continue;
    IdxRange& r = g.block_ops[b];
    if (r.count == 0) r.begin = i;
    ++r.count;
  }
  g.params = parameter_count(model);
  add_persistent_state(g, model, setup, device);
  // feat14 (issue 13): Megatron's TP all-reduce of the replicated parameters' gradients
  if (setup.impl && spec(*setup.impl, setup.impl_version).tp_replicated_grad_allreduce &&
      setup.tp > 1 && setup.sp && setup.profile != Profile::kPaper)
    g.tp_replicated_grad_bytes = detail::tp_replicated_grad_bytes(g);
  g.initial_uses.assign(g.storages.size(), 0);
  for (const Op& op : g.ops)
    for (int32_t k = 0; k < op.inputs.count; ++k) ++g.initial_uses[g.idx[op.inputs.begin + k]];
  detail::index_consumers(g);
}

// Empties `g` as a default Graph would be, keeping its vectors' capacity (Workspace: a graph
// rebuilt in place pages in nothing new).
void recycle(Graph& g) {
  Graph fresh;
  auto keep = [](auto& dst, auto& src) {
    src.clear();
    dst.swap(src);
  };
  keep(fresh.storages, g.storages);
  keep(fresh.ops, g.ops);
  keep(fresh.idx, g.idx);
  keep(fresh.block_ops, g.block_ops);
  keep(fresh.persistent, g.persistent);
  keep(fresh.param_storages, g.param_storages);
  keep(fresh.step_end_frees, g.step_end_frees);
  keep(fresh.autocast_cached, g.autocast_cached);
  keep(fresh.forward_held, g.forward_held);  // hfimpl
  keep(fresh.initial_uses, g.initial_uses);
  keep(fresh.consumers, g.consumers);
  keep(fresh.args, g.args);
  keep(fresh.param_grads, g.param_grads);
  g = std::move(fresh);
}

// Clones block 1 of a three-block graph into blocks 1..n-2 (block 2 becomes block n-1).
// A storage belongs to the block of the op that allocates it (forward or backward) or, for a
// parameter, the block that created it; block 1's references to block 0's storages (its input)
// become references to the previous clone's matching storage. Anything else crossing blocks is a
// logic error: the caller then builds directly.
bool expand(const Graph& g3, int64_t n, Graph& out) {
  const IdxRange b0 = g3.block_ops[0], b1 = g3.block_ops[1], b2 = g3.block_ops[2];
  const int32_t n1 = b1.count, shift_ops = static_cast<int32_t>((n - 3) * n1);
  const size_t ns = g3.storages.size();
  std::vector<int32_t> owner(ns, -1);
  for (size_t s = 0; s < ns; ++s) {
    const Storage& st = g3.storages[s];
    owner[s] = st.producer >= 0 ? g3.ops[st.producer].block : -1;
  }
  for (int32_t s : g3.param_storages) owner[s] = g3.storages[s].block;
  // A persistent buffer made while building block 1 (nanoGPT's per-block mask) is block 1's.
  for (int32_t s : g3.persistent)
    if (owner[s] < 0 && g3.storages[s].block == 1) owner[s] = 1;
  // block 0 storage -> the block 1 storage made by the same local op in the same position
  std::vector<int32_t> next_of(ns, -1);
  for (int32_t l = 0; l < b1.count; ++l) {
    const Op& a = g3.ops[b0.begin + l];
    const Op& b = g3.ops[b1.begin + l];
    for (auto [ra, rb] : {std::pair{a.outputs, b.outputs}, std::pair{a.bwd_allocs, b.bwd_allocs}}) {
      if (ra.count != rb.count) return false;
      for (int32_t k = 0; k < ra.count; ++k) next_of[g3.idx[ra.begin + k]] = g3.idx[rb.begin + k];
    }
  }
  // Block 1's storages in id order, and their index among them.
  std::vector<int32_t> local(ns, -1), block1;
  for (size_t s = 0; s < ns; ++s)
    if (owner[s] == 1) local[s] = static_cast<int32_t>(block1.size()), block1.push_back(static_cast<int32_t>(s));
  const int32_t m1 = static_cast<int32_t>(block1.size());
  // copy k (1..n-2) of block 1's storage s: s itself for k = 1, else a clone.
  auto clone_id = [&](int32_t s, int64_t k) {
    return k == 1 ? s : static_cast<int32_t>(ns + (k - 2) * m1 + local[s]);
  };
  auto map_op = [&](int32_t op, int64_t k) -> int32_t {  // op of g3 -> op of out (copy k for block 1)
    if (op < b1.begin) return op;
    if (op < b1.begin + b1.count) return static_cast<int32_t>(op + (k - 1) * n1);
    return op + shift_ops;
  };
  bool ok = true;
  // Maps a storage referenced by an op of g3's block `blk` placed as copy k.
  auto map_st = [&](int32_t s, int32_t blk, int64_t k) -> int32_t {
    const int32_t o = owner[s];
    if (o < 0) return s;
    if (blk == 1) {
      if (o == 1) return clone_id(s, k);
      if (o == 0) return k == 1 ? s : clone_id(next_of[s], k - 1);
    } else if (blk == 2 || blk < 0) {
      if (o == 2 || o == 0) return s;
      if (o == 1) return clone_id(s, n - 2);
    } else if (blk == 0) {
      if (o == 0 || o == 1) return s;
    }
    ok = false;
    return s;
  };

  recycle(out);
  out.n_blocks = n;
  out.precision = g3.precision;
  out.profile = g3.profile;
  out.impl = g3.impl;
  out.impl_version = g3.impl_version;  // implver
  out.reentrant = g3.reentrant;
  out.allocator = g3.allocator;
  out.prefetch = g3.prefetch;
  out.tokens = g3.tokens;
  out.tp = g3.tp;
  out.dp = g3.dp;
  out.zero = g3.zero;
  out.pp = g3.pp;
  out.ep = g3.ep;  // moe
  out.etp = g3.etp;  // etp (issue 13)
  out.lora_rank = g3.lora_rank;  // feat
  out.cp = g3.cp;
  out.compiled = g3.compiled;  // inductor (issue 10)
  // Room for the clones and the persistent-state storages complete() appends.
  out.storages.reserve(ns + static_cast<size_t>((n - 3) * m1) + 16);
  out.storages.assign(g3.storages.begin(), g3.storages.end());
  for (int64_t k = 2; k <= n - 2; ++k)
    for (int32_t s : block1) out.storages.push_back(g3.storages[s]);
  // Fix producers and attribution blocks.
  auto fix = [&](Storage& st, int64_t k, int32_t o) {
    if (st.producer >= 0) st.producer = map_op(st.producer, k);
    if (o == 2 && st.block >= 0) st.block += static_cast<int32_t>(n - 3);
    if (o == 1 && st.block >= 1) st.block += static_cast<int32_t>(k - 1);
    if (o < 0 && st.block == 2) st.block = static_cast<int32_t>(n - 1);
  };
  for (size_t s = 0; s < ns; ++s) fix(out.storages[s], 1, owner[s]);
  for (int64_t k = 2; k <= n - 2; ++k)
    for (int32_t s : block1) fix(out.storages[clone_id(s, k)], k, 1);

  out.ops.reserve(g3.ops.size() + static_cast<size_t>(shift_ops));
  // Op lists, then one consumer entry per op input (index_consumers). Measured (bench_engine):
  // this over-estimate ran faster than the exact size, by the allocator's page-fault behaviour.
  out.idx.reserve(g3.idx.size() * static_cast<size_t>(n) * 2 / 3 + 4096);
  auto copy_range = [&](IdxRange r, int32_t blk, int64_t k) {
    IdxRange nr{static_cast<int32_t>(out.idx.size()), r.count};
    for (int32_t i = 0; i < r.count; ++i) {
      // insertion sort: ranges hold a handful of ids
      int32_t v = map_st(g3.idx[r.begin + i], blk, k);
      size_t j = out.idx.size();
      out.idx.push_back(v);
      while (j > static_cast<size_t>(nr.begin) && out.idx[j - 1] > v) out.idx[j] = out.idx[j - 1], --j;
      out.idx[j] = v;
    }
    return nr;
  };
  auto emit = [&](int32_t i, int64_t k) {
    Op op = g3.ops[i];
    const int32_t blk = op.block;
    if (blk == 1) op.block = static_cast<int32_t>(k);
    if (blk == 2) op.block = static_cast<int32_t>(n - 1);
    op.inputs = copy_range(op.inputs, blk, k);
    op.outputs = copy_range(op.outputs, blk, k);
    op.saves = copy_range(op.saves, blk, k);
    op.bwd_allocs = copy_range(op.bwd_allocs, blk, k);
    op.bwd_frees = copy_range(op.bwd_frees, blk, k);
    op.persistent_reads = copy_range(op.persistent_reads, blk, k);  // ds3
    out.ops.push_back(op);
  };
  for (int32_t i = 0; i < b1.begin; ++i) emit(i, 1);
  for (int64_t k = 1; k <= n - 2; ++k)
    for (int32_t i = b1.begin; i < b1.begin + b1.count; ++i) emit(i, k);
  for (int32_t i = b2.begin; i < static_cast<int32_t>(g3.ops.size()); ++i) emit(i, 1);

  // Lists of storages: clones of block 1's entries for every further copy.
  auto extend = [&](const std::vector<int32_t>& src, std::vector<int32_t>& dst) {
    dst = src;
    for (int32_t s : src)
      if (owner[s] == 1)
        for (int64_t k = 2; k <= n - 2; ++k) dst.push_back(clone_id(s, k));
  };
  extend(g3.persistent, out.persistent);
  extend(g3.param_storages, out.param_storages);
  extend(g3.step_end_frees, out.step_end_frees);
  extend(g3.autocast_cached, out.autocast_cached);
  extend(g3.forward_held, out.forward_held);  // hfimpl
  out.optimizer_transient_bytes = g3.optimizer_transient_bytes;
  out.optimizer_cost = g3.optimizer_cost;
  out.optimizer_multi_tensor = g3.optimizer_multi_tensor;  // time (issue 11)
  return ok;
}

Graph build_stage_direct(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                         const Stage& st) {
  Graph g = build_ops(model, setup, device, st);
  complete(g, model, setup, device);
  return g;
}

}  // namespace

Graph build_graph_direct(const ModelConfig& model, const TrainSetup& setup_in, const Device& device) {
  validate(model);
  const TrainSetup setup = resolve_setup(model, setup_in);  // the implementation's defaults
  validate(model, setup);
  return build_stage_direct(model, setup, device, whole(model));
}

Graph build_graph_exec(const ModelConfig& model, const TrainSetup& setup_in, const Device& device) {
  validate(model);
  const TrainSetup setup = resolve_setup(model, setup_in);  // the implementation's defaults
  validate(model, setup);
  Graph g = build_ops(model, setup, device, whole(model), true);
  complete(g, model, setup, device);
  return g;
}

namespace {

// Byte and FLOP arithmetic is checked everywhere; an overflow while building names the model file
// and the knobs that made the sizes, so the one-line error says what to change.
template <typename F>
auto naming_overflows(const ModelConfig& model, const TrainSetup& setup, F&& build) {
  try {
    return build();
  } catch (const ConfigError& e) {
    if (e.where() != "<setup>") throw;
    throw ConfigError(model.source, e.field(),
                      "overflows 64 bits with --batch " + std::to_string(setup.micro_batch) +
                          " --seq " + std::to_string(setup.seq) + " --tp " +
                          std::to_string(setup.tp) + " (hidden " + std::to_string(model.hidden) +
                          ", vocab " + std::to_string(model.vocab) + ")");
  }
}

void build_graph_cloned(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                        Graph& out, const Stage& st);

}  // namespace

Graph build_graph(const ModelConfig& model, const TrainSetup& setup, const Device& device) {
  Graph g;
  build_graph(model, setup, device, g);
  return g;
}

void build_graph(const ModelConfig& model, const TrainSetup& setup_in, const Device& device,
                 Graph& out) {
  validate(model);
  const TrainSetup setup = resolve_setup(model, setup_in);  // the implementation's defaults
  validate(model, setup);
  if (setup.pp > 1 || setup.microbatches > 1)
    throw Unsupported("--pp", "pp",
                      "pipeline and multi-micro-batch steps are simulated per stage "
                      "(sim::simulate_pipeline), not as one graph");
  naming_overflows(model, setup, [&] {
    build_graph_cloned(model, setup, device, out, whole(model));
    return 0;
  });
}

void build_stage_graph(const ModelConfig& model, const TrainSetup& setup_in, const Device& device,
                       int64_t stage, Graph& out) {
  validate(model);
  const TrainSetup setup = resolve_setup(model, setup_in);  // the implementation's defaults
  validate(model, setup);
  if (stage < 0 || stage >= setup.pp)
    throw std::logic_error("build_stage_graph: stage out of range");
  const Stage st{model.layers / setup.pp, stage == 0, stage == setup.pp - 1,
                 stage * (model.layers / setup.pp)};
  naming_overflows(model, setup, [&] {
    build_graph_cloned(model, setup, device, out, st);
    return 0;
  });
}

namespace {

void build_graph_cloned(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                        Graph& g, const Stage& st) {
  // famdec: alternating local/global layers whose ops differ are built block by block;
  // famenc: T5's encoder and decoder blocks are not alike; moe: blocks differ (dense first
  // layers) up to the stage's first MoE block: built directly
  if (st.layers < 5 || detail::famdec_heterogeneous(model, make_dims(model, setup)) ||
      model.decoder_layers > 0 || (is_moe(model) && model.dense_layers > st.first)) {
    g = build_stage_direct(model, setup, device, st);
    return;
  }
  Graph g3 = build_ops(model, setup, device, {3, st.embedding, st.head, st.first});
  g3.block_ops.assign(3, IdxRange{});
  for (int32_t i = 0; i < static_cast<int32_t>(g3.ops.size()); ++i) {
    int32_t b = g3.ops[i].block;
    if (b < 0) continue;
    if (g3.block_ops[b].count == 0) g3.block_ops[b].begin = i;
    ++g3.block_ops[b].count;
  }
  if (!expand(g3, st.layers, g)) {
    g = build_stage_direct(model, setup, device, st);
    return;
  }
  complete(g, model, setup, device);
}

}  // namespace

Graph build_chain_graph(int64_t n_blocks, int64_t bytes) {
  // Each block is one op that saves only its input: a checkpoint (the block input) costs as much
  // as a block's activations, Chen et al.'s unit-cost assumption.
  Graph g;
  g.n_blocks = n_blocks;
  g.precision = Precision::kFp32;
  g.profile = Profile::kPytorch;
  g.tokens = 1;
  Builder bld(g);
  ModelConfig m;
  Dims dm;
  dm.model = &m;
  bld.current_block = -1;
  int32_t x = bld.fresh(bytes, DType::kF32, "chain input");
  {
    detail::OpDraft d;
    d.op.kind = OpKind::kCopy;
    d.op.name = "chain input";
    d.outputs = {x};
    bld.add_op(std::move(d));
  }
  for (int32_t i = 0; i < n_blocks; ++i) {
    bld.current_block = i;
    detail::OpDraft d;
    d.op.kind = OpKind::kGelu;
    d.op.name = "layer";
    d.inputs.push_back({x, detail::GradRule::kNew});
    int32_t y = bld.fresh(bytes, DType::kF32, "layer out");
    d.outputs = {y};
    d.saves = {x};
    bld.add_op(std::move(d));
    x = y;
  }
  bld.current_block = -1;
  {
    detail::OpDraft d;
    d.op.kind = OpKind::kNllLoss;
    d.op.name = "loss";
    d.inputs.push_back({x, detail::GradRule::kNew});
    int32_t loss = bld.fresh(4, DType::kF32, "loss");
    d.outputs = {loss};
    bld.add_op(std::move(d));
    bld.set_loss(loss);
  }
  bld.finalize();
  g.block_ops.assign(static_cast<size_t>(n_blocks), IdxRange{});
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i)
    if (g.ops[i].block >= 0) g.block_ops[g.ops[i].block] = {i, 1};
  detail::index_consumers(g);
  return g;
}

}  // namespace sim
