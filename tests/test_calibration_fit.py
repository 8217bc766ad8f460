"""The calibration's incremental fit is the robust fit it describes.

``Window`` keeps the unweighted normal equations and the sorted ratios as
observations enter and leave, and each fit resumes from the one before
(one reweighting round a call); ``_fit`` over it must give what the
reference below gives: the same procedure written out naively (weighted
least squares summed observation by observation, from the observations the
window should hold), over random sequences with outliers, bases of 0,
evictions and restarts.
"""

from __future__ import annotations

import math
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_turntrim._counting.calibrated import _fit
from langchain_turntrim._counting.least_squares import Window

Seen = list[tuple[float, int, int]]
Fitted = tuple[float, float, float]


def reference_weights(seen: Seen, fitted: Fitted) -> list[float] | None:
    """Huber's weights by the residuals from ``fitted`` (None: no scale)."""
    a, b, c = fitted
    residuals = [y - (a * x + b * n + c) for x, n, y in seen]
    scale = 1.4826 * statistics.median(abs(r) for r in residuals)
    if scale <= 0:
        return None
    return [min(1.0, 1.5 * scale / abs(r)) if r else 1.0 for r in residuals]


def reference_solve(
    seen: Seen, weights: list[float] | None, prior: float, *, intercept: bool
) -> Fitted | None:
    """Weighted least squares with a light ridge towards ``(prior, 0, 0)``."""
    size = 3 if intercept else 2
    m = [[0.0] * size for _ in range(size)]
    v = [0.0] * size
    for k, (x, n, y) in enumerate(seen):
        w = 1.0 if weights is None else weights[k]
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
    solved = reference_gauss(m, v)
    if solved is None:
        return None
    return solved[0], solved[1], solved[2] if intercept else 0.0


def reference_from_scratch(seen: Seen, prior: float, *, intercept: bool) -> Fitted:
    """An unweighted solve, then up to three rounds reweighted by the last one."""
    fitted: Fitted = (prior, 0.0, 0.0)
    weights = None
    for _ in range(4):
        solved = reference_solve(seen, weights, prior, intercept=intercept)
        if solved is None:
            break
        fitted = solved
        weights = reference_weights(seen, fitted)
        if weights is None:
            break
    return fitted


def reference_robust_fit(seen: Seen, prior: float, start: Fitted | None) -> Fitted:
    """From scratch, or one round reweighted by ``start``'s residuals; with a
    constant, or without one when it comes out negative."""
    if start is None:
        fitted = reference_from_scratch(seen, prior, intercept=True)
        if fitted[2] < 0:
            fitted = reference_from_scratch(seen, prior, intercept=False)
        return fitted
    weights = reference_weights(seen, start)
    solved = reference_solve(seen, weights, prior, intercept=True)
    if solved is not None and solved[2] < 0:
        solved = reference_solve(seen, weights, prior, intercept=False)
    return (prior, 0.0, 0.0) if solved is None else solved


def reference_gauss(m: list[list[float]], v: list[float]) -> list[float] | None:
    size = len(v)
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
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


def reference_fit(
    seen: Seen, max_margin: float, start: Fitted | None
) -> tuple[tuple[float, ...], Fitted | None]:
    """The fit of ``seen`` resumed from ``start``, and what the next resumes from."""
    ratios = [y / x for x, _, y in seen if x > 0]
    prior = statistics.median(ratios) if ratios else 1.0
    a, b, c = prior, 0.0, 0.0
    resume = None
    if len(seen) >= 3:
        a, b, c = resume = reference_robust_fit(seen, prior, start)
        if a <= 0:
            a, b, c = prior, 0.0, 0.0
            resume = None
    worst = 0.0
    for x, n, y in seen:
        fitted = a * x + b * n + c
        if fitted > 0:
            worst = max(worst, y / fitted - 1)
    return (a, b, c, min(max_margin, worst)), resume


def close(got: tuple[float, ...], want: tuple[float, ...]) -> bool:
    return all(
        math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want, strict=True)
    )


@st.composite
def observations(draw: st.DrawFn) -> tuple[float, int, int]:
    """One call: a base count (sometimes 0 or tiny), its messages, and a report
    on a hidden linear rule, with noise and, now and then, an outlier."""
    x = draw(st.one_of(st.just(0), st.integers(1, 40), st.integers(40, 60_000)))
    n = draw(st.integers(0, 120))
    ratio = draw(st.sampled_from([0.8, 1.0, 1.33, 2.5]))
    noise = draw(st.integers(-40, 40))
    y = round(ratio * x + 4 * n + 20) + noise
    if draw(st.integers(0, 9)) == 0:  # an outlier
        y = draw(st.integers(0, 5_000_000))
    return float(x), n, max(0, y)


@settings(max_examples=150)
@given(
    seen=st.lists(observations(), min_size=1, max_size=150),
    limit=st.sampled_from([3, 5, 16, 64]),
    keep=st.one_of(st.none(), st.integers(1, 4)),
)
def test_the_incremental_fit_is_the_described_fit(seen: Seen, limit: int, keep: int | None) -> None:
    window = Window(limit)
    held: Seen = []
    resume = want_resume = None
    for i, (x, n, y) in enumerate(seen):
        window.append(x, n, y)
        held = [*held, (x, n, y)][-limit:]
        if keep is not None and i == len(seen) // 2:
            window.keep_newest(keep)  # a shift: the fit restarts from the newest calls
            held = held[-keep:]
            resume = want_resume = None
        assert list(window) == held
        fitted, resume = _fit(window, i + 1, settled=True, max_margin=0.15, start=resume)
        want, want_resume = reference_fit(held, 0.15, want_resume)
        assert close(tuple(fitted[:4]), want)
        assert (resume is None) == (want_resume is None)
        fresh = Window(limit, held)  # what entered and left is all undone
        assert (window.sums, window.ratios) == (fresh.sums, fresh.ratios)


@settings(max_examples=50)
@given(seen=st.lists(observations(), max_size=80))
def test_the_window_keeps_the_newest_observations(seen: Seen) -> None:
    window = Window(64, seen)
    newest = seen[-64:]
    assert list(window) == newest
    ratios = [y / x for x, _, y in newest if x > 0]
    assert window.ratios == sorted(ratios)
    assert window.prior() == (statistics.median(ratios) if ratios else 1.0)
