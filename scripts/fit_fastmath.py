"""Print the erf coefficients of engine/backends/cpu/fastmath.py and their float64 error.

erf on |x| < 1 uses its Taylor series, 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n + 1));
on 1 <= |x| < 4, erfc(x) e^(x^2) is a smooth curve fitted here as a polynomial in
t = 1 / (1 + x/2) by least squares on Chebyshev points, weighted for relative error.
GELU's erf is one rational function on |x| <= 4, x P(x^2) / Q(x^2) with Q(0) = 1, fitted
for the largest absolute error by least squares on the linearised problem, reweighted by
each point's error (Lawson's iteration).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

TERMS, FIT_DEGREE = 11, 6
#: coefficients of P and of Q after its constant 1 (GELU's rational erf)
RATIONAL_P, RATIONAL_Q = 7, 5


def taylor() -> list[float]:
    k = 2 / math.sqrt(math.pi)
    return [k * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(TERMS)]


def erfc_fit() -> list[float]:
    lo, hi = 1 / 3, 2 / 3  # t at x = 4 and x = 1
    u = np.cos(np.pi * (np.arange(2000) + 0.5) / 2000)
    t = lo + (hi - lo) * (u + 1) / 2
    x = 2 * (1 / t - 1)
    g = special.erfcx(x)
    a = np.vander(t, FIT_DEGREE + 1, increasing=True) / g[:, None]
    coef, *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return [float(c) for c in coef]


def rational_fit(iterations: int = 60) -> tuple[list[float], list[float]]:
    u = np.cos(np.pi * (np.arange(6000) + 0.5) / 6000)
    x = 2 * (u + 1)  # [0, 4]
    f, z = special.erf(x), x * x
    a = np.hstack([x[:, None] * z[:, None] ** np.arange(RATIONAL_P),
                   -f[:, None] * z[:, None] ** np.arange(1, RATIONAL_Q + 1)])
    w = np.ones_like(x)
    for _ in range(iterations):
        coef, *_ = np.linalg.lstsq(a * w[:, None], f * w, rcond=None)
        p, q = coef[:RATIONAL_P], np.concatenate([[1.0], coef[RATIONAL_P:]])
        err = x * np.polyval(p[::-1], z) / np.polyval(q[::-1], z) - f
        w = w * np.sqrt(np.abs(err) + 1e-18)
        w /= w.max()
    return [float(c) for c in p], [float(c) for c in q[1:]]


def main() -> None:
    small, fit = taylor(), erfc_fit()
    x = np.linspace(0, 1, 10001)
    got = x * np.polyval(small[::-1], x * x)
    print("taylor max abs error on [0, 1):", np.max(np.abs(got - special.erf(x))))
    x = np.linspace(1, 4, 30001)
    t = 1 / (1 + x / 2)
    got = 1 - np.exp(-x * x) * np.polyval(fit[::-1], t)
    print("fit max abs error on [1, 4):", np.max(np.abs(got - special.erf(x))))
    print("_ERF_SMALL =", ", ".join(repr(c) for c in small))
    print("_ERFC_FIT =", ", ".join(repr(c) for c in fit))
    p, q = rational_fit()
    x = np.linspace(0, 4, 40001)
    got = x * np.polyval(p[::-1], x * x) / np.polyval([*q[::-1], 1.0], x * x)
    print("rational max abs error on [0, 4]:", np.max(np.abs(got - special.erf(x))))
    print("_ERF_P =", ", ".join(repr(c) for c in p))
    print("_ERF_Q =", ", ".join(repr(c) for c in q))


if __name__ == "__main__":
    main()
