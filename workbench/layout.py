"""Layered top-to-bottom layout of a model's layer graph (no Qt; runs off the UI thread).

Steps, Sugiyama style but kept linear-ish so thousands of layers take well under a second:
longest-path layering (sources pulled down next to their first consumer), dummy vertices on
edges that span several layers, barycentric crossing reduction with alternating sweeps, and
x coordinates from a least-squares pull toward neighbours that keeps each layer's order and
spacing (pool-adjacent-violators per layer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.model import Model

NODE_W, NODE_H = 150.0, 40.0
IO_W = 120.0
DUMMY_W = 14.0
GAP_X, GAP_Y = 28.0, 36.0
MAX_DUMMIES = 60_000
KIND_LAYER, KIND_INPUT, KIND_OUTPUT = 0, 1, 2


@dataclass
class Edge:
    """One drawn edge: producer node -> consumer node, carrying one or more tensors."""

    src: int
    dst: int
    tensors: list[str]
    label: str
    points: np.ndarray  # (k, 2) polyline, source bottom to destination top


@dataclass
class GraphLayout:
    """Positions of every node (centres) and edge polylines, in scene units."""

    names: list[str]
    kinds: np.ndarray
    #: index into ``model.layers`` for layer nodes, -1 for inputs/outputs
    layer_index: np.ndarray
    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    h: np.ndarray
    edges: list[Edge] = field(default_factory=list)
    rank: np.ndarray | None = None

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) including edges."""
        if not len(self.x):
            return (0.0, 0.0, 1.0, 1.0)
        left = float((self.x - self.w / 2).min())
        right = float((self.x + self.w / 2).max())
        top = float((self.y - self.h / 2).min())
        bottom = float((self.y + self.h / 2).max())
        for e in self.edges:
            left = min(left, float(e.points[:, 0].min()))
            right = max(right, float(e.points[:, 0].max()))
        return (left, top, right, bottom)

    def node_at(self, px: float, py: float) -> int:
        """Index of the node under a scene point, or -1."""
        hit = np.flatnonzero((np.abs(self.x - px) <= self.w / 2)
                             & (np.abs(self.y - py) <= self.h / 2))
        return int(hit[0]) if len(hit) else -1


def shape_label(model: Model, tensor: str) -> str:
    spec = model.spec(tensor)
    if spec is None or spec.shape is None:
        return "?"
    return "×".join("?" if d is None else str(d) for d in spec.shape) or "scalar"


EdgeMap = dict[tuple[int, int], list[str]]


def graph_of(model: Model) -> tuple[list[str], list[int], list[int], EdgeMap]:
    """Nodes (inputs, layers, outputs) and edges keyed by (src, dst) with their tensors."""
    names: list[str] = []
    kinds: list[int] = []
    layer_index: list[int] = []
    producer: dict[str, int] = {}
    for spec in model.inputs:
        producer[spec.name] = len(names)
        names.append(spec.name)
        kinds.append(KIND_INPUT)
        layer_index.append(-1)
    edges: dict[tuple[int, int], list[str]] = {}
    for i, layer in enumerate(model.layers):
        node = len(names)
        names.append(layer.name)
        kinds.append(KIND_LAYER)
        layer_index.append(i)
        for t in layer.all_inputs():
            src = producer.get(t) if t else None
            if src is not None and src != node:
                tensors = edges.setdefault((src, node), [])
                if t not in tensors:
                    tensors.append(t)
        for t in layer.outputs:
            if t:
                producer[t] = node
    for spec in model.outputs:
        node = len(names)
        names.append(spec.name)
        kinds.append(KIND_OUTPUT)
        layer_index.append(-1)
        src = producer.get(spec.name)
        if src is not None:
            edges[(src, node)] = [spec.name]
    return names, kinds, layer_index, edges


def _ranks(n: int, src: np.ndarray, dst: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Longest-path layering; nodes arrive in topological order (sources first)."""
    rank = np.zeros(n, np.int64)
    order = np.argsort(dst, kind="stable")
    s, d = src[order].tolist(), dst[order].tolist()
    r = rank.tolist()
    for a, b in zip(s, d):  # edges sorted by destination; producers precede consumers
        if r[a] + 1 > r[b]:
            r[b] = r[a] + 1
    rank = np.asarray(r, np.int64)
    # pull sources (model inputs, constant-only layers) down next to their first consumer
    has_in = np.zeros(n, bool)
    has_in[dst] = True
    if len(src):
        first_use = np.full(n, np.iinfo(np.int64).max)
        np.minimum.at(first_use, src, rank[dst])
        pull = ~has_in & (first_use < np.iinfo(np.int64).max)
        rank[pull] = first_use[pull] - 1
    return rank


def _pava(target: np.ndarray, offsets: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Weighted least-squares positions near ``target`` keeping order and spacing ``offsets``.

    x[i+1] - x[i] >= offsets[i+1] - offsets[i]: isotonic regression of ``target - offsets``
    by pool-adjacent-violators; a heavy node keeps its target, light ones move aside.
    """
    y = (target - offsets).tolist()
    wl = weight.tolist()
    vals: list[float] = []
    wsum: list[float] = []
    counts: list[int] = []
    for v, w in zip(y, wl):
        vals.append(v)
        wsum.append(w)
        counts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            w2 = wsum[-2] + wsum[-1]
            vals[-2] = (vals[-2] * wsum[-2] + vals[-1] * wsum[-1]) / w2
            wsum[-2] = w2
            counts[-2] += counts[-1]
            vals.pop()
            wsum.pop()
            counts.pop()
    return np.repeat(np.asarray(vals), counts) + offsets


def compute_layout(model: Model, sweeps: int | None = None) -> GraphLayout:
    """Lay out ``model``'s layers top to bottom; pure NumPy, safe to call off the UI thread.

    ``sweeps`` (ordering and placement passes) defaults to 4, fewer for very deep graphs so
    the time stays near-linear in the number of layers.
    """
    names, kinds_l, layer_idx_l, edge_map = graph_of(model)
    n_real = len(names)
    kinds = np.asarray(kinds_l, np.int8)
    keys = list(edge_map)
    src = np.asarray([k[0] for k in keys], np.int64)
    dst = np.asarray([k[1] for k in keys], np.int64)
    rank = _ranks(n_real, src, dst, kinds)

    # dummy vertices so every edge joins adjacent ranks (long edges beyond the cap stay direct)
    span = rank[dst] - rank[src] if len(keys) else np.zeros(0, np.int64)
    chains: list[list[int]] = []
    seg_src: list[int] = []
    seg_dst: list[int] = []
    node_rank = rank.tolist()
    budget = MAX_DUMMIES
    for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
        s = int(span[e])
        if 1 < s <= budget:
            budget -= s - 1
            chain = [a]
            for k in range(1, s):
                chain.append(len(node_rank))
                node_rank.append(node_rank[a] + k)
            chain.append(b)
        else:
            chain = [a, b]
        chains.append(chain)
        for u, v in zip(chain[:-1], chain[1:]):
            if node_rank[v] - node_rank[u] == 1:
                seg_src.append(u)
                seg_dst.append(v)
    n = len(node_rank)
    ranks = np.asarray(node_rank, np.int64)
    if sweeps is None:
        depth = int(ranks.max()) + 1 if len(ranks) else 0
        sweeps = 4 if depth <= 1500 else 2 if depth <= 4000 else 1
    width = np.full(n, DUMMY_W)
    width[:n_real] = np.where(kinds == KIND_LAYER, NODE_W, IO_W)
    # long op names (BatchNormalization, ...) get wider boxes; ~8 units per bold character
    for i, li in enumerate(layer_idx_l):
        if li >= 0:
            width[i] = max(NODE_W, 8.0 * len(model.layers[li].op_type) + 24)
    ss = np.asarray(seg_src, np.int64)
    sd = np.asarray(seg_dst, np.int64)
    # side inputs (layers fed only by constants, e.g. Unsqueeze of a weight) barely pull their
    # consumer sideways: with full weight a long chain of them drifts the whole graph one way
    indeg = np.bincount(dst, minlength=n_real) if len(dst) else np.zeros(n_real, np.int64)
    side = np.zeros(n, bool)
    side[:n_real] = (indeg == 0) & (kinds == KIND_LAYER)
    seg_w = np.where(side[ss], 0.05, 1.0) if len(ss) else np.zeros(0)

    # per-rank membership; initial order = creation order (topological, DFS-like)
    n_ranks = int(ranks.max()) + 1 if n else 0
    by_rank = np.argsort(ranks, kind="stable")
    bounds = np.searchsorted(ranks[by_rank], np.arange(n_ranks + 1))
    members = [by_rank[bounds[r]:bounds[r + 1]] for r in range(n_ranks)]
    pos = np.zeros(n)
    for m in members:
        pos[m] = np.arange(len(m))
    # segments grouped by the rank of their lower (dst) and upper (src) end
    seg_by_dst = _group(ranks[sd] if len(sd) else sd, n_ranks)
    seg_by_src = _group(ranks[ss] if len(ss) else ss, n_ranks)

    for sweep in range(sweeps * 2):
        down = sweep % 2 == 0
        rng_ranks = range(1, n_ranks) if down else range(n_ranks - 2, -1, -1)
        for r in rng_ranks:
            m = members[r]
            if len(m) < 2:
                continue
            seg = seg_by_dst[r] if down else seg_by_src[r]
            if not len(seg):
                continue
            here, there = (sd[seg], ss[seg]) if down else (ss[seg], sd[seg])
            # members are stored in position order, so pos[] is each node's local index
            local = pos[here].astype(np.int64)
            num = np.bincount(local, weights=pos[there], minlength=len(m))
            cnt = np.bincount(local, minlength=len(m))
            bary = np.where(cnt > 0, num / np.maximum(cnt, 1), pos[m])
            order = np.lexsort((pos[m], bary))
            members[r] = m = m[order]
            pos[m] = np.arange(len(m))

    # x: cumulative widths, then pull toward neighbours keeping order and spacing
    x = np.zeros(n)
    offsets = []
    for m in members:
        wm = width[m]
        off = np.concatenate([[0.0], np.cumsum((wm[:-1] + wm[1:]) / 2 + GAP_X)])
        offsets.append(off)
        x[m] = off - off[-1] / 2
    for sweep in range(sweeps * 2):
        down = sweep % 2 == 0
        rng_ranks = range(1, n_ranks) if down else range(n_ranks - 2, -1, -1)
        for r in rng_ranks:
            m = members[r]
            seg = seg_by_dst[r] if down else seg_by_src[r]
            if not len(seg):
                continue
            here, there = (sd[seg], ss[seg]) if down else (ss[seg], sd[seg])
            wt = seg_w[seg]
            local = pos[here].astype(np.int64)
            num = np.bincount(local, weights=x[there] * wt, minlength=len(m))
            cnt = np.bincount(local, weights=wt, minlength=len(m))
            target = np.where(cnt > 0, num / np.where(cnt > 0, cnt, 1), x[m])
            nodew = np.where(side[m], 0.05, np.maximum(cnt, 0.2))
            x[m] = _pava(target, offsets[r], nodew)
    y = ranks * (NODE_H + GAP_Y)

    edges = []
    for (a, b), chain in zip(keys, chains):
        tensors = edge_map[(a, b)]
        pts = np.empty((len(chain), 2))
        pts[:, 0] = x[chain]
        pts[:, 1] = y[chain]
        pts[0, 1] += NODE_H / 2
        pts[-1, 1] -= NODE_H / 2
        label = ", ".join(shape_label(model, t) for t in tensors[:2])
        edges.append(Edge(a, b, tensors, label, pts))
    h = np.full(n_real, NODE_H)
    h[kinds != KIND_LAYER] = NODE_H * 0.75
    return GraphLayout(names, kinds, np.asarray(layer_idx_l, np.int64), x[:n_real].copy(),
                       y[:n_real].astype(float), width[:n_real].copy(), h, edges, ranks[:n_real])


def _group(key: np.ndarray, n_groups: int) -> list[np.ndarray]:
    order = np.argsort(key, kind="stable")
    b = np.searchsorted(key[order], np.arange(n_groups + 1))
    return [order[b[g]:b[g + 1]] for g in range(n_groups)]


def count_crossings(layout: GraphLayout) -> int:
    """Crossings between edge segments of adjacent ranks (a quality measure for tests)."""
    segs = []
    for e in layout.edges:
        for p, q in zip(e.points[:-1], e.points[1:]):
            segs.append((round(p[1]), p[0], q[0]))
    total = 0
    by_y: dict[int, list[tuple[float, float]]] = {}
    for yv, a, b in segs:
        by_y.setdefault(yv, []).append((a, b))
    for group in by_y.values():
        arr = np.asarray(group)
        if len(arr) < 2:
            continue
        a, b = arr[:, 0], arr[:, 1]
        da = a[:, None] - a[None, :]
        db = b[:, None] - b[None, :]
        total += int(((da * db) < 0).sum() // 2)
    return total
