"""A grouped 1x1 convolution that writes its output channel-shuffled (called by
``step_fusion.fuse_steps``).

ShuffleNet follows each grouped 1x1 Conv by a channel shuffle written as Reshape
(N, g, M/g, H, W) -> Transpose (0, 2, 1, 3, 4) -> Reshape (N, M, H, W): a copy of the whole
output that only reorders channels (ShuffleNet's 16 took ~6% of its run). With g the Conv's
own group count, the shuffle puts group k's output row j at channel j * g + k, so the Conv's
products write there directly (``kernels_conv.conv(shuffle=True)``) and the copy is gone.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.conv_plan import plan
from engine.backends.cpu.kernels_conv import conv
from engine.backends.cpu.kernels_shape import _out_shape
from engine.backends.cpu.step_fusion_conv import _plain

#: make the fusion where it applies (False: the Reshape/Transpose layers run; tests, benchmarks)
ENABLED = True


def _next(j, steps, only_users, op_type):
    """The one step reading step ``j``'s output, if it is a plain ``op_type`` layer."""
    u = only_users(steps[j][3], 1)
    if u is None:
        return None
    k = u[0]
    layer = steps[k][0]
    if layer.op_type != op_type or not _plain(layer) or steps[k][3] is None \
            or steps[k][2][0] != steps[j][3]:
        return None
    return k


def match_conv_shuffle(i, steps, t, only_users, constants):
    """Conv ``i`` (output ``t``, a group count above 1) read only by a channel shuffle:
    Reshape -> Transpose (0, 2, 1, 3, 4) -> Reshape. Whether the Reshapes' shapes are the
    shuffle's with the Conv's group count is checked when the step runs (their shape inputs
    may be computed); where they are not, the layers run one by one."""
    conv_layer = steps[i][0]
    group = int(conv_layer.attr("group", 1) or 1)
    if not ENABLED or group == 1 or len(steps[i][2]) > 3 or not all(steps[i][2][:2]):
        return None
    split = _next(i, steps, only_users, "Reshape")
    swap = None if split is None else _next(split, steps, only_users, "Transpose")
    merge = None if swap is None else _next(swap, steps, only_users, "Reshape")
    if merge is None or tuple(steps[swap][0].attr("perm", ()) or ()) != (0, 2, 1, 3, 4) \
            or len(steps[split][2]) != 2 or len(steps[merge][2]) != 2:
        return None
    split_layer, merge_layer = steps[split][0], steps[merge][0]
    n_in = len(steps[i][2])
    checked: dict = {}  # (input shape, the two shape inputs' bytes) -> whether they shuffle

    def conv_shuffled(layer, args):
        x, w = args[0], args[1]
        if type(x) is not np.ndarray or x.ndim != 4 or w.dtype != x.dtype:
            return None
        key = (x.shape, w.shape, np.asarray(args[n_in]).tobytes(),
               np.asarray(args[n_in + 1]).tobytes())
        ok = checked.get(key)
        if ok is None:
            if len(checked) > 16:  # shapes that keep changing: keep the latest only
                checked.clear()
            ok = checked[key] = _shuffles(layer, args, n_in, group, split_layer, merge_layer)
        if not ok:
            return None
        return conv(layer, args[:n_in], shuffle=True)

    conv_shuffled.wants = (*steps[i][2], steps[split][2][1], steps[merge][2][1])
    return conv_shuffled, [split, swap, merge], steps[merge][3]


def _shuffles(layer, args, n_in, group, split_layer, merge_layer) -> bool:
    """Whether the two Reshapes split the Conv's output channels into (group, M/group) and
    merge the swapped pair back, for these inputs."""
    x = args[0]
    p = plan(layer, x, args[1], args[2] if n_in > 2 else None)
    if len(p.out_shape) != 2:
        return False
    N, Mg, (H, W) = x.shape[0], p.Mg, p.out_shape
    conv_out = np.broadcast_to(np.zeros((), x.dtype), (N, Mg * group, H, W))
    swapped = np.broadcast_to(np.zeros((), x.dtype), (N, Mg, group, H, W))
    return (_out_shape(split_layer, [conv_out, args[n_in]]) == (N, group, Mg, H, W)
            and _out_shape(merge_layer, [swapped, args[n_in + 1]]) == (N, Mg * group, H, W))
