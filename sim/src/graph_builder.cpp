// Builds the Graph: the Builder's bookkeeping (storages, views, use counts, attribution), the
// static backward pass of the event protocol, and the persistent state per rank (DESIGN.md §3).
#include <algorithm>
#include <cmath>
#include <string>

#include "builder.hpp"
#include "sim/device.hpp"
#include "sim/error.hpp"

namespace sim {
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

int32_t Builder::view(int32_t base, int64_t bytes, DType dtype) {
  Tensor t = tensors_[base];
  t.bytes = bytes;
  t.dtype = dtype;
  tensors_.push_back(t);
  return static_cast<int32_t>(tensors_.size() - 1);
}

int32_t Builder::param(int64_t numel, DType dtype, const char* role) {
  int32_t t = fresh(checked_mul(numel, bytes_of(dtype), "weights bytes"), dtype, role,
                    Category::kWeights);
  int32_t s = tensors_[t].storage;
  persistent_[s] = true;
  g_.persistent.push_back(s);
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
  std::vector<Ids> in_st(n_ops), out_st(n_ops), save_st(n_ops), allocs(n_ops), frees(n_ops);
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
  for (int32_t i = n_ops - 1; i >= 0; --i) {
    const OpDraft& d = drafts_[i];
    bool any = d.root;
    for (int32_t t : d.outputs) any = any || slot[t] >= 0;
    if (!any) continue;  // no gradient reaches this op: autograd never runs its node
    has_bwd[i] = true;
    for (const InputUse& u : d.inputs) {
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
          continue;
        }
        if (p.grad_storage < 0) {  // lazy: first touch allocates param.grad (set_to_none before)
          p.grad_storage = new_grad(i, t.bytes, t.dtype, Category::kGrads, "parameter grad");
          allocs[i].push_back(p.grad_storage);
          g_.step_end_frees.push_back(p.grad_storage);
        } else if (is_new) {
          accum[i] += t.bytes;  // AccumulateGrad adds into the existing .grad
        }
        continue;
      }
      if (slot[u.tensor] < 0) {
        if (is_new) {
          produced = new_grad(i, t.bytes, t.dtype, Category::kActGrads, "activation grad");
          allocs[i].push_back(produced);
        }
        slot[u.tensor] = produced;
        ++gref[produced];
      } else if (is_new) {
        accum[i] += t.bytes;  // accumulated in place into the first arrival, then freed
      }
    }
    for (int32_t t : d.outputs) {
      int32_t gs = slot[t];
      if (gs < 0) continue;
      slot[t] = -1;
      if (--gref[gs] == 0) frees[i].push_back(gs);
    }
  }

  g_.ops.clear();
  g_.ops.reserve(n_ops);
  g_.idx.reserve(static_cast<size_t>(n_ops) * 8);
  for (int32_t i = 0; i < n_ops; ++i) {
    Op op = drafts_[i].op;
    op.has_backward = has_bwd[i];
    // An op autograd does not record saves nothing (no node holds the tensors).
    if (!has_bwd[i]) save_st[i].clear();
    op.inputs = push_sorted(g_, in_st[i]);
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
    op.fwd.bytes = fb;
    op.bwd.bytes = bb + op.bwd_accum_bytes * 2;
    g_.ops.push_back(op);
  }
  g_.autocast_cached.clear();
  for (int32_t s : autocast_cached_) g_.autocast_cached.push_back(s);
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
  dm.attention = s.attention;
  dm.amp = dm.precision == Precision::kBf16Amp || dm.precision == Precision::kFp16Amp;
  dm.b = s.micro_batch;
  dm.s = s.seq;
  dm.t = s.tp;
  dm.sp = s.sp && s.tp > 1;
  dm.s_local = dm.sp ? s.seq / s.tp : s.seq;
  dm.h = m.hidden;
  dm.a = m.heads / s.tp;
  dm.g = m.kv_heads % s.tp == 0 ? m.kv_heads / s.tp : 1;  // fewer KV heads than ranks: replicated
  dm.d = m.head_dim;
  dm.f = m.ffn_hidden / s.tp;
  // Megatron pads the vocabulary to a multiple of 128 * t for vocab-parallel layers
  // (make_vocab_size_divisible_by = 128); one rank uses it as is.
  const int64_t mult = 128 * s.tp;
  dm.v_full = s.tp > 1 ? (m.vocab + mult - 1) / mult * mult : m.vocab;
  dm.v = dm.v_full / s.tp;
  switch (dm.precision) {
    case Precision::kBf16Mixed:
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
  dm.p_attn = s.dropout ? *s.dropout : m.attn_dropout;
  dm.p_hidden = s.dropout ? *s.dropout : m.hidden_dropout;
  dm.p_embd = s.dropout ? *s.dropout : m.embd_dropout;
  // GPT-2 and Megatron fuse Q/K/V into one projection; Llama-family and BERT use three.
  dm.fused_qkv = m.family == "gpt2" || m.family == "megatron-gpt";
  return dm;
}

// Persistent state per rank (DESIGN.md §3 precision table; Megatron-LM
// theoretical_memory_usage.py: 18 B/param, distributed optimizer 6 + 12/d).
void add_persistent_state(Graph& g, const TrainSetup& s, const Device& dev,
                          const detail::Builder& bld) {
  const char* f = "persistent bytes";
  int64_t numel = 0, max_block_weights = 0;
  std::vector<int64_t> block_weights(static_cast<size_t>(g.n_blocks), 0);
  for (const auto& p : bld.params) {
    numel = checked_add(numel, p.numel, f);
    const Storage& st = g.storages[bld.storage_of(p.tensor)];
    // weights of a block: those created while building it
    if (st.block >= 0 && st.block < g.n_blocks) block_weights[st.block] += p.bytes;
  }
  for (int64_t w : block_weights) max_block_weights = std::max(max_block_weights, w);
  g.params_per_rank = numel;
  const int64_t d = s.dp;
  const Precision prec = g.precision;
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
  int64_t weights = 0;
  for (int32_t sid : g.persistent) weights += g.storages[sid].bytes;
  // ZeRO-3 shards the weights; the current and the prefetched block are gathered whole.
  if (s.zero >= 3) {
    for (int32_t sid : g.persistent)
      if (g.storages[sid].category == Category::kWeights) g.storages[sid].bytes /= d;
    add(checked_mul(2, max_block_weights, f), Category::kComm, "ZeRO-3 gathered weights");
    weights = 0;
    for (int32_t sid : g.persistent)
      if (g.storages[sid].category == Category::kWeights) weights += g.storages[sid].bytes;
  }
  g.weights_bytes = weights;

  // Gradients: fp32, one per parameter.
  const int64_t grad_all = checked_mul(4, numel, f);
  if (prec == Precision::kBf16Mixed) {
    g.grads_bytes = s.zero >= 2 ? grad_all / d : grad_all;
    add(g.grads_bytes, Category::kGrads, "main_grad buffer (fp32)");
  } else if (s.zero >= 2) {
    g.grads_bytes = grad_all / d;
    add(g.grads_bytes, Category::kGrads, "partitioned grads (fp32)");
  } else {
    g.grads_bytes = grad_all;  // allocated lazily during backward
    if (d > 1) add(grad_all, Category::kComm, "DDP gradient buckets");
  }

  // Optimizer state, per parameter: Adam m and v (8 B), SGD momentum (4 B), plus fp32 master
  // weights when the parameters are bf16 (bf16-mixed).
  int64_t per_param = s.optimizer == Optimizer::kSgd ? 4 : 8;
  if (prec == Precision::kBf16Mixed) per_param += 4;
  int64_t opt = checked_mul(per_param, numel, f);
  if (s.zero >= 1) opt /= d;
  if (prec == Precision::kFp16Amp) opt += 8;  // GradScaler: fp32 scale + int32 growth tracker
  g.optimizer_bytes = opt;
  add(opt, Category::kOptimizer, "optimizer state");

  // Foreach Adam allocates sqrt(v) for the whole group (torch/optim/adam.py _multi_tensor_adam:
  // exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)); fused Adam and SGD none.
  const int64_t shard = s.zero >= 1 ? numel / d : numel;
  g.optimizer_transient_bytes =
      s.optimizer == Optimizer::kAdamForeach && g.profile != Profile::kPaper
          ? checked_mul(4, shard, f)
          : 0;
  // Bytes moved per parameter of the shard: foreach Adam runs lerp_(m), mul_(v), addcmul_(v),
  // sqrt, div_, add_, addcdiv_(p) and the decoupled weight decay mul_(p): 80 B; fused Adam reads
  // and writes p, m, v and reads g: 28 B; SGD with momentum: 20 B; bf16 params add a 2 B copy.
  int64_t moved = s.optimizer == Optimizer::kAdamForeach ? 80
                  : s.optimizer == Optimizer::kAdamFused ? 28 : 20;
  if (prec == Precision::kBf16Mixed) moved += 2;
  g.optimizer_cost.bytes = checked_mul(moved, shard, f);
  g.optimizer_cost.kernels = s.optimizer == Optimizer::kAdamForeach ? 8 : 1;

  // cuBLAS workspace: allocated at the first matmul through the allocator, kept (steady state).
  g.workspace_bytes = g.profile == Profile::kPaper ? 0 : dev.cublas_workspace_bytes;
  if (g.workspace_bytes > 0) add(g.workspace_bytes, Category::kWorkspace, "cuBLAS workspace");
  int64_t comm = 0;
  for (int32_t sid : g.persistent)
    if (g.storages[sid].category == Category::kComm) comm += g.storages[sid].bytes;
  g.comm_persistent_bytes = comm;
}

}  // namespace

Graph build_graph(const ModelConfig& model, const TrainSetup& setup, const Device& device) {
  validate(model);
  validate(model, setup);
  Graph g;
  g.n_blocks = model.layers;
  g.precision = resolved_precision(setup);
  g.profile = setup.profile;
  g.params = parameter_count(model);
  g.tokens = checked_mul(setup.micro_batch, setup.seq, "tokens");
  g.tp = setup.tp;
  g.dp = setup.dp;
  Dims dm = make_dims(model, setup);
  Builder bld(g);
  bld.reserve(static_cast<size_t>(model.layers) * 48 + 64);
  bld.persistent_grads = g.precision == Precision::kBf16Mixed || setup.zero >= 2;
  bld.ignore_transients = dm.paper;
  int32_t table = -1;
  int32_t x = detail::build_embedding(bld, dm, &table);
  std::vector<int32_t> block_first;
  for (int32_t i = 0; i < model.layers; ++i) {
    block_first.push_back(static_cast<int32_t>(g.ops.size()));
    x = detail::build_block(bld, dm, x, i);
  }
  detail::build_head(bld, dm, x, table);
  bld.finalize();
  // Block op ranges, from the ops' block tags (ops of a block are contiguous).
  g.block_ops.assign(static_cast<size_t>(g.n_blocks), IdxRange{});
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    int32_t b = g.ops[i].block;
    if (b < 0) continue;
    IdxRange& r = g.block_ops[b];
    if (r.count == 0) r.begin = i;
    ++r.count;
  }
  add_persistent_state(g, setup, device, bld);
  detail::index_consumers(g);
  return g;
}

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
