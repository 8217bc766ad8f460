"""The calibration's fit: Huber-weighted least squares of reported counts on
the base counter's tokens and the number of messages, with a light ridge
towards the plain median ratio (``robust_fit``).

The observations live in a ``Window`` that keeps, as they enter and leave, what
every refit starts from: the sums of the unweighted normal equations (in
integers, so exact whatever the order) and the sorted ratios whose median is
the prior. The first round of the fit is then O(1), and each reweighting
round is a few passes in C over the window's columns: the same arithmetic, in
the same order, as summing observation by observation. A fit resumed from
the one before (the window moved by one call) is one reweighting round.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import add, mul, sub, truediv
from typing import Final

__all__ = ["Coefficients", "Window", "robust_fit"]

#: Huber's threshold, in robust standard deviations, and the reweighting rounds.
_HUBER: Final = 1.5
_ROUNDS: Final = 4

Observation = tuple[float, int, int]
Matrix = list[list[float]]
#: ``(a, b, c)`` of ``reported ≈ a * base + b * messages + c``.
Coefficients = tuple[float, float, float]


class Window:
    """The newest ``limit`` observations ``(base, messages, reported)``, in
    columns, with the unweighted normal equations' sums and the sorted
    ``reported / base`` ratios kept up to date as observations enter and leave."""

    __slots__ = ("limit", "ns", "ratios", "sums", "xs", "ys")

    def __init__(self, limit: int, seen: Iterable[Observation] = ()) -> None:
        self.limit = limit
        self.xs: deque[float] = deque()
        self.ns: deque[float] = deque()
        self.ys: deque[float] = deque()
        #: Σx², Σxn, Σx, Σn², Σn, count, Σxy, Σny, Σy: integers, exact.
        self.sums = [0] * 9
        #: ``reported / base`` of the observations with a base, sorted.
        self.ratios: list[float] = []
        for x, n, y in seen:
            self.append(x, n, y)

    def __len__(self) -> int:
        return len(self.xs)

    def __iter__(self) -> Iterator[Observation]:
        """The observations, the oldest first."""
        return ((x, int(n), int(y)) for x, n, y in zip(self.xs, self.ns, self.ys, strict=True))

    def append(self, x: float, n: int, y: int) -> None:
        """Add an observation (``x`` an integral float), dropping the oldest past ``limit``."""
        if len(self.xs) >= self.limit:
            self._change(self.xs.popleft(), self.ns.popleft(), self.ys.popleft(), -1)
        self.xs.append(x)
        self.ns.append(float(n))
        self.ys.append(float(y))
        self._change(x, n, y, 1)

    def keep_newest(self, count: int) -> None:
        """Forget all but the newest ``count`` observations."""
        while len(self.xs) > count:
            self._change(self.xs.popleft(), self.ns.popleft(), self.ys.popleft(), -1)

    def _change(self, x: float, n: float, y: float, sign: int) -> None:
        xi, ni, yi = int(x), int(n), int(y)
        s = self.sums
        for k, term in enumerate((xi * xi, xi * ni, xi, ni * ni, ni, 1, xi * yi, ni * yi, yi)):
            s[k] += sign * term
        if x > 0:
            ratio = y / x
            if sign > 0:
                insort(self.ratios, ratio)
            else:
                del self.ratios[bisect_left(self.ratios, ratio)]

    def prior(self) -> float:
        """The median ``reported / base`` ratio (1 with no base)."""
        return statistics.median(self.ratios) if self.ratios else 1.0

    def normal(self) -> tuple[Matrix, list[float]]:
        """The unweighted normal equations, from the running sums: O(1)."""
        xx, xn, x, nn, n, count, xy, ny, y = map(float, self.sums)
        return [[xx, xn, x], [xn, nn, n], [x, n, count]], [xy, ny, y]

    def weighted(self, weights: list[float]) -> tuple[Matrix, list[float]]:
        """The normal equations weighted by ``weights`` (one an observation):
        each sum in observation order, each term ``w * row[i] * row[j]``."""
        xs, ns, ys = self.xs, self.ns, self.ys
        wx = list(map(mul, weights, xs))
        wn = list(map(mul, weights, ns))
        sx, sn = sum(wx), sum(wn)
        m = [
            [sum(map(mul, wx, xs)), sum(map(mul, wx, ns)), sx],
            [sum(map(mul, wn, xs)), sum(map(mul, wn, ns)), sn],
            [sx, sn, sum(weights)],
        ]
        return m, [sum(map(mul, wx, ys)), sum(map(mul, wn, ys)), sum(map(mul, weights, ys))]

    def fitted(self, a: float, b: float, c: float) -> list[float]:
        """``a * base + b * messages + c`` of each observation, in C passes
        (each product and sum the same as written out)."""
        products = map(add, map(mul, self.xs, repeat(a)), map(mul, self.ns, repeat(b)))
        return list(map(add, products, repeat(c)))

    def residuals(self, a: float, b: float, c: float) -> list[float]:
        """``reported - (a * base + b * messages + c)`` of each observation."""
        return list(map(sub, self.ys, self.fitted(a, b, c)))


def robust_fit(window: Window, prior: float, start: Coefficients | None = None) -> Coefficients:
    """Huber-weighted (iteratively reweighted) least squares with a constant
    ``c``, or without one when it comes out negative (a negative constant
    cannot be planned with).

    From scratch (no ``start``): an unweighted solve, then up to three
    rounds reweighted by the last solve's residuals. From ``start``, the fit
    of the window before its newest observation (which moved it by one
    call): one round, reweighted by ``start``'s residuals. Over a run of
    observations that is the same iteration, a round a call, towards what
    the window's fit settles on: each call then costs one round, not four.
    """
    if start is None:
        fitted = _from_scratch(window, prior, intercept=True)
        if fitted[2] < 0:
            fitted = _from_scratch(window, prior, intercept=False)
        return fitted
    weights = _weights(window, start)
    m, v = window.normal() if weights is None else window.weighted(weights)
    solved = _solve(m, v, prior, intercept=True)
    if solved is not None and solved[2] < 0:
        solved = _solve(m, v, prior, intercept=False)
    return (prior, 0.0, 0.0) if solved is None else solved


def _from_scratch(window: Window, prior: float, *, intercept: bool) -> Coefficients:
    a, b, c = prior, 0.0, 0.0
    m, v = window.normal()
    for done in range(1, _ROUNDS + 1):
        solved = _solve(m, v, prior, intercept=intercept)
        if solved is None:
            break
        a, b, c = solved
        if done == _ROUNDS:  # the weights after the last round would go unused
            break
        weights = _weights(window, solved)
        if weights is None:
            break
        m, v = window.weighted(weights)
    return a, b, c


def _weights(window: Window, fitted: Coefficients) -> list[float] | None:
    """Huber's weights of the window's observations, by their residuals from
    ``fitted``; None when it fits them all exactly (no scale)."""
    magnitudes = list(map(abs, window.residuals(*fitted)))
    scale = 1.4826 * statistics.median(magnitudes)
    if scale <= 0:
        return None
    limit = _HUBER * scale
    if 0.0 in magnitudes:  # fitted exactly: weighed in full
        return [min(1.0, limit / r) if r else 1.0 for r in magnitudes]
    # ``min(1.0, w)`` of each, without a call each.
    return [w if w < 1.0 else 1.0 for w in map(truediv, repeat(limit), magnitudes)]  # noqa: FURB136


def _solve(m: Matrix, v: list[float], prior: float, *, intercept: bool) -> Coefficients | None:
    """Weighted least squares, with a light ridge towards ``(prior, 0, 0)``."""
    size = 3 if intercept else 2
    m = [row[:size] for row in m[:size]]
    v = v[:size]
    target = (prior, 0.0, 0.0)
    for i in range(size):
        ridge = 1e-3 * (m[i][i] or 1.0)
        m[i][i] += ridge
        v[i] += ridge * target[i]
    solved = _gauss(m, v)
    if solved is None:
        return None
    return solved[0], solved[1], solved[2] if intercept else 0.0


def _gauss(m: Matrix, v: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting (the first largest pivot)."""
    size = len(v)
    for col in range(size):
        pivot, largest = col, abs(m[col][col])
        for r in range(col + 1, size):
            if abs(m[r][col]) > largest:
                pivot, largest = r, abs(m[r][col])
        if largest < 1e-12:  # noqa: PLR2004 - singular
            return None
        m[col], m[pivot] = m[pivot], m[col]
        v[col], v[pivot] = v[pivot], v[col]
        top, head = m[col], m[col][col]
        for r in range(col + 1, size):
            row = m[r]
            f = row[col] / head
            for k in range(col + 1, size):  # column ``col`` is not read again
                row[k] -= f * top[k]
            v[r] -= f * v[col]
    out = [0.0] * size
    for r in reversed(range(size)):
        row = m[r]
        tail = 0.0
        for k in range(r + 1, size):
            tail += row[k] * out[k]
        out[r] = (v[r] - tail) / row[r]
    return out
