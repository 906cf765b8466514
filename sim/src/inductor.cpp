// inductor (issue 10): torch.compile's min-cut partition of each compiled block (--compile on).
//
// Source: AOTAutograd's min_cut_rematerialization_partition, read in torch 1.13.1
// (functorch/_src/partitioners.py, Debian python3-torch 1.13.1+dfsg-4, the file torch 1.13's
// Inductor (torchinductor's compile_fx) calls with compiler="inductor"; upstream pytorch/pytorch
// v1.13.1, functorch/_src/partitioners.py:209-407). Per traced graph (here: one block):
//   - every forward node X is two vertices X_in -> X_out with capacity weight(X); X_out -> U_in
//     (infinite) for every user U; primal inputs hang off the source (infinite), and every node
//     the backward uses feeds the sink (infinite);
//   - a node whose op is not recomputable is banned: source -> X_in (infinite). Recomputable
//     (compiler "inductor", partitioners.py:278-282): pointwise ops (add, mul, pow, rsqrt, silu,
//     gelu, tanh, where, ...), softmax and its backward, sum/mean/amax, casts (_to_copy,
//     convert_element_type), clone and views. Banned: mm, bmm, addmm (compute intensive), dropout
//     (random), and everything else not listed (native_layer_norm, embedding, the flash kernel,
//     log_softmax, nll_loss). Also banned: a node more than 4 hops from the backward
//     (`dist_from_bw > 4`, inductor only) and one whose output is more than 4x smaller than its
//     tensor inputs (a reduction: the mean of RMSNorm's pow);
//   - weight(X) = int(bytes(X) * 1.1^clamp(dist_from_bw, 1, 100)), doubled when X and all its
//     users (forward consumers, backward readers) are fusible (not materialized);
//   - the cut is networkx.minimum_cut's: the sink side is what reaches the sink in the residual
//     graph; the nodes whose X_in -> X_out edge crosses the cut are saved, and the backward
//     recomputes, from them, every forward node it reads that is not saved.
// actsim's graph is coarser than the traced aten graph in one way: a view is not a node (it
// shares its base's storage), and an op such as the rotary chain is one op, so distances count op
// hops, not aten nodes. harness/inductor_partition.py measures torch 1.13's own partition of the
// same blocks; tests/test_inductor.cpp holds actsim's saved bytes to it.
#include "inductor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <tuple>

namespace sim::detail {
namespace {

// The op kinds the "inductor" list lets the backward recompute (partitioners.py:278-282).
bool recomputable(OpKind k) {
  switch (k) {
    case OpKind::kAdd: case OpKind::kMul: case OpKind::kGelu: case OpKind::kSilu:
    case OpKind::kCast: case OpKind::kCopy: case OpKind::kSplit: case OpKind::kRope:
    case OpKind::kSoftmax: case OpKind::kMask:
      return true;
    default:
      return false;
  }
}
// fusible_ops = recomputable | random ops (native_dropout)
bool fusible(OpKind k) { return recomputable(k) || k == OpKind::kDropout; }

// Dinic's max-flow on doubles (capacities are weighted bytes; infinite edges: kInf).
constexpr double kInf = 1e300;
struct Flow {
  struct Edge { int32_t to; double cap; };
  std::vector<Edge> e;
  std::vector<std::vector<int32_t>> adj;
  std::vector<int32_t> level, it;
  explicit Flow(int32_t n) : adj(static_cast<size_t>(n)) {}
  void add(int32_t u, int32_t v, double c) {
    adj[u].push_back(static_cast<int32_t>(e.size())), e.push_back({v, c});
    adj[v].push_back(static_cast<int32_t>(e.size())), e.push_back({u, 0});
  }
  bool bfs(int32_t s, int32_t t) {
    level.assign(adj.size(), -1);
    std::queue<int32_t> q;
    level[s] = 0, q.push(s);
    while (!q.empty()) {
      int32_t u = q.front();
      q.pop();
      for (int32_t id : adj[u])
        if (e[id].cap > 0 && level[e[id].to] < 0) level[e[id].to] = level[u] + 1, q.push(e[id].to);
    }
    return level[t] >= 0;
  }
  double dfs(int32_t u, int32_t t, double f) {
    if (u == t) return f;
    for (int32_t& i = it[u]; i < static_cast<int32_t>(adj[u].size()); ++i) {
      Edge& ed = e[adj[u][i]];
      if (ed.cap <= 0 || level[ed.to] != level[u] + 1) continue;
      double d = dfs(ed.to, t, std::min(f, ed.cap));
      if (d > 0) {
        ed.cap -= d;
        e[adj[u][i] ^ 1].cap += d;
        return d;
      }
    }
    return 0;
  }
  void run(int32_t s, int32_t t) {
    while (bfs(s, t)) {
      it.assign(adj.size(), 0);
      while (dfs(s, t, kInf) > 0) {
      }
    }
  }
  // networkx.minimum_cut's sink side: the vertices that reach t through edges with room left.
  std::vector<uint8_t> reaches(int32_t t) const {
    std::vector<std::vector<int32_t>> radj(adj.size());
    for (size_t u = 0; u < adj.size(); ++u)
      for (int32_t id : adj[u])
        if (e[id].cap > 0) radj[e[id].to].push_back(static_cast<int32_t>(u));
    std::vector<uint8_t> r(adj.size(), 0);
    std::vector<int32_t> st{t};
    r[t] = 1;
    while (!st.empty()) {
      int32_t v = st.back();
      st.pop_back();
      for (int32_t u : radj[v])
        if (!r[u]) r[u] = 1, st.push_back(u);
    }
    return r;
  }
};

struct BlockCut {
  std::vector<int32_t> ops;        // the block's ops, forward order
  std::vector<int32_t> local;      // storage -> node index (-1: not in the block's graph)
  std::vector<int32_t> nodes;      // node -> storage
  std::vector<uint8_t> cut;        // per node: saved
  std::vector<int32_t> producer;   // per node: producing op of the block, -1 for a primal
};

// Per storage: read by an op of another block than its producer's (the traced block's output).
std::vector<uint8_t> used_outside(const Graph& g) {
  std::vector<uint8_t> out(g.storages.size(), 0);
  for (const Op& op : g.ops)
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
      const int32_t p = g.storages[*s].producer;
      if (p >= 0 && g.ops[p].block != op.block) out[*s] = 1;
    }
  return out;
}

BlockCut solve(const Graph& g, int32_t block, std::vector<int32_t>& local,
               const std::vector<uint8_t>& used_after, PartitionRules rules) {
  const bool t2 = rules == PartitionRules::kTorch2;
  BlockCut bc;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i)
    if (g.ops[i].block == block) bc.ops.push_back(i);
  auto node = [&](int32_t s) {
    if (local[s] < 0) local[s] = static_cast<int32_t>(bc.nodes.size()), bc.nodes.push_back(s);
    return local[s];
  };
  for (int32_t i : bc.ops) {
    const Op& op = g.ops[i];
    for (IdxRange r : {op.inputs, op.outputs, op.saves})
      for (const int32_t* s = g.begin(r); s != g.end(r); ++s) node(*s);
  }
  const int32_t n = static_cast<int32_t>(bc.nodes.size());
  bc.producer.assign(n, -1);
  std::vector<uint8_t> bw_read(n, 0), bw_fusible(n, 1), fw_fusible(n, 1), outside(n, 0);
  std::vector<uint8_t> mm_read(n, 0);
  for (int32_t i : bc.ops) {
    const Op& op = g.ops[i];
    for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s)
      bc.producer[local[*s]] = i;
    if (!op.has_backward) continue;
    for (const int32_t* s = g.begin(op.saves); s != g.end(op.saves); ++s) {
      bw_read[local[*s]] = 1;
      if (!fusible(op.kind)) bw_fusible[local[*s]] = 0;  // e.g. mm's backward reads it
      // torch 1.13's matmul folds a >= 3-D operand into 2-D (or 3-D for bmm) with
      // aten._reshape_alias, which the inductor list does not name: that view is banned, and
      // the mm's backward reads it, so the operand's storage is saved whatever its producer.
      // at::linear takes that path without a bias (matmul(x, w.t())); with one it runs
      // addmm(b, x.view(-1, in), w.t()), and aten.view is recomputable (Linear.cpp, v1.13.1).
      const bool bias = op.param_numel == op.shape[1] * op.shape[2] + op.shape[2];
      if (op.kind == OpKind::kBmm || (op.kind == OpKind::kLinear && !bias)) mm_read[local[*s]] = 1;
    }
  }
  // Used after the block (the traced graph's output node: neither a backward nor fusible user).
  for (int32_t v = 0; v < n; ++v) outside[v] = bc.producer[v] >= 0 && used_after[bc.nodes[v]];
  // dist_from_bw (partitioners.py:267-273): 1 for a node a backward node or the output reads,
  // else one more than the least of its users'.
  constexpr int64_t kFar = 1000000000;
  std::vector<int64_t> dist(n, kFar);
  for (int32_t v = 0; v < n; ++v)
    if (bw_read[v] || outside[v]) dist[v] = 1;
  for (auto it = bc.ops.rbegin(); it != bc.ops.rend(); ++it) {
    const Op& op = g.ops[*it];
    int64_t d = kFar;
    for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s)
      d = std::min(d, dist[local[*s]]);
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
      const int32_t v = local[*s];
      dist[v] = std::min(dist[v], std::min(d, kFar - 1) + 1);
      if (!fusible(op.kind)) fw_fusible[v] = 0;
    }
  }
  // torch 2 (ban_if_used_far_apart, partitioners.py @ c28ba8e5 solve_min_cut): a fusible user
  // of a fusible node that comes after the first unfusible op reachable from the node's users
  // through fusible edges (within the last user) is banned.
  std::vector<uint8_t> far_banned(n, 0);
  if (t2) {
    std::vector<std::vector<int32_t>> cons(n);
    for (int32_t i : bc.ops) {
      const Op& op = g.ops[i];
      for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) cons[local[*s]].push_back(i);
    }
    using Item = std::tuple<int32_t, int32_t, bool>;  // (op, op, fusible edge)
    for (int32_t v = 0; v < n; ++v) {
      const int32_t p = bc.producer[v];
      if (p < 0 || cons[v].empty() || !fusible(g.ops[p].kind)) continue;
      const int32_t max_range = cons[v].back();
      std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
      for (int32_t c : cons[v]) heap.emplace(c, c, true);
      int32_t first = max_range;
      while (!heap.empty()) {
        auto [order, o, ok] = heap.top();
        heap.pop();
        if (!ok) {
          first = order;
          break;
        }
        const Op& op = g.ops[o];
        for (const int32_t* t = g.begin(op.outputs); t != g.end(op.outputs); ++t)
          for (int32_t c : cons[local[*t]])
            if (c <= max_range) heap.emplace(c, c, fusible(op.kind) && fusible(g.ops[c].kind));
      }
      for (int32_t c : cons[v])
        if (c > first && fusible(g.ops[c].kind)) {
          const Op& op = g.ops[c];
          for (const int32_t* t = g.begin(op.outputs); t != g.end(op.outputs); ++t) far_banned[local[*t]] = 1;
        }
    }
  }
  const int32_t src = 2 * n, snk = 2 * n + 1;
  Flow f(2 * n + 2);
  for (int32_t v = 0; v < n; ++v) {
    const int32_t s = bc.nodes[v];
    const int64_t bytes = g.storages[s].bytes;
    const int32_t p = bc.producer[v];
    bool banned = p < 0;  // a primal input: from the source
    bool materialized = p < 0 || outside[v] || !bw_fusible[v] || !fw_fusible[v];
    if (p >= 0) {
      const Op& op = g.ops[p];
      int64_t in_bytes = 0;
      for (const int32_t* t = g.begin(op.inputs); t != g.end(op.inputs); ++t)
        in_bytes += g.storages[*t].bytes;
      if (t2)  // should_ban_recomputation @ c28ba8e5: not in the list (softmax is not), a node a
               // non-fusible backward op reads (materialized backward: views are transparent),
               // a reduction; max_dist_from_bw is 1000 (functorch config): no distance ban
        banned = !recomputable(op.kind) || op.kind == OpKind::kSoftmax || !bw_fusible[v] ||
                 bytes * 4 < in_bytes || far_banned[v];
      else
        banned = !recomputable(op.kind) || dist[v] > 4 || bytes * 4 < in_bytes || mm_read[v];
      materialized = materialized || !fusible(op.kind);
    }
    if (banned) f.add(src, 2 * v, kInf);
    const double w = std::floor(static_cast<double>(bytes) *
                                std::pow(1.1, static_cast<double>(std::clamp<int64_t>(dist[v], 1, 100))));
    f.add(2 * v, 2 * v + 1, materialized ? w : 2 * w);
    if (bw_read[v]) f.add(2 * v + 1, snk, kInf);
  }
  for (int32_t i : bc.ops) {
    const Op& op = g.ops[i];
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s)
      for (const int32_t* t = g.begin(op.outputs); t != g.end(op.outputs); ++t)
        f.add(2 * local[*s] + 1, 2 * local[*t], kInf);
  }
  f.run(src, snk);
  const std::vector<uint8_t> sink_side = f.reaches(snk);
  bc.cut.assign(n, 0);
  for (int32_t v = 0; v < n; ++v) bc.cut[v] = !sink_side[2 * v] && sink_side[2 * v + 1];
  return bc;
}

// --- time8 (issue 11): Inductor's kernel fusion, in time ---
// Source: torch/_inductor/scheduler.py (read at pytorch/pytorch 001077cb, the version the search
// index holds; c28ba8e5, the partitioner's commit above, could not be fetched here: the
// repository is larger than a snapshot may be): Scheduler.get_possible_fusions pairs nodes that
// use a common buffer, can_fuse admits pointwise and reduction nodes, and
// will_fusion_create_cycle refuses a fusion that would make a path through another node run
// both before and after the fused kernel; extern kernels (aten.mm/addmm through cuBLAS with
// max_autotune off, SDPA's flash kernel, collectives) are not fused. A fused kernel reads each of
// its inputs once and writes only the buffers something outside it reads (a later kernel, the
// backward through the partition's saves, the next block); the rest stays in registers. The
// backward graph is compiled the same way: the backward of a fused group is one kernel that
// reads the incoming gradients and what it needs of the saved tensors (recomputing the
// partition's non-saved pointwise nodes inline) and writes the gradients of the group's inputs.
// A non-saved tensor an extern kernel's backward reads (the RMSNorm output the mm's weight
// gradient needs) is recomputed by one kernel before it (once per block: the latest reader runs
// first). Modeled coarser than Inductor in two ways: a group is one kernel (a reduction whose
// ranges differ from its consumer's is split there: a few launches more in a real run), and
// ops that share only an input (horizontal fusion: get_possible_fusions pairs them too) are
// not fused. Not measured: no GPU here, and torch 1.13's CPU Inductor is not torch 2's.
bool fused_kind(const Op& op) {
  switch (op.kind) {
    case OpKind::kLayerNorm: case OpKind::kRmsNorm: case OpKind::kMask: case OpKind::kSoftmax:
    case OpKind::kDropout: case OpKind::kGelu: case OpKind::kSilu: case OpKind::kMul:
    case OpKind::kAdd: case OpKind::kCast: case OpKind::kCopy: case OpKind::kSplit:
    case OpKind::kRope:
      return op.fwd.comm_kind == 0 && op.bwd.comm_kind == 0 && op.fwd.flops == 0 &&
             op.bwd.flops == 0 && !op.fp8;
    default:
      return false;
  }
}
bool floating(DType t) { return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32; }

void fuse_block(Graph& g, const BlockCut& bc, const std::vector<int32_t>& local,
                const std::vector<uint8_t>& used_after, const std::vector<IdxRange>& eager) {
  const int32_t m = static_cast<int32_t>(bc.ops.size());
  const int32_t n = static_cast<int32_t>(bc.nodes.size());
  auto pos = [&](int32_t op) {  // index in bc.ops, -1 outside the block
    auto it = std::lower_bound(bc.ops.begin(), bc.ops.end(), op);
    return it != bc.ops.end() && *it == op ? static_cast<int32_t>(it - bc.ops.begin()) : -1;
  };
  // Levels: an extern kernel's outputs are one level above its inputs, a fused op's at its
  // inputs' level; a path through an extern kernel raises the level, so two fused ops of one
  // level joined producer to consumer make no cycle (scheduler.py will_fusion_create_cycle).
  std::vector<int32_t> lvl(n, 0), ep(m, 0), parent(m);
  std::vector<uint8_t> fz(m, 0);
  for (int32_t k = 0; k < m; ++k) {
    const Op& op = g.ops[bc.ops[k]];
    parent[k] = k;
    fz[k] = fused_kind(op);
    int32_t e = 0;
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) e = std::max(e, lvl[local[*s]]);
    ep[k] = e;
    for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s) lvl[local[*s]] = fz[k] ? e : e + 1;
  }
  auto find = [&](int32_t k) {
    while (parent[k] != k) k = parent[k] = parent[parent[k]];
    return k;
  };
  for (int32_t k = 0; k < m; ++k) {
    if (!fz[k]) continue;
    const Op& op = g.ops[bc.ops[k]];
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
      const int32_t p = bc.producer[local[*s]];
      const int32_t kp = p >= 0 ? pos(p) : -1;
      if (kp >= 0 && fz[kp] && ep[kp] == ep[k]) parent[find(kp)] = find(k);
    }
  }
  std::vector<int32_t> group(m, -1);  // per op: its group's root, -1 for an extern kernel
  for (int32_t k = 0; k < m; ++k) group[k] = fz[k] ? find(k) : -1;
  auto group_of_node = [&](int32_t v) {
    const int32_t p = bc.producer[v];
    const int32_t k = p >= 0 ? pos(p) : -1;
    return k >= 0 ? group[k] : -1;
  };
  // Consumers of each node outside its producer's group (forward), and whether they have a
  // backward (the node's gradient comes back into the group).
  std::vector<uint8_t> read_outside(n, 0), grad_back(n, 0);
  for (int32_t k = 0; k < m; ++k) {
    const Op& op = g.ops[bc.ops[k]];
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
      const int32_t v = local[*s];
      const int32_t gv = group_of_node(v);
      if (gv < 0 || gv == group[k]) continue;
      read_outside[v] = 1;
      if (op.has_backward) grad_back[v] = 1;
    }
  }
  for (int32_t v = 0; v < n; ++v)
    if (used_after[bc.nodes[v]]) read_outside[v] = grad_back[v] = 1;
  // What a backward kernel reads for a saved tensor: itself if the partition saved it (or it is
  // not a fused op's output), else the sources its fused producers are recomputed from.
  std::vector<uint8_t> mark(n, 0);
  std::vector<int32_t> marked, stack;
  auto sources = [&](int32_t v0) {
    int64_t bytes = 0;
    stack.push_back(v0);
    while (!stack.empty()) {
      const int32_t v = stack.back();
      stack.pop_back();
      if (mark[v]) continue;
      mark[v] = 1, marked.push_back(v);
      const int32_t p = bc.producer[v];
      const int32_t k = p >= 0 ? pos(p) : -1;
      if (bc.cut[v] || k < 0 || !fz[k]) {
        bytes += g.storages[bc.nodes[v]].bytes;
        continue;
      }
      const Op& po = g.ops[p];
      for (const int32_t* t = g.begin(po.inputs); t != g.end(po.inputs); ++t) stack.push_back(local[*t]);
    }
    return bytes;
  };
  auto clear_marks = [&] {
    for (int32_t v : marked) mark[v] = 0;
    marked.clear();
  };
  // Per group: forward bytes (inputs once, outputs read elsewhere or saved), backward bytes.
  std::vector<uint8_t> seen(n, 0);
  std::vector<int32_t> seen_list;
  for (int32_t root = 0; root < m; ++root) {
    if (!fz[root] || group[root] != root) continue;
    int64_t fwd = 0, bwd = 0;
    int32_t first = -1, last = -1, params = 0;
    std::vector<int32_t> persistent;
    bool any_bwd = false;
    for (int32_t k = 0; k < m; ++k) {
      if (group[k] != root) continue;
      if (first < 0) first = k;
      last = k;
      const Op& op = g.ops[bc.ops[k]];
      any_bwd = any_bwd || op.has_backward;
      for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
        const int32_t v = local[*s];
        if (group_of_node(v) == root || seen[v]) continue;
        seen[v] = 1, seen_list.push_back(v);
        const Storage& st = g.storages[*s];
        fwd += st.bytes;
        // its gradient, written by the backward kernel: an activation made by an op with a
        // backward, or a trainable parameter (its reduction over tokens: one kernel more)
        const bool param = st.producer < 0 && st.category == Category::kWeights && !st.frozen &&
                           std::find(g.param_storages.begin(), g.param_storages.end(), *s) !=
                               g.param_storages.end();
        if (param) bwd += st.bytes, ++params;
        else if (st.producer >= 0 && g.ops[st.producer].has_backward && floating(st.dtype)) bwd += st.bytes;
      }
      // persistent inputs (parameters, buffers): read once each way; a parameter's gradient is
      // a reduction over the tokens, one kernel more
      for (const int32_t* s = g.begin(op.persistent_reads); s != g.end(op.persistent_reads); ++s) {
        if (std::find(persistent.begin(), persistent.end(), *s) != persistent.end()) continue;
        persistent.push_back(*s);
        const Storage& st = g.storages[*s];
        fwd += st.bytes;
        if (op.has_backward) bwd += st.bytes;  // read again (not among the saves: persistent)
        if (!st.frozen && std::find(g.param_storages.begin(), g.param_storages.end(), *s) !=
                              g.param_storages.end())
          bwd += st.bytes, ++params;  // its gradient
      }
      for (const int32_t* s = g.begin(op.outputs); s != g.end(op.outputs); ++s) {
        const int32_t v = local[*s];
        const int64_t b = g.storages[*s].bytes;
        if (read_outside[v] || bc.cut[v]) fwd += b;
        if (grad_back[v] && floating(g.storages[*s].dtype)) bwd += b;  // incoming gradient
      }
      if (op.has_backward)
        for (const int32_t* s = g.begin(eager[bc.ops[k]]); s != g.end(eager[bc.ops[k]]); ++s)
          bwd += sources(local[*s]);
    }
    clear_marks();
    for (int32_t v : seen_list) seen[v] = 0;
    seen_list.clear();
    for (int32_t k = first; k <= last; ++k) {
      if (group[k] != root) continue;
      Op& op = g.ops[bc.ops[k]];
      op.fwd.bytes = k == first ? fwd : 0;
      op.fwd.kernels = k == first && fwd > 0 ? 1 : 0;
      op.bwd.bytes = k == last && any_bwd ? bwd : 0;
      op.bwd.kernels = static_cast<uint8_t>(k == last && any_bwd && bwd > 0 ? 1 + std::min(params, 8) : 0);
    }
  }
  // A torchao Float8 linear's input cast (sim/src/fp8.cpp) of an input an earlier Float8 linear
  // of the block cast already: the same nodes, one after AOTAutograd's fx_graph_cse.
  std::vector<int32_t> cast_inputs;
  for (int32_t k = 0; k < m; ++k) {
    Op& op = g.ops[bc.ops[k]];
    if (!op.fp8 || op.fwd_serial_bytes <= 0) continue;
    for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s) {
      const Storage& st = g.storages[*s];
      if (st.producer < 0) continue;  // the weight
      if (std::find(cast_inputs.begin(), cast_inputs.end(), *s) == cast_inputs.end()) {
        cast_inputs.push_back(*s);
        continue;
      }
      const int64_t cast = kFp8CompiledCastBytesPerElem * (st.bytes / bytes_of(st.dtype));
      if (op.fwd_serial_bytes >= cast && op.fwd_serial_kernels >= kFp8CompiledCastKernels)
        op.fwd_serial_bytes -= cast, op.fwd_serial_kernels -= kFp8CompiledCastKernels;
    }
  }
  // Recomputation before an extern kernel's backward: one kernel per reader writing the non-saved
  // fused outputs it reads (each once per block: the latest reader's backward runs first).
  std::vector<uint8_t> done(n, 0);
  for (int32_t k = m - 1; k >= 0; --k) {
    if (fz[k]) continue;
    Op& op = g.ops[bc.ops[k]];
    if (!op.has_backward) continue;
    int64_t bytes = 0;
    for (const int32_t* s = g.begin(eager[bc.ops[k]]); s != g.end(eager[bc.ops[k]]); ++s) {
      const int32_t v = local[*s];
      const int32_t p = bc.producer[v];
      const int32_t kp = p >= 0 ? pos(p) : -1;
      if (bc.cut[v] || kp < 0 || !fz[kp] || done[v]) continue;
      done[v] = 1;
      bytes += g.storages[*s].bytes;  // written
      const Op& po = g.ops[p];
      for (const int32_t* t = g.begin(po.inputs); t != g.end(po.inputs); ++t) bytes += sources(local[*t]);
    }
    clear_marks();
    if (bytes > 0) {
      op.bwd.bytes += bytes;
      op.bwd.kernels = static_cast<uint8_t>(std::min(255, op.bwd.kernels + 1));
    }
  }
}
// --- end time8 ---

}  // namespace

BlockPartition inductor_block_partition(const Graph& g, int32_t block, PartitionRules rules) {
  std::vector<int32_t> local(g.storages.size(), -1);
  BlockCut bc = solve(g, block, local, used_outside(g), rules);
  BlockPartition out;
  for (size_t v = 0; v < bc.nodes.size(); ++v)
    if (bc.cut[v]) out.saved.push_back(bc.nodes[v]);
  std::sort(out.saved.begin(), out.saved.end());
  // what the backward recomputes: not saved, but read by a backward directly or through others
  std::vector<uint8_t> seen(bc.nodes.size(), 0);
  std::vector<int32_t> stack;
  for (int32_t i : bc.ops) {
    const Op& op = g.ops[i];
    if (!op.has_backward) continue;
    for (const int32_t* s = g.begin(op.saves); s != g.end(op.saves); ++s) stack.push_back(local[*s]);
  }
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    if (seen[v] || bc.cut[v] || bc.producer[v] < 0) continue;
    seen[v] = 1;
    const Op& p = g.ops[bc.producer[v]];
    out.recomputed_ops.push_back(bc.producer[v]);
    for (const int32_t* t = g.begin(p.inputs); t != g.end(p.inputs); ++t) stack.push_back(local[*t]);
  }
  std::sort(out.recomputed_ops.begin(), out.recomputed_ops.end());
  out.recomputed_ops.erase(std::unique(out.recomputed_ops.begin(), out.recomputed_ops.end()),
                           out.recomputed_ops.end());
  return out;
}

void inductor_partition(Graph& g, PartitionRules rules) {
  int32_t max_block = -1;
  for (const Op& op : g.ops) max_block = std::max(max_block, op.block);
  std::vector<int32_t> local(g.storages.size(), -1);
  const std::vector<uint8_t> used_after = used_outside(g);
  // time8 (issue 11): the eager saves (the ranges stay valid: new ones are appended to g.idx)
  std::vector<IdxRange> eager_saves(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) eager_saves[i] = g.ops[i].saves;
  for (int32_t b = 0; b <= max_block; ++b) {
    BlockCut bc = solve(g, b, local, used_after, rules);
    const int32_t n = static_cast<int32_t>(bc.nodes.size());

    std::vector<int32_t> stack, touched;
    std::vector<uint8_t> seen(n, 0);
    constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
    std::vector<int32_t> first_need(n, kNone);  // per saved node: the earliest op whose backward reads it
    // Backward runs in reverse: the latest op to read a recomputed tensor recomputes it.
    for (auto it = bc.ops.rbegin(); it != bc.ops.rend(); ++it) {
      Op& op = g.ops[*it];
      if (!op.has_backward || op.saves.count == 0) continue;
      for (const int32_t* s = g.begin(op.saves); s != g.end(op.saves); ++s) stack.push_back(local[*s]);
      while (!stack.empty()) {
        const int32_t v = stack.back();
        stack.pop_back();
        if (seen[v]) continue;
        seen[v] = 1, touched.push_back(v);
        if (bc.cut[v] || bc.producer[v] < 0) {
          first_need[v] = std::min(first_need[v], *it);
          continue;
        }
        const int32_t p = bc.producer[v];
        const Op& po = g.ops[p];
        for (const int32_t* t = g.begin(po.inputs); t != g.end(po.inputs); ++t) stack.push_back(local[*t]);
      }
      for (int32_t v : touched) seen[v] = 0;
      touched.clear();
    }
    // time8 (issue 11): Inductor's kernel fusion times the block's pointwise ops and their
    // recomputation (fuse_block, replacing the per-op charge above)
    fuse_block(g, bc, local, used_after, eager_saves);
    // Who holds a saved storage: an op whose forward sees it alive (its producer or a consumer)
    // and whose backward runs after every backward that reads it (at or before the first op
    // that needs it): the latest such op, so it is freed as early as the engine allows.
    std::vector<int32_t> holder(n, -1);
    for (int32_t i : bc.ops) {
      const Op& op = g.ops[i];
      if (!op.has_backward) continue;
      for (IdxRange r : {op.inputs, op.outputs})
        for (const int32_t* s = g.begin(r); s != g.end(r); ++s) {
          const int32_t v = local[*s];
          if (first_need[v] != kNone && i <= first_need[v]) holder[v] = std::max(holder[v], i);
        }
    }
    std::vector<std::vector<int32_t>> held(bc.ops.size());
    for (int32_t v = 0; v < n; ++v) {
      if (first_need[v] == kNone) continue;
      const int32_t h = holder[v] >= 0 ? holder[v] : first_need[v];
      const size_t k = static_cast<size_t>(std::lower_bound(bc.ops.begin(), bc.ops.end(), h) - bc.ops.begin());
      held[k].push_back(bc.nodes[v]);
    }
    for (size_t k = 0; k < bc.ops.size(); ++k) {
      Op& op = g.ops[bc.ops[k]];
      if (!op.has_backward) continue;
      std::vector<int32_t>& saves = held[k];
      std::sort(saves.begin(), saves.end());
      op.saves = IdxRange{static_cast<int32_t>(g.idx.size()), static_cast<int32_t>(saves.size())};
      g.idx.insert(g.idx.end(), saves.begin(), saves.end());
    }
    for (int32_t s : bc.nodes) local[s] = -1;
  }
  cp_compiled_dead_cats(g);  // cptime2 (issue 11): the CP ring's dead torch.cat (cp.cpp)
}

}  // namespace sim::detail
