// exec14 (issue 10): Megatron's fused MLA rope on the CPU (see mla_rope.hpp for the source).
#include "mla_rope.hpp"

#include <cmath>

namespace executor::mla_rope {

namespace {

// The rotation of one rope part: `in` read at in[2i], in[2i + 1], `out` written at out[i],
// out[half + i] (forward); the backward reads halves and writes pairs.
struct Rot {
  const double* cs;  // cos row of the token's position
  const double* sn;  // sin row
  int64_t half;
  void forward(const double* in, double* out) const {
    for (int64_t i = 0; i < half; ++i) {
      const double x1 = in[2 * i], x2 = in[2 * i + 1];
      out[i] = x1 * cs[i] - x2 * sn[i];
      out[half + i] = x2 * cs[half + i] + x1 * sn[half + i];
    }
  }
  void backward(const double* in, double* out) const {
    for (int64_t i = 0; i < half; ++i) {
      const double dl = in[i], dr = in[half + i];
      out[2 * i] = dl * cs[i] + dr * sn[half + i];
      out[2 * i + 1] = -dl * sn[i] + dr * cs[half + i];
    }
  }
};

Rot rot(const Vec& t, int64_t s, int64_t rope, int64_t token) {
  const int64_t p = token % s;
  return {t.data() + p * rope, t.data() + (s + p) * rope, rope / 2};
}

}  // namespace

Vec tables(int64_t s, int64_t rope, double theta) {
  const int64_t half = rope / 2;
  Vec t(static_cast<size_t>(2 * s * rope));
  for (int64_t p = 0; p < s; ++p)
    for (int64_t j = 0; j < rope; ++j) {
      const double f = std::pow(theta, -2.0 * static_cast<double>(j % half) / static_cast<double>(rope));
      const double ang = static_cast<double>(p) * f;
      t[static_cast<size_t>(p * rope + j)] = std::cos(ang);
      t[static_cast<size_t>((s + p) * rope + j)] = std::sin(ang);
    }
  return t;
}

void rotate_q(Vec& q, const Vec& t, int64_t s, int64_t heads, int64_t nope, int64_t rope,
              bool backward) {
  const int64_t w = nope + rope, rows = static_cast<int64_t>(q.size()) / w;
  Vec tmp(static_cast<size_t>(rope));
  for (int64_t r = 0; r < rows; ++r) {
    const Rot R = rot(t, s, rope, r / heads);
    double* x = q.data() + r * w + nope;
    if (backward) R.backward(x, tmp.data()); else R.forward(x, tmp.data());
    for (int64_t j = 0; j < rope; ++j) x[j] = tmp[static_cast<size_t>(j)];
  }
}

void kv_split_forward(const Vec& kv, const Vec& emb, const Vec& t, int64_t s, int64_t heads,
                      int64_t nope, int64_t rope, int64_t v, Vec& key, Vec& value) {
  const int64_t tokens = static_cast<int64_t>(emb.size()) / rope;
  key.assign(static_cast<size_t>(tokens * heads * (nope + rope)), 0.0);
  value.assign(static_cast<size_t>(tokens * heads * v), 0.0);
  Vec r(static_cast<size_t>(rope));
  for (int64_t tok = 0; tok < tokens; ++tok) {
    rot(t, s, rope, tok).forward(emb.data() + tok * rope, r.data());
    for (int64_t h = 0; h < heads; ++h) {
      const double* in = kv.data() + (tok * heads + h) * (nope + v);
      double* k = key.data() + (tok * heads + h) * (nope + rope);
      double* val = value.data() + (tok * heads + h) * v;
      for (int64_t c = 0; c < nope; ++c) k[c] = in[c];
      for (int64_t c = 0; c < rope; ++c) k[nope + c] = r[static_cast<size_t>(c)];
      for (int64_t c = 0; c < v; ++c) val[c] = in[nope + c];
    }
  }
}

void kv_split_backward(const Vec& dkey, const Vec& dvalue, const Vec& t, int64_t s,
                       int64_t heads, int64_t nope, int64_t rope, int64_t v, Vec& dkv, Vec& demb) {
  const int64_t tokens = static_cast<int64_t>(dkey.size()) / (heads * (nope + rope));
  dkv.assign(static_cast<size_t>(tokens * heads * (nope + v)), 0.0);
  demb.assign(static_cast<size_t>(tokens * rope), 0.0);
  Vec acc(static_cast<size_t>(rope));
  for (int64_t tok = 0; tok < tokens; ++tok) {
    for (double& x : acc) x = 0.0;
    for (int64_t h = 0; h < heads; ++h) {
      const double* k = dkey.data() + (tok * heads + h) * (nope + rope);
      const double* val = dvalue.data() + (tok * heads + h) * v;
      double* out = dkv.data() + (tok * heads + h) * (nope + v);
      for (int64_t c = 0; c < nope; ++c) out[c] = k[c];
      for (int64_t c = 0; c < v; ++c) out[nope + c] = val[c];
      for (int64_t c = 0; c < rope; ++c) acc[static_cast<size_t>(c)] += k[nope + c];
    }
    rot(t, s, rope, tok).backward(acc.data(), demb.data() + tok * rope);
  }
}

}  // namespace executor::mla_rope
