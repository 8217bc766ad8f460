"""The calibration's fit: Huber-weighted least squares of reported counts on
the base counter's tokens and the number of messages, with a light ridge
towards the plain median ratio (``robust_fit``)."""

from __future__ import annotations

import statistics
from typing import Final

__all__ = ["robust_fit"]

#: Huber's threshold, in robust standard deviations, and the reweighting rounds.
_HUBER: Final = 1.5
_ROUNDS: Final = 4


def robust_fit(
    seen: list[tuple[float, int, int]], prior: float, *, intercept: bool
) -> tuple[float, float, float]:
    """Huber-weighted (iteratively reweighted) least squares, with or without ``c``."""
    a, b, c = prior, 0.0, 0.0
    weights = [1.0] * len(seen)
    for _ in range(_ROUNDS):
        solved = _solve(seen, weights, prior, intercept=intercept)
        if solved is None:
            break
        a, b, c = solved
        residuals = [y - (a * x + b * n + c) for x, n, y in seen]
        scale = 1.4826 * statistics.median(abs(r) for r in residuals)
        if scale <= 0:
            break
        weights = [min(1.0, _HUBER * scale / abs(r)) if r else 1.0 for r in residuals]
    return a, b, c


def _solve(
    seen: list[tuple[float, int, int]], weights: list[float], prior: float, *, intercept: bool
) -> tuple[float, float, float] | None:
    """Weighted least squares, with a light ridge towards ``(prior, 0, 0)``."""
    size = 3 if intercept else 2
    m = [[0.0] * size for _ in range(size)]
    v = [0.0] * size
    for (x, n, y), w in zip(seen, weights, strict=True):
        row = (x, float(n), 1.0)
        for i in range(size):
            v[i] += w * row[i] * y
            for j in range(size):
                m[i][j] += w * row[i] * row[j]
    target = (prior, 0.0, 0.0)
    for i in range(size):
        ridge = 1e-3 * (m[i][i] or 1.0)
        m[i][i] += ridge
        v[i] += ridge * target[i]
    solved = _gauss(m, v)
    if solved is None:
        return None
    return solved[0], solved[1], solved[2] if intercept else 0.0


def _gauss(m: list[list[float]], v: list[float]) -> list[float] | None:
    size = len(v)
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:  # noqa: PLR2004 - singular
            return None
        m[col], m[pivot] = m[pivot], m[col]
        v[col], v[pivot] = v[pivot], v[col]
        for r in range(col + 1, size):
            f = m[r][col] / m[col][col]
            for k in range(col, size):
                m[r][k] -= f * m[col][k]
            v[r] -= f * v[col]
    out = [0.0] * size
    for r in reversed(range(size)):
        out[r] = (v[r] - sum(m[r][k] * out[k] for k in range(r + 1, size))) / m[r][r]
    return out
