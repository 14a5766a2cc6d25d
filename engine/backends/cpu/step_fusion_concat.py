"""Convolutions that write straight into their concatenation (called by
``step_fusion.fuse_steps``).

SqueezeNet's fire modules and Inception's blocks end in a channel Concat of Conv outputs
that nothing else reads: each branch's output is written once by its Conv and copied once
more by the Concat (squeezenet's concats took 7% of its run). With batch 1 a run of
channels of the Concat's output is itself a C-contiguous array, so the fused step gives
each Conv its slice of the output to write, and the copy is gone.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.step_fusion_conv import _plain

#: make the fusion where it applies (False: plain Concat layers; tests and benchmarks)
ENABLED = True


def match_concat_of_convs(i, steps, t, only_users, constants):
    """Conv ``i`` (output ``t``) is the first of the Convs whose outputs are all the inputs of
    a channel Concat and are read by nothing else."""
    u = only_users(t, 1)
    if u is None or not ENABLED:
        return None
    j = u[0]
    cat = steps[j][0]
    if cat.op_type != "Concat" or not _plain(cat) or steps[j][3] is None \
            or int(cat.attr("axis", 0)) != 1:
        return None
    producer = {st[3]: k for k, st in enumerate(steps) if st[3]}
    convs = []
    for name in steps[j][2]:
        k = producer.get(name)
        if not name or k is None or k > j or only_users(name, 1) != [j]:
            return None
        st = steps[k]
        if st[0].op_type != "Conv" or not _plain(st[0]) or st[1] is None \
                or len(st[2]) > 3 or not all(st[2][:2]):
            return None
        convs.append(k)
    if len(set(convs)) != len(convs) or len(convs) < 2 or min(convs) != i:
        return None
    layers = [steps[k][0] for k in convs]
    counts = [len(steps[k][2]) for k in convs]

    def convs_into_concat(layer, args):
        from engine.backends.cpu.conv_plan import plan
        from engine.backends.cpu.kernels_conv import conv

        groups, at = [], 0
        for n in counts:
            groups.append(args[at:at + n])
            at += n
        x0 = groups[0][0]
        shapes = []
        for lay, a in zip(layers, groups):
            x, w = a[0], a[1]
            if type(x) is not np.ndarray or x.dtype != np.float32 or x.ndim != 4 \
                    or x.shape[0] != 1 or w.dtype != x.dtype:
                return None  # the absorbed layers run one by one
            shapes.append(plan(lay, x, w, a[2] if len(a) > 2 else None).out_shape)
        if any(s != shapes[0] for s in shapes):
            return None
        ms = [int(a[1].shape[0]) for a in groups]
        out = np.empty((1, sum(ms), *shapes[0]), x0.dtype)
        c0 = 0
        for lay, a, m in zip(layers, groups, ms):
            if conv(lay, a, out=out[:, c0:c0 + m]) is None:
                return None
            c0 += m
        return out

    convs_into_concat.wants = tuple(n for k in convs for n in steps[k][2])
    return convs_into_concat, [k for k in convs if k != i] + [j], steps[j][3]
