// feat (issue 13): LoRA and QLoRA as HF PEFT runs them on a transformers model (docs/memory-model.md
// "LoRA and QLoRA"): every base parameter frozen, PEFT's adapter on the targeted linears, and, under
// --qlora, the frozen linears in bitsandbytes 4-bit NF4.
//
// Sources read (upstream file @ commit):
//   huggingface/peft src/peft/tuners/lora/layer.py @ 5d602fdb (Linear.forward: `result =
//     self.base_layer(x)`, `x = self._cast_input_dtype(x, lora_A.weight.dtype)`, `result = result +
//     lora_B(lora_A(dropout(x))) * scaling`; update_layer: lora_A = nn.Linear(in, r, bias=False),
//     lora_B = nn.Linear(r, out, bias=False), dropout nn.Identity when lora_dropout == 0, the
//     LoraConfig default), tuners/lora/bnb.py @ 5d602fdb (Linear4bit.forward: `result =
//     result.clone()`, no input conversion under autocast), tuners/tuners_utils.py
//     _cast_input_dtype (x.to(weight dtype) when they differ), utils/constants.py
//     TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (the default targets), utils/other.py
//     prepare_model_for_kbit_training (every non-4-bit parameter cast to fp32, input embeddings'
//     output made to require grad).
//   bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py @ 95f9af30 (Linear4bit:
//     compress_statistics=True, blocksize 64; forward `x.to(compute_dtype)` then
//     `matmul_4bit(...).to(inp_dtype)`), functional.py quantize_4bit (absmax per 64 values; double
//     quantization: absmax - mean to uint8 in blocks of 256 with fp32 absmax and a 256-entry fp32
//     code), autograd/_functions.py MatMul4Bit (ctx.tensors = (None, B): only the packed weight is
//     kept; forward and backward each dequantize B to the compute dtype for training-sized M,
//     backends/cuda/ops.py _gemm_4bit_use_custom_cuda: dequant + F.linear above M = 1536).
//   pytorch/pytorch aten/src/ATen/autocast_mode.cpp cached_cast (only leaf tensors that require
//     grad are cached), tools/autograd/derivatives.yaml mm/addmm (mat2 is saved for self's
//     gradient, self for mat2's: a frozen weight's matmul keeps only the weight).
#include <string>
#include <string_view>

#include "ops.hpp"
#include "impl/rows.hpp"
#include "sim/error.hpp"
#include "sim/setup.hpp"

namespace sim {
namespace {
// feat13 (issue 13): PEFT's `target_parameters` (LoraConfig; tuners/lora/layer.py @ 5d602fdb
// ParamWrapper) naming the 3-D expert parameters of transformers' DeepseekV2Experts
// (`experts.gate_up_proj` [E, 2f, h], `experts.down_proj` [E, h, f]; modeling_deepseek_v2.py @
// 0233e509531a). Bits above kLoraAllLinear: all-linear never includes them (PEFT's all-linear
// matches nn.Linear modules only). Parsed and printed so that resolve_lora refuses them in one
// line (below); no builder reads them.
constexpr uint32_t kLoraParamGateUp = 8192, kLoraParamDown = 16384;
}  // namespace

std::optional<uint32_t> parse_lora_targets(std::string_view s) {
  if (s == "all-linear") return kLoraAllLinear;
  uint32_t mask = 0;
  while (true) {
    const auto comma = s.find_first_of(",+");
    const std::string_view item = s.substr(0, comma);
    uint32_t bit = 0;
    if (item == "q") bit = kLoraQ;
    else if (item == "k") bit = kLoraK;
    else if (item == "v") bit = kLoraV;
    else if (item == "o") bit = kLoraO;
    else if (item == "gate") bit = kLoraGate;
    else if (item == "up") bit = kLoraUp;
    else if (item == "down") bit = kLoraDown;
    else if (item == "q_a") bit = kLoraQA;  // lora6: MLA's and Phi-3's modules
    else if (item == "q_b") bit = kLoraQB;
    else if (item == "kv_a") bit = kLoraKvA;
    else if (item == "kv_b") bit = kLoraKvB;
    else if (item == "gate_up") bit = kLoraGateUp;
    else if (item == "experts.gate_up_proj") bit = kLoraParamGateUp;  // feat13
    else if (item == "experts.down_proj") bit = kLoraParamDown;
    if (bit == 0) return std::nullopt;
    mask |= bit;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return mask;
}

std::string lora_targets_name(uint32_t mask) {
  if (mask == kLoraAllLinear) return "all-linear";
  std::string out;
  const char* names[] = {"q", "k", "v", "o", "gate", "up", "down",
                         "q_a", "q_b", "kv_a", "kv_b", "gate_up"};  // lora6: the last five
  for (int i = 0; i < 12; ++i)
    if (mask & (1u << i)) out += (out.empty() ? "" : "+") + std::string(names[i]);
  // feat13: PEFT target_parameters
  if (mask & kLoraParamGateUp) out += (out.empty() ? "" : "+") + std::string("experts.gate_up_proj");
  if (mask & kLoraParamDown) out += (out.empty() ? "" : "+") + std::string("experts.down_proj");
  return out;
}

namespace detail {
namespace {

// The LoRA targets a linear answers to, by the site its block gives it (LinearSite); 0: never
// targeted (the output layer: PEFT's all-linear excludes it; BERT's MLM head transform is not
// modeled as a target; nor are the sites LinearSite lists as kNone).
uint32_t site_of(LinearSite site) {
  switch (site) {
    case LinearSite::kQkv: return kLoraQ | kLoraK | kLoraV;  // GPT-2's c_attn: one module
    case LinearSite::kQ: return kLoraQ;
    case LinearSite::kK: return kLoraK;
    case LinearSite::kV: return kLoraV;
    case LinearSite::kO: return kLoraO;
    case LinearSite::kGate: return kLoraGate;
    case LinearSite::kUp:
    case LinearSite::kFc1: return kLoraUp;
    case LinearSite::kDown:
    case LinearSite::kFc2: return kLoraDown;
    // lora6 (issue 13)
    case LinearSite::kGateUp: return kLoraGateUp;  // Phi-3's fused gate_up_proj: one module
    case LinearSite::kQA: return kLoraQA;
    case LinearSite::kQB: return kLoraQB;
    case LinearSite::kKvA: return kLoraKvA;
    case LinearSite::kKvB: return kLoraKvB;
    case LinearSite::kOther: return kLoraOther;  // all-linear only
    case LinearSite::kNone:
    case LinearSite::kLmHead: return 0;
  }
  return 0;
}

// Bytes of one bitsandbytes 4-bit weight of n values, double-quantized (Linear4bit's
// compress_statistics=True, blocksize 64; functional.py quantize_4bit @ 95f9af30): the packed
// values ceil(n/2) (uint8 quant_storage); the first-level absmax quantized to one uint8 per 64
// values (quantize_blockwise(_absmax - offset, blocksize=256)); its fp32 absmax, one per 256 of
// those (state2.absmax); the fp32 offset (`_absmax.mean()`, a 0-dim tensor); the 256-entry fp32
// code of that second quantization (state2.code: `code.to(A.device, copy=True)`, a copy per
// weight); and the 16-entry fp32 NF4 code (QuantState.code: get_4bit_type builds a new
// `torch.tensor(data)` per call). Six tensors per weight; the caching allocator's 512-byte
// rounding of the five small ones (< 2.5 KB per linear) is not modeled. docs/memory-model.md
// "LoRA and QLoRA" derives one linear by hand; tests/test_lora.cpp asserts it.
int64_t nf4_bytes(int64_t n) {
  const int64_t blocks = (n + 63) / 64;
  const int64_t blocks2 = (blocks + 255) / 256;
  return (n + 1) / 2 + blocks + mul(4, blocks2) + 4 + 256 * 4 + 16 * 4;
}

// The fp32 absmax rebuilt while dequantizing (feat2): forward, backends/cuda/ops.py
// _dequant_linear_fallback makes `absmax_dq` (fp32, one per 64 values) and `absmax_dq +
// absmax_offset` (another), both alive while the weight is dequantized into B_dq; backward,
// functional.py dequantize_4bit makes one (dequantize_blockwise, then `+=` the offset in place).
int64_t nf4_absmax_fp32_bytes(int64_t n) { return mul(4, (n + 63) / 64); }

// A pointwise op of one input making a new tensor that saves nothing (x * scaling by a Python
// float, clone, a cast): `pass`: the backward hands the gradient on (clone) instead of making one.
int32_t pointwise(Builder& bld, Ops& o, OpKind kind, int32_t x, int64_t out_bytes, DType dt,
                  const char* name, const char* role, bool pass, Exec exec, float scalar = 0) {
  OpDraft d = o.draft(kind, name);
  d.op.math16 = false;
  d.exec = exec;  // exec11: the executor's kernel (kScale: x * scalar; kCopy: clone)
  d.p = scalar;
  d.inputs.push_back({x, pass ? GradRule::kPass : GradRule::kNew, 0});
  const int32_t y = bld.fresh(out_bytes, dt, role);
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// The frozen nn.Linear of a transformers model: y = x W^T + b with W and b not requiring grad.
// Under autocast the fp32 weight is cast to 16 bits at every use (not cached: it does not require
// grad) and the matmul saves that cast for the input's gradient; x is not saved (no weight
// gradient). Backward: the input gradient only (2mnk).
int32_t frozen_linear(Builder& bld, Ops& o, const Dims& dm, int32_t x, int64_t in_f,
                      int64_t out_f, bool bias, const char* name, const char* out_role,
                      int32_t shared_param, LinearSite site) {
  const int64_t nw = mul(in_f, out_f);
  const int64_t own_bias = bias && shared_param < 0 ? out_f : 0;
  int32_t w = shared_param >= 0 ? shared_param : bld.param(nw + own_bias, dm.param_dt, name);
  int32_t extra_bias = shared_param >= 0 && bias ? bld.param(out_f, dm.param_dt, "output bias") : -1;
  int32_t wc = w, bc = -1;
  if (dm.amp) {
    OpDraft d = o.draft(OpKind::kCast, "frozen weight cast");
    d.op.math16 = false;
    d.exec = Exec::kCast;  // exec11: outputs take consecutive elements of the inputs
    d.inputs.push_back({w, GradRule::kNone});
    if (extra_bias >= 0) d.inputs.push_back({extra_bias, GradRule::kNone});
    wc = bld.fresh(bytes(nw, dm.half_dt), dm.half_dt, "frozen weight cast", Category::kCasts);
    d.outputs.push_back(wc);
    if (bias) {
      bc = bld.fresh(bytes(out_f, dm.half_dt), dm.half_dt, "frozen bias cast", Category::kCasts);
      d.outputs.push_back(bc);
    }
    bld.add_op(std::move(d));
  }
  const int32_t xin = o.to_half(x, "input cast", "linear input cast");
  const DType dt = dm.amp ? dm.half_dt : bld.tensor(xin).dtype;
  const int64_t n = numel_of(bld.tensor(xin)) / in_f;
  OpDraft d = o.draft(OpKind::kLinear, name);
  d.op.site = site;  // polish
  // exec11: the executor's kLinear (its backward makes only the input's gradient: the weight's
  // mode is kNone); bias as Ops::linear places it: a separate input (its cast, or a tied
  // weight's own bias), else stored after the fp32 weight
  d.exec = Exec::kLinear;
  d.dim = {n, in_f, out_f, bc >= 0 || extra_bias >= 0 ? 2 : own_bias > 0 ? 1 : 0};
  d.inputs.push_back({xin, GradRule::kNew});
  d.inputs.push_back({wc, GradRule::kNone});
  if (bc >= 0) d.inputs.push_back({bc, GradRule::kNone});
  else if (extra_bias >= 0) d.inputs.push_back({extra_bias, GradRule::kNone});
  const int32_t y = bld.fresh(bytes(mul(n, out_f), dt), dt, out_role);
  d.outputs.push_back(y);
  d.saves = {wc};  // persistent under fp32: costs nothing
  const int64_t mm = mul(mul(2, n), nw);
  d.op.fwd.flops = mm;
  d.op.bwd.flops = mm;  // grad input only
  d.op.sac_save = true;
  bld.add_op(std::move(d));
  return y;
}

// bitsandbytes Linear4bit (QLoRA): x.to(compute dtype), MatMul4Bit (keeps only the packed weight;
// dequantizes it to the compute dtype in forward and again in backward), .to(x's dtype).
int32_t nf4_linear(Builder& bld, Ops& o, const Dims& dm, int32_t x, int64_t in_f, int64_t out_f,
                   bool bias, const char* name, const char* out_role, LinearSite site) {
  const int64_t nw = mul(in_f, out_f);
  const int32_t w = bld.buffer(nf4_bytes(nw), DType::kBool, "NF4 weight + quant state");
  if (bld.expert_params) bld.mark_expert(w);  // lora6: an expert's Linear4bit
  const int32_t b = bias ? bld.param(out_f, dm.param_dt, "bias") : -1;
  const DType in_dt = bld.tensor(x).dtype, cdt = dm.qlora_compute_dt;  // feat3
  const int32_t xc = o.cast(x, cdt, "4-bit input cast", "4-bit input cast");
  const int64_t n = numel_of(bld.tensor(xc)) / in_f;
  OpDraft d = o.draft(OpKind::kLinear, name);
  d.op.site = site;
  d.op.math16 = cdt != DType::kF32;  // feat3: 16-bit GEMMs under bf16-mixed's fp32 dims too
  d.exec = Exec::kNf4Linear;  // exec11: the executor dequantizes the packed weight
  d.dim = {n, in_f, out_f, b >= 0 ? 2 : 0};
  d.inputs.push_back({xc, GradRule::kNew});
  d.inputs.push_back({w, GradRule::kNone});
  if (b >= 0) d.inputs.push_back({b, GradRule::kNone});
  const int32_t y = bld.fresh(bytes(mul(n, out_f), cdt), cdt, out_role);
  d.outputs.push_back(y);
  // the dequantized weight, in forward and again for the input's gradient, each with its
  // rebuilt fp32 absmax (two copies in forward, one in backward; nf4_absmax_fp32_bytes). The
  // dequantized dtype is QuantState.dtype, the weight's dtype when it was quantized: the compute
  // dtype assumed (a model loaded in fp32 would dequantize to fp32, then `.to(grad dtype)`).
  d.op.fwd_transient_bytes = bytes(nw, cdt) + mul(2, nf4_absmax_fp32_bytes(nw));
  d.op.bwd_transient_bytes = bytes(nw, cdt) + nf4_absmax_fp32_bytes(nw);
  const int64_t mm = mul(mul(2, n), nw);
  d.op.fwd.flops = mm;
  d.op.bwd.flops = mm;
  d.op.sac_save = true;
  bld.add_op(std::move(d));
  return o.cast(y, in_dt, "4-bit output cast", out_role);
}

}  // namespace

void lora_input_embeddings(Builder& bld, const Dims& dm, int32_t x, bool summed) {
  if (!summed) {
    bld.hold_until_step_end(x);
    return;
  }
  // The lookup's output, summed with the position (and token-type) embeddings into x by the
  // embedding op, where it is counted as a transient; here it is the tensor the graph keeps.
  // (Its gradient, accumulated into its .grad at the end of backward and kept to the step's end
  // too, is not modeled.)
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kCopy, "input embeddings (kept: requires grad)");
  d.op.math16 = false;
  d.exec = Exec::kHeld;  // exec11: only held, never read (its values do not matter)
  const Tensor t = bld.tensor(x);
  const int32_t e = bld.fresh(bytes(mul(dm.n_full(), dm.h), t.dtype), t.dtype,
                              "input embeddings (requires grad)");
  d.outputs.push_back(e);
  bld.add_op(std::move(d));
  bld.model_level(e);
  bld.hold_until_step_end(e);
}

int32_t lora_linear(Builder& bld, const Dims& dm, int32_t x, int64_t in_f, int64_t out_f,
                    bool bias, const char* name, const char* out_role, int32_t shared_param,
                    LinearSite site) {
  Ops o(bld, dm);
  const bool target = (site_of(site) & dm.lora_targets) != 0;
  // bitsandbytes replaces every nn.Linear but the output layer (transformers
  // get_keys_to_not_convert keeps lm_head, tied or not, in full precision).
  const bool quant = dm.qlora && shared_param < 0 && site != LinearSite::kLmHead;
  int32_t result = quant ? nf4_linear(bld, o, dm, x, in_f, out_f, bias, name, out_role, site)
                         : frozen_linear(bld, o, dm, x, in_f, out_f, bias, name, out_role,
                                         shared_param, site);
  if (!target) return result;

  const Tensor tr = bld.tensor(result);
  const int64_t n = numel_of(tr) / out_f;
  if (quant)  // bnb.py Linear4bit.forward: "defensively clone"
    result = pointwise(bld, o, OpKind::kCopy, result, tr.bytes, tr.dtype, "lora base clone",
                       out_role, true, Exec::kCopy);
  // The adapter's own parameters are trainable: built as ordinary linears. moe2: in fp32 under
  // every regime: get_peft_model's autocast_adapter_dtype=True upcasts bf16/fp16 adapter weights
  // to fp32 (peft tuners_utils.py cast_adapter_dtype @ 5d602fdb), so under bf16-mixed (a bf16
  // base, no autocast) the adapters are fp32 and compute in fp32.
  Dims plain = dm;
  plain.lora_rank = 0;
  // feat3: under fsdp2-bf16 the adapters' fp32 shards are all-gathered as bf16 (FSDP2's
  // MixedPrecisionPolicy param_dtype casts every parameter of the module): lora_A.weight is
  // bf16 during forward, so _cast_input_dtype casts nothing and the adapter computes in bf16.
  // hfds: under deepspeed-bf16 DeepSpeedEngine's module.bfloat16() (engine.py @ v0.16.2) runs
  // after get_peft_model and casts the adapters back to bf16: the same.
  const DType adapter_dt =
      dm.precision == Precision::kFsdp2Bf16 || dm.precision == Precision::kDeepspeedBf16
          ? dm.param_dt
          : DType::kF32;
  plain.param_dt = adapter_dt;
  Ops po(bld, plain);
  bld.freeze_params = false;
  int32_t xa = x;
  // _cast_input_dtype(x, lora_A.weight.dtype): the plain layer casts x to the adapter's dtype;
  // bnb's Linear4bit layer does not under autocast (requires_conversion = not autocast).
  if (!quant || !dm.amp) xa = o.cast(x, adapter_dt, "lora input cast", "lora input cast");
  // lora_dropout: nn.Identity at 0.0 (LoraConfig's default: Ops::dropout makes no op); feat13:
  // nn.Dropout(p) above it (update_layer @ 5d602fdb), on the input already cast to the adapter's
  // dtype: native_dropout keeps a 1-byte bool mask per element (saved; census
  // "llama-lora-dropout-*") and makes the dropped copy, which lora_A saves for its weight
  // gradient in place of the input (under autocast its 16-bit cast instead; the copy is then a
  // transient)
  xa = o.dropout(xa, dm.lora_dropout, "lora dropout");
  const int32_t a = po.linear(xa, in_f, dm.lora_rank, false, Ops::Tp::kNone, "lora_A", "lora_A out");
  const int32_t bo = po.linear(a, dm.lora_rank, out_f, false, Ops::Tp::kNone, "lora_B", "lora_B out");
  bld.freeze_params = true;
  const Tensor tb = bld.tensor(bo);
  // `* scaling` (a Python float: MulBackward0 keeps only the scalar)
  // exec11: the scalar is PEFT's default lora_alpha / r (LoraConfig lora_alpha = 8 @ 5d602fdb);
  // it changes no byte, only the executor's values
  const int32_t sc = pointwise(bld, o, OpKind::kMul, bo, tb.bytes, tb.dtype, "lora scaling",
                               "lora scaled", false, Exec::kScale,
                               static_cast<float>(8.0 / static_cast<double>(dm.lora_rank)));
  // result + that: the sum in the promoted dtype; the gradient passes to both
  const DType dt = promote(bld.tensor(result).dtype, tb.dtype);
  OpDraft d = o.draft(OpKind::kAdd, "lora add");
  d.exec = Exec::kAdd;  // exec11
  d.inputs.push_back({result, GradRule::kPass, 0});
  d.inputs.push_back({sc, GradRule::kPass, 0});
  const int32_t z = bld.fresh(bytes(mul(n, out_f), dt), dt, out_role);
  d.outputs.push_back(z);
  bld.add_op(std::move(d));
  // result.to(torch_result_dtype): a copy back when the sum was promoted (bf16-mixed: a bf16
  // base result plus the fp32 adapter path); a no-op otherwise
  return o.cast(z, tr.dtype, "lora result cast", out_role);
}

}  // namespace detail
}  // namespace sim

namespace sim::impl_rows {

void resolve_lora(const ModelConfig& model, const ImplSpec& spec, TrainSetup& s) {
  if (s.lora_rank < 0)
    throw ConfigError("--lora-rank", "lora_rank", "must be 0 (full fine-tuning) or a positive rank");
  if (s.lora_rank == 0) {
    if (s.qlora) throw ConfigError("--qlora", "qlora", "QLoRA trains LoRA adapters: it needs --lora-rank");
    if (s.lora_targets != 0)
      throw ConfigError("--lora-targets", "lora_targets", "needs --lora-rank");
    if (s.lora_dropout != 0.0)  // feat13
      throw ConfigError("--lora-dropout", "lora_dropout", "needs --lora-rank");
    return;
  }
  // feat13: LoraConfig.lora_dropout feeds nn.Dropout(p=lora_dropout), which takes [0, 1]; p = 1
  // drops every element (the adapters learn nothing): refused as --dropout is
  if (!(s.lora_dropout >= 0.0 && s.lora_dropout < 1.0))
    throw ConfigError("--lora-dropout", "lora_dropout", "must be a probability in [0, 1)");
  const std::string impl(spec.name);
  if (!spec.lora)
    throw NotInCode("--lora-rank", "lora_rank",
                    "LoRA under --impl " + impl + " (HF PEFT runs on transformers: --impl hf)");
  // lora6 (issue 13): MoE experts (blocks_moe.cpp, marked where they are made), T5's q/k/v/o/
  // wi/wo and MLA's projections now carry their sites; the refusals polish added for them
  // (5eb1f00) are gone. What stays refused is below, per target.
  const Precision p = resolved_precision(s);
  // moe2: bf16-mixed is a bf16 base without autocast, PEFT's adapters upcast to fp32 (lora_linear).
  // feat3: LoRA under ZeRO-3 and fsdp2-bf16 shards the frozen base with the adapters
  // (add_persistent_state, Storage::frozen); QLoRA under bf16-mixed is bitsandbytes' bf16 compute
  // without autocast over prepare_model_for_kbit_training's fp32 rest (make_dims).
  if (s.qlora && p == Precision::kFp32)
    throw ConfigError("--qlora", "qlora",
                      "QLoRA computes in 16 bits (bnb_4bit_compute_dtype): --precision "
                      "bf16-mixed (no autocast), bf16-amp or fp16-amp");
  if (s.qlora && p == Precision::kFsdp2Bf16)
    throw Unsupported("--qlora", "qlora",
                      "QLoRA under fsdp2-bf16 (bitsandbytes' packed uint8 weights under FSDP "
                      "need bnb_4bit_quant_storage set to the param dtype: not modeled)");
  if (s.qlora && p == Precision::kDeepspeedBf16)  // hfds
    throw Unsupported("--qlora", "qlora",
                      "QLoRA under deepspeed-bf16 (DeepSpeed's module.bfloat16() over "
                      "bitsandbytes' 4-bit weights: not modeled)");
  if (s.qlora && is_moe(model) && model.family == "deepseek_v2")  // lora6
    throw Unsupported("--qlora", "qlora",
                      "QLoRA on deepseek_v2 (bitsandbytes converts nn.Linear modules only: its 3D "
                      "expert weights and the router's F.linear on a 4-bit gate.weight are not "
                      "modeled)");
  if (s.qlora && s.zero >= 3)
    throw Unsupported("--qlora", "qlora",
                      "QLoRA with ZeRO-3 (DeepSpeed partitioning of bitsandbytes' 4-bit weights: "
                      "not modeled)");
  const bool gated = model.mlp == MlpKind::kSwiglu || model.mlp == MlpKind::kGeglu;  // T5 wi_0
  const bool fused = spec.qkv == QkvVariant::kFused ||
                     (spec.qkv == QkvVariant::kArchitecture &&
                      (model.family == "gpt2" || model.family == "megatron-gpt" ||
                       model.fused_qkv));  // NeoX, Falcon, Phi-3: one query_key_value / qkv_proj
  const uint32_t qkv = kLoraQ | kLoraK | kLoraV;
  if (s.lora_targets == 0) {
    // utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING @ 5d602fdb:
    // gpt2 ["c_attn"], llama/mistral/qwen2 ["q_proj", "v_proj"], bert ["query", "value"];
    // lora6: t5 ["q", "v"], mixtral ["q_proj", "v_proj"], gpt_neox and falcon
    // ["query_key_value"] (the fused module whole). phi3, qwen2_moe and deepseek_v2 have none.
    if (model.family == "gpt2" || model.family == "gpt_neox" || model.family == "falcon")
      s.lora_targets = qkv;
    else if (model.family == "llama" || model.family == "mistral" || model.family == "qwen2" ||
             model.family == "bert" || model.family == "t5" || model.family == "mixtral")
      s.lora_targets = kLoraQ | kLoraV;
    else
      throw ConfigError("--lora-targets", "lora_targets",
                        "PEFT has no default target modules for the " + model.family +
                            " family: name them (q,k,v,o,gate,up,down,q_a,q_b,kv_a,kv_b,gate_up "
                            "or all-linear)");
  }
  const uint32_t t = s.lora_targets;
  // feat13 (issue 13): PEFT's target_parameters. DeepSeek-V2 under transformers stores its routed
  // experts as 3-D parameters (DeepseekV2Experts); the MoE families of the code read (Mixtral,
  // Qwen2-MoE) keep nn.Linear experts, which target_modules reach (gate, up, down).
  if (t & (kLoraParamGateUp | kLoraParamDown)) {
    const std::string name =
        (t & kLoraParamGateUp) ? "experts.gate_up_proj" : "experts.down_proj";
    if (!(is_moe(model) && model.family == "deepseek_v2"))
      throw ConfigError("--lora-targets", "lora_targets",
                        name + " names no parameter in " + model.family +
                            (is_moe(model) ? ": its experts are nn.Linear modules (gate, up, down)"
                                           : ": it has no routed experts"));
    // ParamWrapper (layer.py @ 5d602fdb) raises on lora_dropout != 0
    if (s.lora_dropout != 0.0)
      throw NotInCode("--lora-dropout", "lora_dropout",
                      "lora_dropout with target_parameters (PEFT's ParamWrapper raises: dropout "
                      "cannot be factored out of the merged weight)");
    // _activate_lora: get_delta_weight's einsum of lora_B and lora_A ([E, out, in] * scaling),
    // registered as a parametrization W + delta under parametrize.cached(): a whole merged copy
    // of each targeted 3-D weight per layer, kept by the experts' F.linear until backward, and a
    // full-size weight gradient in backward. Not built yet.
    throw Unsupported("--lora-targets", "lora_targets",
                      name + " (PEFT target_parameters: ParamWrapper's merged W + delta of the "
                             "3-D expert weights, kept per layer to backward)");
  }
  if (t == kLoraAllLinear) return;  // all-linear: every linear the model has (the head aside)
  // lora6: a name that reaches no module of the model is refused in one line (PEFT matches
  // target_modules by exact suffix after a dot, tuners_utils.py check_target_module_exists
  // @ 5d602fdb: `q_proj` does not reach `qkv_proj`, nor `gate_proj` `gate_up_proj`).
  auto none = [&](const std::string& name, const std::string& why) {
    throw ConfigError("--lora-targets", "lora_targets",
                      name + " names no module in " + model.family + ": " + why);
  };
  const bool mla = is_mla(model);
  if ((t & kLoraGate) && !gated) none("gate", "its MLP has no gate projection");
  if (model.fused_gate_up && (t & (kLoraGate | kLoraUp)) != 0)
    none((t & kLoraGate) ? "gate" : "up", "gate and up are one module (gate_up_proj): name gate_up");
  if ((t & kLoraGateUp) && !model.fused_gate_up)
    none("gate_up", "its gate and up projections are separate modules (gate, up)");
  if (mla) {
    if (t & (kLoraK | kLoraV))
      none((t & kLoraK) ? "k" : "v",
           "MLA has no key or value projection (kv_a_proj_with_mqa: kv_a, kv_b_proj: kv_b)");
    if ((t & kLoraQ) && model.q_lora_rank > 0)
      none("q", "its queries go through q_a_proj and q_b_proj (q_a, q_b)");
    if ((t & (kLoraQA | kLoraQB)) && model.q_lora_rank == 0)
      none((t & kLoraQA) ? "q_a" : "q_b", "its queries are one q_proj (q): q_lora_rank is 0");
  } else if (t & (kLoraQA | kLoraQB | kLoraKvA | kLoraKvB)) {
    none((t & kLoraQA) ? "q_a" : (t & kLoraQB) ? "q_b" : (t & kLoraKvA) ? "kv_a" : "kv_b",
         "those are MLA's projections");
  }
  if (fused && (t & qkv) != 0 && (t & qkv) != qkv)
    throw ConfigError("--lora-targets", "lora_targets",
                      "q, k and v are one module in " + model.family +
                          " (one fused projection): target all three or none");
}

}  // namespace sim::impl_rows
