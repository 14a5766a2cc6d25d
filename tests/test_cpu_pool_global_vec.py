"""Float32 global average pools of small planes (``pool_global_vec``) against NumPy in
float64: plane sizes below, at and past whole vectors, the zoo's closing planes, split over
planes on two threads, NaN and Inf kept in their own plane, the same result through
``AveragePool`` with a window over the whole input, and the float64 sum beyond
``VEC_GLOBAL_MAX``."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import kernels_pool as kp
from engine.backends.cpu import pool_global_vec
from tests.test_cpu_kernels import L, close


def _mean(x):
    return x.astype(np.float64).mean(tuple(range(2, x.ndim)), keepdims=True)


@pytest.mark.parametrize("shape", [(1, 3, 1, 1), (2, 5, 3, 5), (1, 7, 4, 4), (1, 9, 17),
                                   (1, 2048, 7, 7), (1, 1000, 13, 13), (3, 4, 2, 5, 3),
                                   (1, 6, 64, 64)])
def test_matches_float64(rng, nthreads, shape):
    x = (rng.standard_normal(shape) + 3.0).astype(np.float32)
    got = kp.GlobalAveragePool(L("GlobalAveragePool"), [x])
    assert got.dtype == np.float32 and got.shape == shape[:2] + (1,) * (len(shape) - 2)
    close(got, _mean(x))


def test_the_vector_kernel_runs_up_to_its_limit(rng, monkeypatch):
    calls = []
    kernel = pool_global_vec.global_avg_f32

    def counted(xf, S, *rest):
        calls.append(S)
        return kernel(xf, S, *rest)

    monkeypatch.setattr(kp, "global_avg_f32", counted)
    small = rng.standard_normal((1, 4, 7, 7)).astype(np.float32)
    large = rng.standard_normal((1, 2, 65, 64)).astype(np.float32)
    close(kp.GlobalAveragePool(L("GlobalAveragePool"), [small]), _mean(small))
    close(kp.GlobalAveragePool(L("GlobalAveragePool"), [large]), _mean(large))
    assert calls and set(calls) == {49}  # (65 x 64 values: past the limit, float64 sums)
    monkeypatch.setattr(kp, "VEC_GLOBAL_MAX", 0)
    calls.clear()
    close(kp.GlobalAveragePool(L("GlobalAveragePool"), [small]), _mean(small))
    assert not calls


def test_nan_and_inf_stay_in_their_plane(rng, nthreads):
    x = rng.standard_normal((1, 40, 7, 7)).astype(np.float32)
    x[0, 3, 6, 6] = np.nan  # the plane's last value, summed after the vectors
    x[0, 11, 0, 0] = np.inf
    x[0, 20, 3, 2] = -np.inf
    x[0, 20, 5, 1] = np.inf  # inf - inf in one plane: NaN
    got = kp.GlobalAveragePool(L("GlobalAveragePool"), [x]).reshape(-1)
    assert np.isnan(got[3]) and got[11] == np.inf and np.isnan(got[20])
    rest = [c for c in range(40) if c not in (3, 11, 20)]
    close(got[rest], _mean(x[:, rest]).reshape(-1))


def test_average_pool_over_the_whole_plane(rng, nthreads):
    x = rng.standard_normal((2, 544, 7, 7)).astype(np.float32)
    got = kp.AveragePool(L("AveragePool", kernel_shape=[7, 7], strides=[1, 1]), [x])
    close(got, _mean(x))
