"""SpEED's GSM parameter estimation and score (libvmaf ``speed.c``: ``est_params``, ``get_speed_score``), in
libvmaf's float32/double order of operations: the host half of the twin.

Everything here works on one residual image (``(H', W')`` float32, a few dozen samples a side): the 25x25 covariance
of 5x5 blocks, its eigenvalues (Householder tridiagonalisation, implicit symmetric QR with a Wilkinson shift), a
Householder QR solve of ``K X = Y``, the per-block variances and entropies, and the score of a ref/dist pair.

Exactness rules of this file: every value carries libvmaf's C type (``F`` float32, ``D`` double) and every
operation is written in C's order; vectorised steps (numpy) only group operations that C performs on independent
elements, each element keeping its sequential order. Python floats are never mixed with float32 values (numpy's
weak scalars would keep float32 where C promotes to double).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["BLOCK", "GsmParams", "block_grid", "covariance", "est_params", "speed_score"]

F = np.float32
D = np.float64
#: SpEED's block size: 5x5 blocks, a 25x25 covariance.
BLOCK = 5
_ELEMENTS = BLOCK * BLOCK
_EPS = 1e-6  # EIGENVALUE_EPS, a double
_MAX_SWEEPS = 500
_LOG2_2PIE = math.log2(2 * math.pi * math.e)  # C's log2(2 * M_PI * M_E)


def block_grid(height: int, width: int) -> tuple[int, int]:
    """``(Th, Tw)``: the residual's rows and columns that whole 5x5 blocks cover (libvmaf's truncated size)."""
    return height // BLOCK * BLOCK, width // BLOCK * BLOCK


@dataclass(frozen=True)
class GsmParams:
    """One plane's parameters: per-block ``entropies`` and ``variances`` (float32, blocks in row-major order) and
    whether its covariance was singular (libvmaf then uses zero variances and reports an error)."""

    entropies: np.ndarray
    variances: np.ndarray
    singular: bool


# ------------------------------------------------------------------------------------------- covariance
def _covariance(r: np.ndarray, th: int, tw: int) -> np.ndarray:
    """The 25x25 float32 covariance of the 5x5 shifts of ``r``'s ``(th-4) x (tw-4)`` sub-images."""
    sub_h, sub_w = th - BLOCK + 1, tw - BLOCK + 1
    # row k = 5a+b: the sub-image at offset (a, b), flattened in row-major order
    shifted = np.stack([r[a:a + sub_h, b:b + sub_w].reshape(-1) for a in range(BLOCK) for b in range(BLOCK)])
    count = sub_h * sub_w
    sums = np.zeros(_ELEMENTS, dtype=F)
    for m in range(count):  # float32, sequential in row-major order (compute_mean)
        sums = sums + shifted[:, m]
    means = sums / F(count)
    centred = shifted.astype(D) - means.astype(D)[:, None]
    acc = np.zeros((_ELEMENTS, _ELEMENTS), dtype=D)
    for m in range(count):  # double, sequential (compute_cov_kernel_scalar)
        col = centred[:, m]
        acc = acc + col[:, None] * col[None, :]
    return (acc / D(count)).astype(F)


def covariance(residual: np.ndarray) -> np.ndarray:
    """libvmaf's 25x25 float32 covariance of one residual image ``(H', W')`` float32 (at least 5x5): the 5x5
    neighbourhoods of its whole-block area (``compute_mean``, then ``compute_cov_kernel_scalar``)."""
    th, tw = block_grid(*residual.shape)
    return _covariance(np.ascontiguousarray(residual[:th, :tw], dtype=F), th, tw)


# ------------------------------------------------------------------------------------------- eigenvalues
def _sign(x: np.float32) -> int:
    return 1 if x >= 0 else -1


def _sqrt_f(x: np.float32) -> np.float32:
    """C's ``(float) sqrt((double) x)``."""
    return F(math.sqrt(D(x)))


def _pythagoras(x: np.float32, y: np.float32) -> np.float32:
    return _sqrt_f(x * x + y * y)


def _seq_dot(x: np.ndarray, y: np.ndarray) -> np.float32:
    acc = F(0)
    for a, b in zip(x.tolist(), y.tolist()):
        acc = acc + F(a) * F(b)
    return acc


def _householder(a: np.ndarray, col: int, start: int, n: int) -> np.float32:
    if n - start == 1:
        return F(0)
    xnorm = _sqrt_f(_seq_dot(a[start + 1:, col], a[start + 1:, col]))
    if xnorm == 0:
        return F(0)
    alpha = a[start, col]
    beta = F(-_sign(alpha)) * _pythagoras(alpha, xnorm)
    tau = (beta - alpha) / beta
    s = alpha - beta
    if s != 0:
        a[start:, col] = a[start:, col] / s
        a[start, col] = beta
    return tau


def _tridiagonal(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """libvmaf's ``convert_to_tridiagonal`` (GSL ``symmtd``) of a float32 copy: diagonal and subdiagonal."""
    n = a.shape[0]
    v = np.zeros(n, dtype=F)
    for i in range(n - 2):
        tau = _householder(a, i, i + 1, n)
        s = i + 1
        v[s:] = a[s:, i]
        if tau != 0:
            v[s] = F(1)
            x = np.zeros(n - s, dtype=F)
            for j in range(s, n):  # x[r] += tau * A[r][j] * v[j], j in order
                x = x + (tau * a[s:, j]) * v[j]
            xv = _seq_dot(x, v[s:])
            alpha = F(D(-0.5) * D(tau) * D(xv))
            x = x + alpha * v[s:]
            a[s:, s:] = a[s:, s:] - (x[:, None] * v[None, s:] + v[s:, None] * x[None, :])
    return np.diagonal(a).copy(), np.array([a[i + 1, i] for i in range(n - 1)], dtype=F)


def _chop(d: list, sd: list, lo: int, n: int) -> None:
    for i in range(lo, lo + n - 1):
        if D(abs(sd[i])) < _EPS * D(abs(d[i]) + abs(d[i + 1])):
            sd[i] = F(0)


def _trailing_eigenvalue(d: list, sd: list, lo: int, n: int) -> np.float32:
    ta, tb, tab = d[lo + n - 2], d[lo + n - 1], sd[lo + n - 2]
    dt = F(D(ta - tb) / D(2.0))
    if dt > 0:
        return tb - tab * (tab / (dt + _pythagoras(dt, tab)))
    if dt == 0:
        return tb - abs(tab)
    return tb + tab * (tab / (-dt + _pythagoras(dt, tab)))


def _givens(a: np.float32, b: np.float32) -> tuple[np.float32, np.float32]:
    if b == 0:
        return F(1), F(0)
    if abs(b) > abs(a):
        t = -a / b
        s1 = F(D(1.0) / math.sqrt(D(F(1) + t * t)))
        return s1 * t, s1
    t = -b / a
    c1 = F(D(1.0) / math.sqrt(D(F(1) + t * t)))
    return c1, c1 * t


def _qr_step(d: list, sd: list, lo: int, n: int) -> None:
    """One implicit symmetric QR step with a Wilkinson shift on the block ``lo .. lo+n-1`` (libvmaf's order)."""
    mu = _trailing_eigenvalue(d, sd, lo, n)
    if _EPS * D(abs(mu)) > D(abs(d[lo]) + abs(sd[lo])):
        mu = F(0)
    x = d[lo] - mu
    z = sd[lo]
    bk = zk = F(0)
    ap, bp, aq = d[lo], sd[lo], d[lo + 1]
    if n == 2:
        c, s = _givens(x, z)
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq)
        aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq)
        d[lo], sd[lo], d[lo + 1] = ap1, bp1, aq1
        return
    bq = sd[lo + 1]
    for k in range(n - 1):
        c, s = _givens(x, z)
        bk1 = c * bk - s * zk
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq)
        zp1 = -s * bq
        aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq)
        bq1 = c * bq
        ak, bk, zk = ap1, bp1, zp1
        ap, bp = aq1, bq1
        if k < n - 2:
            aq = d[lo + k + 2]
        if k < n - 3:
            bq = sd[lo + k + 2]
        d[lo + k] = ak
        if k > 0:
            sd[lo + k - 1] = bk1
        if k < n - 2:
            sd[lo + k + 1] = bp
        x, z = bk, zk
    d[lo + n - 1] = ap
    sd[lo + n - 2] = bk


def eigenvalues(cov: np.ndarray) -> np.ndarray:
    """libvmaf's float32 eigenvalues of a symmetric float32 matrix (not sorted), in its order of operations."""
    n = cov.shape[0]
    if n == 1:
        return cov.reshape(1).copy()
    diag, sub = _tridiagonal(cov.copy())
    d = [F(v) for v in diag.tolist()]
    sd = [F(v) for v in sub.tolist()]
    _chop(d, sd, 0, n)
    b, sweeps = n - 1, 0
    while b > 0 and sweeps < _MAX_SWEEPS:
        if sd[b - 1] == 0:
            b -= 1
            continue
        a = b - 1
        while a > 0 and sd[a - 1] != 0:
            a -= 1
        _qr_step(d, sd, a, b - a + 1)
        _chop(d, sd, a, b - a + 1)
        sweeps += 1
    return np.array(d, dtype=F)


# ------------------------------------------------------------------------------------------------ solve
def _matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """libvmaf's ``matrix_mul``: each element a float32 sum over k in order, from 0."""
    out = np.zeros((x.shape[0], y.shape[1]), dtype=F)
    for k in range(x.shape[1]):
        out = out + x[:, k:k + 1] * y[k:k + 1, :]
    return out


def _qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """libvmaf's Householder QR with an explicit Q: ``(Q, R)`` as ``matrix_qr_decomposition`` leaves them."""
    n = a.shape[0]
    z = a.copy()
    q = np.eye(n, dtype=F)
    eye = np.eye(n, dtype=F)
    for k in range(n - 1):
        z[:k, :] = eye[:k, :]  # matrix_minor: rows and columns before k become the identity's
        z[:, :k] = eye[:, :k]
        vec = z[:, k].copy()
        norm = _sqrt_f(_seq_dot(vec, vec))
        vec[k] = vec[k] + F(_sign(a[k, k])) * norm
        vec = vec / _sqrt_f(_seq_dot(vec, vec))
        h = (F(-2) * vec[:, None]) * vec[None, :]
        h[np.arange(n), np.arange(n)] += F(1)
        z = _matmul(h, z)
        q = _matmul(h, q)
    r = _matmul(q, a)
    return q.T.copy(), r


def _solve(cov: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """X with ``cov @ X = y`` by libvmaf's QR and back substitution; None when ``|R_ii| < 1e-6``."""
    q, r = _qr(cov)
    rhs = _matmul(q.T.copy(), y)
    n = r.shape[0]
    x = np.zeros_like(y)
    for i in range(n - 1, -1, -1):
        den = r[i, i]
        if D(abs(den)) < _EPS:
            return None
        acc = rhs[i].copy()
        for k in range(i + 1, n):
            acc = acc - x[k] * r[i, k]
        x[i] = acc / den
    return x


# -------------------------------------------------------------------------------------------- parameters
def est_params(residual: np.ndarray, sigma_nn: float) -> GsmParams:
    """libvmaf's ``est_params`` of one residual image ``(H', W')`` float32 (at least 5x5)."""
    th, tw = block_grid(*residual.shape)
    r = np.ascontiguousarray(residual[:th, :tw], dtype=F)
    cov = covariance(r)
    eig = eigenvalues(cov)
    nbh, nbv = tw // BLOCK, th // BLOCK
    # Y[5a+b, block] = the block's pixel (a, b); blocks in row-major order
    y = r.reshape(nbv, BLOCK, nbh, BLOCK).transpose(1, 3, 0, 2).reshape(_ELEMENTS, nbv * nbh).copy()
    x = _solve(cov, y) if all(D(v) >= _EPS for v in eig.tolist()) else None
    singular = x is None
    if singular:
        x = np.zeros_like(y)
    z = (x * y) / F(_ELEMENTS)
    variances = z[0].copy()
    for i in range(1, _ELEMENTS):
        variances = variances + z[i]
    snn = F(sigma_nn)
    entropies = [F(0)] * variances.shape[0]
    for lam in eig.tolist():
        lam = F(0) if lam < 0 else F(lam)
        terms = (lam * variances + snn).tolist()
        entropies = [F(D(e) + (math.log2(D(t)) + _LOG2_2PIE)) for e, t in zip(entropies, terms)]
    return GsmParams(np.array(entropies, dtype=F), variances, singular)


def _weight(mode: int, v_ref: np.float32, v_dis: np.float32) -> tuple[float, float]:
    """The arguments of ``log2`` for the ref and dist terms under ``speed_weight_var_mode`` (C's types)."""
    one = F(1)
    if mode == 0:
        return D(one + v_ref), D(one + v_dis)
    if mode == 1:
        return D(one + v_ref), D(one + v_ref)
    if mode == 2:
        return D(one + v_dis), D(one + v_dis)
    mean = D(v_ref + v_dis) / D(2.0)
    if mode == 3:
        return D(1) + mean, D(1) + mean
    if mode == 4:
        return D(one + v_ref), D(1) + mean
    if mode == 5:
        return D(one + v_ref), D(1) + (D(0.75) * D(v_ref) + D(0.25) * D(v_dis))
    if mode == 6:
        return D(one + v_ref), D(1) + (D(0.25) * D(v_ref) + D(0.75) * D(v_dis))
    raise ValueError(f"speed_weight_var_mode must be 0..6; got {mode}")


def speed_score(ref: GsmParams, dis: GsmParams, sigma_nn: float, nn_floor: float, weight_var_mode: int
                ) -> np.float32:
    """libvmaf's float32 SpEED score of one plane pair (0 when exactly one of them is singular)."""
    if ref.singular != dis.singular:
        return F(0)
    snn, nnf = F(sigma_nn), F(nn_floor)
    base = F(D(_ELEMENTS) * (math.log2(D((F(1) + nnf) * snn)) + _LOG2_2PIE))
    score = F(0)
    for e_ref, e_dis, v_ref, v_dis in zip(ref.entropies.tolist(), dis.entropies.tolist(), ref.variances.tolist(),
                                          dis.variances.tolist()):
        e_ref, e_dis, v_ref, v_dis = F(e_ref), F(e_dis), F(v_ref), F(v_dis)
        if e_ref < base and e_dis < base:
            continue
        arg_ref, arg_dis = _weight(weight_var_mode, v_ref, v_dis)
        spatial_ref = F(D(e_ref) * math.log2(arg_ref))
        spatial_dis = F(D(e_dis) * math.log2(arg_dis))
        score = score + abs(spatial_ref - spatial_dis)
    return score / F(ref.entropies.shape[0])
