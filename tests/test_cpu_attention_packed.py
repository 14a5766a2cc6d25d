"""Attention on packed panels (long sequences, and short ones whose heads divide over the
threads) and the vector softmax, against float64 NumPy (and the row-block path they
replace), on fresh random data with masks of every kind."""

import numpy as np
import pytest

from engine.backends.cpu import attention_packed, threads
from engine.backends.cpu import kernels_attention_fused as kaf
from engine.backends.cpu.softmax_vec import softmax_rows


def _reference(q, k, v, scale, mask, mode, fill):
    s = q.astype(np.float64) @ k.astype(np.float64) * scale
    if mode == kaf.MASK_ADD:
        s = s + mask
    elif mode == kaf.MASK_KEEP:
        s = np.where(mask, s, fill)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    return s @ v.astype(np.float64)


def _heads(rng, heads, rows, d, keys, dv):
    """Q, K^T and V as exporters lay them out: views of [1, tokens, heads, size]."""
    q = rng.standard_normal((1, rows, heads, d)).astype(np.float32).transpose(0, 2, 1, 3)
    k = rng.standard_normal((1, keys, heads, d)).astype(np.float32).transpose(0, 2, 3, 1)
    v = rng.standard_normal((1, keys, heads, dv)).astype(np.float32).transpose(0, 2, 1, 3)
    return q, k, v


@pytest.mark.parametrize("threads_", [1, 2])
@pytest.mark.parametrize("mode", [kaf.MASK_NONE, kaf.MASK_ADD, kaf.MASK_KEEP])
@pytest.mark.parametrize("shape", [(3, 300, 32, 333, 32), (2, 130, 40, 700, 24),
                                   (1, 64, 64, 256, 64),
                                   # a partial last row block and key panel
                                   (2, 70, 16, 261, 48),
                                   # short sequences: BERT- and GPT-sized heads
                                   (4, 128, 64, 128, 64), (2, 64, 32, 64, 32),
                                   (4, 70, 16, 45, 24)])
def test_long_attention_matches_float64(shape, mode, threads_, rng):
    heads, rows, d, keys, dv = shape
    q, k, v = _heads(rng, heads, rows, d, keys, dv)
    mask = None
    if mode == kaf.MASK_ADD:
        mask = np.where(rng.random((1, 1, 1, keys)) < 0.3, -1e4, 0).astype(np.float32)
    elif mode == kaf.MASK_KEEP:
        mask = rng.random((rows, keys)) < 0.8
        mask[:, 0] = True
    before = threads.threads()
    threads.set_threads(threads_)
    try:
        assert attention_packed.wanted(rows, keys, d, dv, True, heads)
        got = kaf.attention(q, k, v, 0.2, mask, mode, -np.inf, heads_last=True)
    finally:
        threads.set_threads(before)
    want = np.swapaxes(_reference(q, k, v, 0.2, mask, mode, -np.inf), 1, 2)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_short_sequences_whose_heads_do_not_divide_stay_batched(rng, monkeypatch):
    """ViT-tiny's 3 heads of 197 tokens on 2 threads: a run of tasks would split a head
    (packed twice), so the batched products take them."""
    q, k, v = _heads(rng, 3, 197, 64, 197, 64)
    before = threads.threads()
    threads.set_threads(2)
    called = []
    monkeypatch.setattr(attention_packed, "attention", lambda *a: called.append(a))
    try:
        assert not attention_packed.wanted(197, 197, 64, 64, True, 3)
        assert attention_packed.wanted(197, 197, 64, 64, True, 4)
        got = kaf.attention(q, k, v, 0.125, None, kaf.MASK_NONE, heads_last=True)
    finally:
        threads.set_threads(before)
    assert not called
    want = np.swapaxes(_reference(q, k, v, 0.125, None, kaf.MASK_NONE, 0.0), 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_per_image_masks_take_the_row_block_path(rng, monkeypatch):
    q = rng.standard_normal((2, 2, 80, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 16, 300)).astype(np.float32)
    v = rng.standard_normal((2, 2, 300, 8)).astype(np.float32)
    mask = np.where(rng.random((2, 1, 1, 300)) < 0.3, -1e4, 0).astype(np.float32)
    called = []
    monkeypatch.setattr(attention_packed, "attention", lambda *a: called.append(a))
    got = kaf.attention(q, k, v, 0.3, mask, kaf.MASK_ADD)
    assert not called  # the mask differs per image: not shared by every head
    np.testing.assert_allclose(got, _reference(q, k, v, 0.3, mask, kaf.MASK_ADD, 0.0),
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("keys", [256, 333, 1500])
@pytest.mark.parametrize("mode", [kaf.MASK_NONE, kaf.MASK_ADD, kaf.MASK_KEEP])
def test_vector_softmax_matches_the_row_block_softmax(keys, mode, rng):
    raw = (rng.standard_normal((9, keys)) * 4).astype(np.float32)
    raw[3, 5] = np.nan  # NaN stays in its row
    add = np.where(rng.random((9, keys)) < 0.3, -1e4, 0).astype(np.float32)
    keep = rng.random((9, keys)) < 0.7
    keep[:, 1] = keep[3, 5] = True
    got, want = raw.copy(), raw.copy()
    inv_got, inv_want = np.empty(9, np.float32), np.empty(9, np.float32)
    softmax_rows(got, np.float32(0.3), add, keep, np.float32(-np.inf), mode, inv_got)
    kaf.softmax_block(want, np.float32(0.3), add, keep, np.float32(-np.inf), mode, inv_want)
    p_got, p_want = got * inv_got[:, None], want * inv_want[:, None]
    assert np.isnan(p_got[3]).any() and np.isnan(p_want[3]).any()
    rows = [r for r in range(9) if r != 3]
    np.testing.assert_allclose(p_got[rows], p_want[rows], rtol=2e-6, atol=1e-9)
    s = raw[rows].astype(np.float64) * 0.3
    if mode == kaf.MASK_ADD:
        s = s + add[rows]
    elif mode == kaf.MASK_KEEP:
        s = np.where(keep[rows], s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(p_got[rows], e / e.sum(-1, keepdims=True), rtol=1e-5,
                               atol=1e-9)


def test_pack_heads_matches_pack_panels(rng):
    """Every head's panels, from strided views too, 64-byte aligned."""
    from engine.backends.cpu.gemm_packed import pack_heads, pack_panels
    for shape in ((3, 64, 197), (2, 197, 64), (1, 5, 33), (4, 32, 32)):
        w = rng.standard_normal(shape).astype(np.float32)
        for view in (w, np.ascontiguousarray(w.transpose(0, 2, 1)).transpose(0, 2, 1)):
            packed = pack_heads(view)
            assert packed.ctypes.data % 64 == 0
            for h in range(shape[0]):
                np.testing.assert_array_equal(packed[h], pack_panels(view[h]))


@pytest.mark.parametrize("split_rows", [False, True])
@pytest.mark.parametrize("mode,mask_kind", [(kaf.MASK_NONE, None), (kaf.MASK_ADD, "shared"),
                                            (kaf.MASK_ADD, "per_head"),
                                            (kaf.MASK_KEEP, "shared")])
def test_batched_heads_split_by_rows_match_float64(mode, mask_kind, split_rows, rng,
                                                   monkeypatch):
    """ViT-tiny's shape: 3 heads of 197 tokens on two threads, either two heads on one
    thread and one on the other, or every head's query rows split in two."""
    heads, rows, d = 3, 197, 64
    q, k, v = _heads(rng, heads, rows, d, rows, d)
    mask = None
    if mode == kaf.MASK_ADD:
        shape = (1, 1, rows, rows) if mask_kind == "shared" else (1, heads, rows, rows)
        mask = np.where(rng.random(shape) < 0.3, -1e4, 0).astype(np.float32)
    elif mode == kaf.MASK_KEEP:
        mask = rng.random((rows, rows)) < 0.8
        mask[:, 0] = True
    monkeypatch.setattr(kaf, "SPLIT_ROWS", split_rows)
    calls = []
    monkeypatch.setattr(kaf, "_rows_of_heads",
                        lambda *a, real=kaf._rows_of_heads: calls.append(a[-2:]) or real(*a))
    before = threads.threads()
    threads.set_threads(2)
    try:
        got = kaf.attention(q, k, v, 0.125, mask, mode, -np.inf, heads_last=True)
    finally:
        threads.set_threads(before)
    want = np.swapaxes(_reference(q, k, v, 0.125, mask, mode, -np.inf), 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    # the row halves cover every row once, or the path was not taken
    assert sorted(calls) == ([(0, 98), (98, 197)] if split_rows else [])
