// exec14 (issue 10): the CPU executor's kernels for Megatron's fused MLA rope, as the Triton
// kernels of NVIDIA/Megatron-LM @ d98e8a64ddf3 megatron/core/fusions/fused_mla_yarn_rope_apply.py
// compute them at the defaults multi_latent_attention.py calls them with (rotary_interleaved
// False, remove_interleaving False, inverse False, sbhd, no CP):
//  - _mla_rope_fwd_inplace_kernel: x1 = t[nope + 2i], x2 = t[nope + 2i + 1] (i < rope / 2);
//    left = x1 cos[i] - x2 sin[i], right = x2 cos[rope/2 + i] + x1 sin[rope/2 + i], stored at
//    nope + i and nope + rope/2 + i (the rotated part leaves de-interleaved);
//  - _mla_rope_bwd_inplace_kernel: from the gradient's (left, right) halves,
//    d x1 = dl cos[i] + dr sin[rope/2 + i], d x2 = -dl sin[i] + dr cos[rope/2 + i], stored
//    interleaved: the transpose of the forward;
//  - _mla_rope_fwd_kv_split_kernel: key[t, h] = (kv[t, h, :nope], rotate(k_pos_emb[t])),
//    value[t, h] = kv[t, h, nope:]; _mla_rope_bwd_kv_split_kernel: d kv = (d key's nope part,
//    d value), d k_pos_emb = the inverse rotation of the sum over heads of d key's rope part.
// Layouts are the executor's: token t = batch * s + position (the tables' row is t % s); a row
// of q / kv / key / value is one (token, head). Tables: cos [s, rope] then sin [s, rope].
#pragma once

#include <cstdint>
#include <vector>

namespace executor::mla_rope {

using Vec = std::vector<double>;

// YarnRotaryEmbedding at scaling factor 1 (yarn_rotary_pos_embedding.py: inv_freq
// theta^(-2j/rope), emb = cat(freqs, freqs), the concentration factor 1): cos then sin.
Vec tables(int64_t s, int64_t rope, double theta);

// In place on `q` ([rows, nope + rope]); `backward`: the inverse rotation, on the gradient.
void rotate_q(Vec& q, const Vec& tables, int64_t s, int64_t heads, int64_t nope, int64_t rope,
              bool backward);

// Forward: key [tokens, heads, nope + rope], value [tokens, heads, v] from kv and k_pos_emb.
void kv_split_forward(const Vec& kv, const Vec& emb, const Vec& tables, int64_t s, int64_t heads,
                      int64_t nope, int64_t rope, int64_t v, Vec& key, Vec& value);
// Backward: d kv and d k_pos_emb from d key and d value.
void kv_split_backward(const Vec& dkey, const Vec& dvalue, const Vec& tables, int64_t s,
                       int64_t heads, int64_t nope, int64_t rope, int64_t v, Vec& dkv, Vec& demb);

}  // namespace executor::mla_rope
