#!/usr/bin/python3
"""Print the polynomial coefficients of cpu/vmath.h: least-squares fits on
Chebyshev nodes, in double precision (numpy), with each fit's largest error
on a fine grid.  Usage: tools/fit-vmath.py (needs python3-numpy)."""
from math import erf, exp, log, pi, sqrt

import numpy as np
import numpy.polynomial.chebyshev as C
import numpy.polynomial.polynomial as P

NODES = 400


def nodes(lo, hi):
    k = np.arange(NODES)
    return np.cos(np.pi * (k + 0.5) / NODES) * (hi - lo) / 2 + (hi + lo) / 2


def show(name, coef, err, kind):
    print(f"{name}: {kind} error {err:.2e}, coefficients from x^0 up:")
    print("    " + ", ".join(f"{c:.9e}f" for c in coef))


# exp(r) on |r| <= ln 2 / 2 (a margin of 1%), degree 6.
h = log(2) / 2 * 1.01
r = nodes(-h, h)
cheb = C.chebfit(r / h, np.exp(r), 6)
coef = [c / h**k for k, c in enumerate(C.cheb2poly(cheb))]
g = np.linspace(-h, h, 100001)
show("exp", coef, np.max(np.abs(P.polyval(g, coef) / np.exp(g) - 1)),
     "relative")

# erf(a) = a P(a^2) for a < 0.875: P of degree 5 in t = a^2.
T, HI = 0.875, 3.92
t = (nodes(-1, 1) + 1) / 2 * T * T
f = np.array([erf(sqrt(v)) / sqrt(v) for v in t])
coef = P.polyfit(t, f, 5)
g = np.linspace(1e-12, T * T, 100001)
want = np.array([erf(sqrt(v)) / sqrt(v) for v in g])
show("erf, |x| < 0.875", coef,
     np.max(np.abs(P.polyval(g, coef) / want - 1)), "relative")

# erf(a) for 0.875 <= a < 3.92: degree 14 in u = (a - mid) / half.
mid, half = (T + HI) / 2, (HI - T) / 2
a = nodes(T, HI)
coef = C.cheb2poly(C.chebfit((a - mid) / half, [erf(v) for v in a], 14))
g = np.linspace(T, HI, 100001)
err = np.max(np.abs(P.polyval((g - mid) / half, coef) -
                    np.array([erf(v) for v in g])))
show(f"erf, 0.875 <= |x| < 3.92 (u = (|x| - {mid}) * {1 / half:.9e})", coef,
     err, "absolute")
