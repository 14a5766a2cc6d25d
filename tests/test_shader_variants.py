"""Every shader variant a kernel can ask for renders through the one loader and compiles.

Kernels choose variants by name (an op, a fold, a load form); the code of each lives in a
.wgsl file. A variant that only a rare model requests would otherwise break unseen, so this
file lists them from the kernels' own tables and compiles each with wgpu."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.backends.gpu_common.shaders import load_shader
from engine.backends.gpu_compute import kernels_binary as kb
from engine.backends.gpu_compute import kernels_matmul as km
from engine.backends.gpu_compute import kernels_reduce as kr
from engine.backends.gpu_compute import kernels_select as ks
from engine.backends.gpu_compute.kernels_elementwise import WGSL_TYPE
from engine.backends.gpu_compute.pipelines import Program
from engine.ops.activations import ACTIVATIONS


def _t(dtype) -> str:
    dtype = np.dtype(dtype)
    return "I64" if dtype in kb.I64 else WGSL_TYPE[dtype.name]


def binary_programs() -> list[Program]:
    """The binary shaders (general, collapsed-broadcast, vec4 forms) for every (op, element
    type) the kernels register."""
    pairs = {(op, _t(dt), _t(dt)) for op, dtypes in kb.BINARY.items() for dt in dtypes}
    for op in kb.COMPARE:
        dtypes = kb.NUMERIC + kb.I64 + (kb.BOOL if op == "Equal" else ())
        pairs |= {(op, _t(dt), "u32") for dt in dtypes}
    pairs |= {(op, "u32", "u32") for op in kb.LOGIC}
    pairs |= {(op, _t(dt), _t(dt)) for op in kb.VARIADIC.values() for dt in kb.NUMERIC}
    # Mod: fmod=1 on every type, fmod=0 on integers; BitShift on u32 both ways
    pairs |= {("Fmod", t, t) for t in ("f32", "i32", "u32")}
    pairs |= {("Mod", t, t) for t in ("i32", "u32")}
    pairs |= {("BitShiftLeft", "u32", "u32"), ("BitShiftRight", "u32", "u32")}
    programs = [Program.of(f, T=t, U=u, OP=op) for op, t, u in sorted(pairs)
                for f in ("binary.wgsl", "binary_bcast.wgsl")]
    programs += [Program.of("binary_bcast_vec4.wgsl", OP=op, A_LOAD=la, B_LOAD=lb)
                 for op in sorted(kb.VEC4_OPS) for la in ("vec", "splat")
                 for lb in ("vec", "splat")]
    return programs + [Program.of("binary_vec4.wgsl", OP=op) for op in sorted(kb.VEC4_OPS)]


def reduce_programs() -> list[Program]:
    """Reductions, ArgMax/ArgMin and the Softmax family, one program per op."""
    return ([Program.of("reduce.wgsl", OP=op) for op in kr.REDUCE]
            + [Program.of("argreduce.wgsl", OP=op) for op in kr.ARGREDUCE]
            + [Program.of("softmax.wgsl", OP=op) for op in kr.SOFTMAX])


def scatter_programs() -> list[Program]:
    """ScatterND's folds on every element type it folds."""
    return [Program.of("scatter_nd_fold.wgsl", T=_t(dt), FOLD=fold)
            for fold in ks.FOLDS for dt in ks.FOLD_DTYPES]


def matmul_programs() -> list[Program]:
    """Every pairing of A and B load forms (without an activation), every fused activation
    on one of them, and the workgroup-tiled variant."""
    programs = [Program.of("matmul.wgsl", act="Identity", A_LOAD=a, B_LOAD=b, C_STORE=c,
                           WGX=8, WGY=8)
                for a in km.A_LOADS for b in km.B_LOADS for c in km.C_STORES]
    programs += [Program.of("matmul.wgsl", act=act, A_LOAD="vec4", B_LOAD="outer_vec4",
                            C_STORE="vec4", WGX=wgx, WGY=wgy)
                 for act in sorted(ACTIVATIONS) for wgx, wgy in {km.workgroup_for(m)
                                                                 for m in (1, 8, 16, 64)}]
    return programs + [Program.of("matmul_tiled.wgsl", act="Identity")]


def pixel_programs() -> list:
    """GPU_PIXEL's elementwise pass for every binary op and its reduction pass for every
    reduction: both choose a vec4 function of the shader by name."""
    from engine.backends.gpu_pixel import kernels_elementwise as pe
    from engine.backends.gpu_pixel import kernels_reduce as pr
    from engine.backends.gpu_pixel.renderer import RenderProgram

    def program(shader, n_tex, **params):
        return RenderProgram(shader, n_tex, tuple(sorted(params.items())))

    modes = {f"M{k}": 0 for k in range(8)}
    out = [program("elementwise", 8, BIN=op, ACT="Identity", N=2, PADDED="false", **modes)
           for op in pe.BINARY]
    for op in [*pr.REDUCE, "Softmax", "LogSoftmax"]:
        out.append(program("reduce", 1, OP=op, INIT=pr.REDUCE.get(op, "sum"),
                           NEEDS_MAX=str(op in pr.NEEDS_MAX).lower(),
                           NEEDS_SELF=str(op in ("Softmax", "LogSoftmax")).lower()))
    out += [program("softmax_axis", 1, OP=op, BLOCKED=b)
            for op in ("Softmax", "LogSoftmax") for b in ("true", "false")]
    out += [program("resize_texel", 2, ALONG_X=a) for a in ("true", "false")]
    return out + conv_programs(program)


def conv_programs(program) -> list:
    """conv.wgsl's variants (each with and without a weight matrix where the kernel asks for
    both) and conv_tap.wgsl's specialisations: kernel shapes, strides, dilations, pads and
    every fused activation the kernels accept."""
    from engine.backends.gpu_pixel.renderer import RenderProgram
    from engine.ops.activations import UNARY_OPS

    acts = ["Identity"] + sorted(name for name, rec in UNARY_OPS.items() if rec.shader)
    out = [program("conv", 3, VARIANT=v, WMAT=wm, BIAS=b, ACT="Identity")
           for v, wm in [("blocked", "true"), ("blocked", "false"), ("depthwise", "true"),
                         ("depthwise", "false"), ("grouped", "true"), ("scalar", "false"),
                         ("transposed", "true")] for b in ("true", "false")]
    shapes = [(1, 1, 1, 1, 1, 1, "false"), (3, 3, 1, 1, 1, 1, "true"),
              (3, 3, 2, 2, 1, 1, "true"), (7, 7, 2, 2, 1, 1, "true"), (3, 1, 1, 1, 2, 1, "true")]

    def tap(per, **params):
        # one colour target per pixel of the fragment
        return RenderProgram("conv_tap", 3, tuple(sorted({**params, "P": per}.items())), per)

    out += [tap(per, KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw, PAD=pad, ACT="Identity",
                MASKED=masked, DEPTHWISE=depthwise)
            for kh, kw, sh, sw, dh, dw, pad in shapes for per in (1, 2, 4, 8)
            for masked, depthwise in (("true", "false"), ("false", "false"), ("false", "true"))]
    out += [tap(8, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PAD="true", ACT=act, MASKED="false",
                DEPTHWISE="false") for act in acts]
    out += [RenderProgram("conv_transpose_tap", 3, tuple(sorted(dict(
        ACT="Identity", KH=k, KW=k, SH=s, SW=s, P=per).items())), per)
        for k, s in ((2, 2), (3, 2), (4, 1)) for per in (1, 2, 4)]
    return out


def test_every_pixel_variant_compiles(require_gpu):
    from engine.backends.gpu_common import get_device

    device = get_device().device
    for program in pixel_programs():
        program.build(device)


def test_program_for_picks_every_load_form():
    """The forms the kernel picks from strides are exactly those the test compiles."""
    from types import SimpleNamespace

    # a view (no allocation of its own) and a whole tensor of 256 bytes (outer_shift)
    tensors = (object(), SimpleNamespace(alloc=SimpleNamespace(size=256)))
    picked = {dict(km.program_for(km.Operand(T, *a), km.Operand(T, *b), 8, n, k,
                                  "Identity").params)["B_LOAD"]
              for a in ((8, 1), (1, 8)) for b in ((1, 8), (8, 1), (3, 1), (1, 3))
              for n, k in ((8, 8), (6, 6)) for T in tensors}
    assert picked == set(km.B_LOADS)


def conv_transpose_programs() -> list[Program]:
    """The phase-enumerating ConvTranspose for kernels smaller, equal and larger than its
    strides, with every fused activation on one of them, and the general gather."""
    programs = [Program.of("conv_transpose_phase.wgsl", act="Identity", KH=kh, KW=kw, SH=sh,
                           SW=sw) for kh, kw, sh, sw in ((2, 2, 2, 2), (3, 3, 1, 1),
                                                         (1, 2, 3, 2), (4, 4, 2, 2))]
    programs += [Program.of("conv_transpose_phase.wgsl", act=act, KH=2, KW=2, SH=2, SW=2)
                 for act in sorted(ACTIVATIONS)]
    return programs + [Program.of("conv_transpose.wgsl", act="Identity")]


def conv2d_programs() -> list[Program]:
    """The implicit-GEMM convolution for a few kernel, stride and dilation choices (fixed at
    specialisation), with every fused activation on one of them."""
    shapes = ((1, 1, 1, 1, 1, 1), (3, 3, 1, 1, 1, 1), (3, 3, 2, 2, 1, 1), (7, 7, 2, 2, 1, 1),
              (3, 1, 1, 1, 2, 1))
    programs = [Program.of("conv2d.wgsl", act="Identity", KH=kh, KW=kw, SH=sh, SW=sw, DH=dh,
                           DW=dw) for kh, kw, sh, sw, dh, dw in shapes]
    return programs + [Program.of("conv2d.wgsl", act=act, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1)
                       for act in sorted(ACTIVATIONS)]


def rows_programs() -> list[Program]:
    """The row-run kernels (depthwise and direct convolution, pooling) for kernels wider and
    narrower than their strides, with every fused activation on one convolution, and the
    strided copy on words, word pairs and vec4s."""
    shapes = ((3, 3, 1, 1), (3, 3, 2, 2), (5, 5, 2, 2), (7, 7, 1, 1), (1, 2, 1, 3), (2, 2, 2, 2))
    programs = [Program.of("conv_depthwise.wgsl", act="Identity", KH=kh, KW=kw, SH=sh, SW=sw)
                for kh, kw, sh, sw in shapes]
    programs += [Program.of("conv_rows.wgsl", act="Identity", KH=kh, KW=kw, SH=sh, SW=sw, DH=1)
                 for kh, kw, sh, sw in shapes]
    programs += [Program.of(f, act=act, KH=3, KW=3, SH=1, SW=1, **({"DH": 2} if r else {}))
                 for act in sorted(ACTIVATIONS)
                 for f, r in (("conv_depthwise.wgsl", 0), ("conv_rows.wgsl", 1))]
    programs += [Program.of("pool_rows.wgsl", KH=kh, KW=kw, SH=sh, SW=sw, MODE=mode)
                 for kh, kw, sh, sw in shapes for mode in (0, 1)]
    return programs + [Program.of("copy.wgsl", W=w, T=t)
                       for w, t in ((1, "word"), (2, "word"), (1, "quad"))]


COMPUTE = {"conv": conv2d_programs, "binary": binary_programs, "reduce": reduce_programs,
           "scatter": scatter_programs, "matmul": matmul_programs,
           "conv_transpose": conv_transpose_programs, "rows": rows_programs}


def _all_compute() -> list[Program]:
    return list(itertools.chain.from_iterable(f() for f in COMPUTE.values()))


def test_every_compute_variant_renders_without_placeholders():
    for program in _all_compute():
        src = program.source()
        assert "${" not in src and "//!include" not in src, program


@pytest.mark.parametrize("family", sorted(COMPUTE))
def test_every_compute_variant_compiles(require_gpu, family):
    from engine.backends.gpu_common import get_device

    device = get_device().device
    for program in COMPUTE[family]():
        program.build(device)  # raises GPUError naming the program on a shader error


def test_a_missing_variant_file_or_parameter_is_an_error():
    with pytest.raises(ValueError, match="binary_ops_f16.wgsl, which does not exist"):
        load_shader("compute/binary.wgsl", T="f16", U="f16", OP="Add")
    with pytest.raises(ValueError, match="needs the parameter 'T'"):
        load_shader("compute/binary.wgsl", U="f32", OP="Add")


def test_a_variant_that_does_not_exist_fails_to_compile(require_gpu):
    from engine.backends.gpu_common import get_device
    from engine.errors import GPUError

    with pytest.raises(GPUError, match="op_BitwiseAnd"):  # no bitwise ops on floats
        Program.of("binary.wgsl", T="f32", U="f32", OP="BitwiseAnd").build(get_device().device)
