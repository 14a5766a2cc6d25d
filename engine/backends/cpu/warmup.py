"""Compile (first time) or load from Numba's cache (later) every Numba kernel ahead of a run.

Each task runs a real CPU kernel on a tiny input of the same array types a model run uses,
so the run itself never compiles. ``prepare`` of the CPU backend calls ``warm_up`` with the
op types of the model; a cold compile of all kernels takes tens of seconds, loading them
from the cache a second or two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from engine.model import Layer

Progress = Callable[[str, float], None]


def _layer(op: str, outputs: int = 1, **attrs) -> Layer:
    return Layer(f"warmup_{op}", op, ["x", "w", "b"], [f"y{i}" for i in range(outputs)],
                 dict(attrs), opset=21)


def _tasks(dtype) -> list[tuple[str, tuple[str, ...], Callable[[], object]]]:
    """(label, op types it covers, job)."""
    from engine.backends.cpu import conv_direct as cd
    from engine.backends.cpu import kernels_conv as kc
    from engine.backends.cpu import kernels_elementwise as ke
    from engine.backends.cpu import kernels_gemm as kg
    from engine.backends.cpu import kernels_norm as kn
    from engine.backends.cpu import kernels_pool as kp
    from engine.backends.cpu import kernels_resize as kr
    from engine.backends.cpu import kernels_se as ks
    from engine.backends.cpu import kernels_softmax as ksm
    from engine.backends.cpu import kernels_winograd as kw

    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    x = r(1, 4, 6, 6)
    return [
        # 1x1 kernels: the 3x3 forms of these two go to the register-blocked kernel
        ("Conv (im2col + epilogue)", ("Conv", "Gemm"), lambda: kc.Conv(
            _layer("Conv", strides=[2, 2], activation="Relu"), [x, r(4, 4, 1, 1), r(4)])),
        ("Conv (shifted rows)", ("Conv",), lambda: kc.Conv(
            _layer("Conv", pads=[1, 1, 1, 1], activation="Relu"), [x, r(4, 4, 1, 1), r(4)])),
        ("Conv (register-blocked)", ("Conv",), lambda: _blocked(kc, x, r)),
        ("Conv (Winograd)", ("Conv",), kw.warm_up),
        ("Conv (direct, few output channels)", ("Conv",), lambda: cd.run(
            (3, 3, 1, 1, 1, 1, 1, 1), r(8, 3, 3), r(2), x, np.empty((1, 2, 6, 6), dtype), 1,
            np.zeros(2, dtype), None, (0, np.zeros(2, dtype)))),
        ("Conv (depthwise)", ("Conv",), lambda: kc.Conv(
            _layer("Conv", group=4, strides=[2, 2]), [x, r(8, 1, 3, 3)])),
        ("ConvTranspose", ("ConvTranspose",), lambda: kc.ConvTranspose(
            _layer("ConvTranspose", strides=[2, 2]), [x, r(4, 2, 3, 3)])),
        ("Gemm", ("Gemm", "MatMul"), lambda: _gemm(kg, r)),
        ("LSTM", ("LSTM",), lambda: _lstm(r)),
        ("MaxPool/AveragePool", ("MaxPool", "AveragePool"), lambda: _pools(kp, x)),
        ("MaxPool (Indices), LpPool", ("MaxPool", "LpPool"), lambda: kp.MaxPool(
            _layer("MaxPool", 2, kernel_shape=[2, 2]), [x])),
        ("channel-blocked regions", ("Conv",), lambda: _blocked_region(r)),
        ("squeeze-and-excitation", ("GlobalAveragePool",), lambda: ks.squeeze_excite(
            x, _layer("Conv", activation="Relu"), r(2, 4, 1, 1), r(2), _layer("Conv"),
            r(4, 2, 1, 1), None, (5, 0.2, 0.5))),
        ("global pools", ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"),
         lambda: kp.GlobalAveragePool(_layer("GlobalAveragePool"), [x])),
        ("BatchNormalization", ("BatchNormalization",), lambda: kn.BatchNormalization(
            _layer("BatchNormalization"), [x, r(4), r(4), r(4), np.abs(r(4)) + 1])),
        ("LayerNormalization", ("LayerNormalization",), lambda: kn.LayerNormalization(
            _layer("LayerNormalization", 3), [r(2, 6), r(6), r(6)])),
        ("LRN", ("LRN",), lambda: kn.LRN(_layer("LRN", size=3), [x])),
        ("Resize (nearest, whole factors)", ("Resize", "Upsample"), lambda: kr.repeat2d(
            x.reshape(4, 6, 6), np.empty((4, 12, 12), dtype), 2, 2)),
        ("Relu", ("Relu",), lambda: ke.Relu(_layer("Relu"), [x])),
        ("Softmax", ("Softmax", "LogSoftmax"), lambda: ksm.Softmax_13(
            _layer("Softmax", axis=-1), [r(2, 7)])),
        ("transformer fusions", ("MatMul", "Erf", "Tanh"), lambda: _transformer(r)),
    ]


def _blocked(kc, x, r) -> None:
    """The register-blocked kernel (float32 only) with its plain and residual epilogues,
    and the small 1-D one."""
    if x.dtype != np.float32:
        return
    kc.Conv(_layer("Conv", pads=[1, 1, 1, 1], activation="Relu"), [x, r(4, 4, 3, 3), r(4)])
    kc.conv(_layer("Conv", pads=[1, 1, 1, 1]), [x, r(4, 4, 3, 3), r(4)], res=r(1, 4, 6, 6),
            post=(1, 0.0, 0.0))
    # a small 1-D convolution of one image (``conv_row``)
    kc.Conv(_layer("Conv", pads=[1, 1], kernel_shape=[3], activation="Relu"),
            [r(1, 4, 8), r(4, 4, 3), r(4)])


def _blocked_region(r) -> None:
    """The kernels of a channel-blocked region (``step_fusion_blocked``): the dense stem,
    depthwise, pointwise with and without a residual, squeeze-and-excitation, the pool and
    both layout changes."""
    if r(1).dtype != np.float32:
        return
    from engine.backends.cpu import blocked_step as bs
    from engine.backends.cpu import nchw16c, nchw16c_conv, nchw16c_dense

    relu = (1, 0.0, 0.0)
    y = nchw16c_dense.dense(r(1, 3, 6, 6), nchw16c_dense.Dense(r(4, 3, 3, 3), r(4), relu),
                            (3, 3, 1, 1, 1, 1), (6, 6))
    y = nchw16c_conv.depthwise(y, bs.Depthwise(r(4, 1, 3, 3), r(4), relu),
                               (3, 3, 1, 1, 1, 1), (6, 6))
    pw = bs.Pointwise(r(4, 4, 1, 1), r(4), relu, relu)
    y = nchw16c_conv.pointwise(nchw16c_conv.pointwise(y, 4, pw, None), 4, pw, y)
    se = (r(2, 4), r(2), 1, np.zeros(2, np.float32), r(4, 2), r(4), 4,
          np.array([0.2, 0.5], np.float32))
    y = nchw16c.squeeze_excite(y, 4, se)
    nchw16c.global_average_pool(y, 4)
    nchw16c.from_blocked(nchw16c.to_blocked(nchw16c.from_blocked(y, 4)), 4)


def _pools(kp, x) -> None:
    """Every 2-D pool kernel: 3x3/stride-2 max, the same-size stride-1 one, 2x2/stride 2,
    and the general row kernel."""
    for run in (kp.MaxPool, kp.AveragePool):
        op = run.__name__
        run(_layer(op, kernel_shape=[3, 3], strides=[2, 2]), [x])
        run(_layer(op, kernel_shape=[3, 3], pads=[1, 1, 1, 1]), [x])
        run(_layer(op, kernel_shape=[2, 2], strides=[2, 2]), [x])
        run(_layer(op, kernel_shape=[3, 3]), [x])


def _gemm(kg, r) -> None:
    """sgemm with its epilogue, and the packed product a repeated weight gets from its
    second call on (``gemm_packed``)."""
    layer, w = _layer("Gemm", transB=1, activation="Relu"), r(3, 5)
    for _ in range(2):
        kg.Gemm(layer, [r(2, 5), w, r(3)])


def _lstm(r) -> None:
    """The fused float32 LSTM (``rnn_fast``), one direction and both."""
    from engine.backends.cpu import kernels_rnn

    if r(1).dtype != np.float32:
        return
    for direction, dirs in (("forward", 1), ("bidirectional", 2)):
        kernels_rnn.LSTM(_layer("LSTM", 3, hidden_size=2, direction=direction),
                         [r(3, 1, 4), r(dirs, 8, 4), r(dirs, 8, 2), r(dirs, 16)])


def _transformer(r) -> None:
    """The kernels of the CPU plan's transformer fusions: linear layers with each epilogue,
    attention with each mask form (masks arrive read-only, as broadcast views), GELU."""
    from engine.backends.cpu import fastmath
    from engine.backends.cpu import kernels_attention_fused as ka
    from engine.backends.cpu import linear_fused as lf

    x, w, b = r(3, 4), r(4, 5), r(5)
    if x.dtype != np.float32:
        return
    # few columns run in one call (``linear_small``), more through sgemm and the epilogue
    for weight, bias in ((w, b), (r(4, 16), r(16))):
        for act in (lf.EPI_BIAS, lf.EPI_GELU_ERF, lf.EPI_GELU_TANH, lf.EPI_SIGMOID):
            lf.linear(x, weight, bias, act)
        lf.linear(x, weight, bias, lf.EPI_BIAS, r(3, weight.shape[1]))
    q, k, v = r(1, 2, 3, 4), r(1, 2, 4, 5), r(1, 2, 5, 4)
    ka.attention(q, k, v, 0.5)
    ka.attention(q, k, v, 0.5, r(1, 1, 1, 5), ka.MASK_ADD)
    ka.attention(q, k, v, 0.5, np.ones((3, 5), bool), ka.MASK_KEEP, -np.inf)
    # long sequences (``attention_packed``): 64 queries over 256 keys, each mask form
    q, k, v = r(1, 1, 64, 4), r(1, 1, 4, 256), r(1, 1, 256, 4)
    ka.attention(q, k, v, 0.5)
    ka.attention(q, k, v, 0.5, r(1, 1, 1, 256), ka.MASK_ADD)
    ka.attention(q, k, v, 0.5, np.ones((64, 256), bool), ka.MASK_KEEP, -np.inf)
    for tanh_form in (False, True):
        fastmath.gelu(x, tanh_form)


def warm_up(op_types: Iterable[str] | None = None, progress: Progress | None = None,
            dtypes: Iterable = (np.float32,)) -> int:
    """Load or compile the Numba kernels behind ``op_types`` (all when None); returns how many
    tasks ran. ``progress(message, fraction)`` is called before each task and at the end."""
    from engine.backends.cpu import threads

    threads.threads()  # thread settings of the calling (engine) thread
    wanted = None if op_types is None else set(op_types)
    jobs = [(label, job) for dt in dtypes for label, ops, job in _tasks(np.dtype(dt))
            if wanted is None or wanted.intersection(ops)]
    for i, (label, job) in enumerate(jobs):
        if progress is not None:
            progress(f"preparing CPU kernels: {label}", i / max(len(jobs), 1))
        job()
    if progress is not None:
        progress("CPU kernels ready", 1.0)
    return len(jobs)
