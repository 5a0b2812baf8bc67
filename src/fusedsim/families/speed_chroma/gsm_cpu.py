"""SpEED's GSM estimation compiled with numba: :mod:`.gsm`'s arithmetic as C-style loops, the same bits.

Each function mirrors its counterpart in :mod:`.gsm` (and libvmaf's ``speed.c``) operation by operation: float32
values stay float32 (``F``), C's doubles are float64 (``D``), sums run in libvmaf's order. numba does not contract
multiply-adds without fastmath, so every step rounds as in C.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.families.speed_chroma.gsm import GsmParams

__all__ = ["covariances_many", "est_params_numba", "speed_scores_many"]

F = np.float32
D = np.float64
_EPS = 1e-6
_LOG2_2PIE = math.log2(2 * math.pi * math.e)


@njit(cache=True, nogil=True)
def _covariance(r, th, tw):
    """The 25x25 covariance of the 5x5 neighbourhoods, libvmaf's arithmetic: float32 means, then per pair a double
    sum of centred products in row-major order (:func:`_pair_sums`). The samples are laid out one position per
    row: each sum still adds its terms in libvmaf's order (independent sums, not a reordering), and every term is
    the same float or double."""
    sub_h, sub_w = th - 4, tw - 4
    count = sub_h * sub_w
    samples = np.empty((count, 25), dtype=np.float32)  # position t = i * sub_w + j, neighbour k
    for k in range(25):
        a, b = k // 5, k % 5
        for i in range(sub_h):
            for j in range(sub_w):
                samples[i * sub_w + j, k] = r[a + i, b + j]
    sums32 = np.zeros(25, dtype=np.float32)
    for t in range(count):
        for k in range(25):
            sums32[k] = sums32[k] + samples[t, k]
    means = np.empty(25, dtype=np.float64)
    for k in range(25):
        means[k] = D(sums32[k] / F(count))
    centred = np.zeros((count, 32), dtype=np.float64)  # 25 neighbours, zero-padded to whole blocks of 8
    for t in range(count):
        for k in range(25):
            centred[t, k] = D(samples[t, k]) - means[k]
    sums = _pair_sums(centred, count)
    cov = np.zeros((25, 25), dtype=np.float32)
    for x in range(25):
        for y in range(x + 1):
            value = F(sums[x, y] / D(count))
            cov[x, y] = value
            cov[y, x] = value
    return cov


@njit(cache=True, nogil=True)
def _pair_sums(centred, count):
    """For every pair ``y <= x`` of neighbours, the double sum of ``centred[t, x] * centred[t, y]`` over the
    positions in order (libvmaf's ``compute_cov_kernel_scalar``). Eight neighbours ``y`` at a time keep their
    sums in registers across the positions, each its own sequential chain (1.4x faster than one sum array
    updated per position); the block past ``x`` reads the zero padding or pairs never used."""
    sums = np.zeros((25, 32), dtype=np.float64)
    for x in range(25):
        for yb in range(0, x + 1, 8):
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
            for t in range(count):
                row = centred[t]
                cx = row[x]
                a0 += cx * row[yb]
                a1 += cx * row[yb + 1]
                a2 += cx * row[yb + 2]
                a3 += cx * row[yb + 3]
                a4 += cx * row[yb + 4]
                a5 += cx * row[yb + 5]
                a6 += cx * row[yb + 6]
                a7 += cx * row[yb + 7]
            out = sums[x]
            out[yb] = a0
            out[yb + 1] = a1
            out[yb + 2] = a2
            out[yb + 3] = a3
            out[yb + 4] = a4
            out[yb + 5] = a5
            out[yb + 6] = a6
            out[yb + 7] = a7
    return sums


@njit(cache=True, nogil=True, inline="always")
def _sqrt_f(x):
    return F(math.sqrt(D(x)))


@njit(cache=True, nogil=True)
def _householder(a, col, start, n):
    if n - start == 1:
        return F(0.0)
    s2 = F(0.0)
    for i in range(start + 1, n):
        s2 = s2 + a[i, col] * a[i, col]
    xnorm = _sqrt_f(s2)
    if xnorm == 0:
        return F(0.0)
    alpha = a[start, col]
    sign = F(-1.0) if alpha >= 0 else F(1.0)
    beta = sign * _sqrt_f(alpha * alpha + xnorm * xnorm)
    tau = (beta - alpha) / beta
    s = alpha - beta
    if s != 0:
        for i in range(start, n):
            a[i, col] = a[i, col] / s
        a[start, col] = beta
    return tau


@njit(cache=True, nogil=True)
def _tridiagonal(a, d, sd):
    n = a.shape[0]
    v = np.zeros(n, dtype=np.float32)
    x = np.zeros(n, dtype=np.float32)
    for i in range(n - 2):
        tau = _householder(a, i, i + 1, n)
        s = i + 1
        for j in range(s, n):
            v[j] = a[j, i]
        if tau != 0:
            v[s] = F(1.0)
            for r in range(s, n):
                acc = F(0.0)
                for j in range(s, n):
                    acc = acc + (tau * a[r, j]) * v[j]
                x[r] = acc
            xv = F(0.0)
            for r in range(s, n):
                xv = xv + x[r] * v[r]
            alpha = F(D(-0.5) * D(tau) * D(xv))
            for r in range(s, n):
                x[r] = x[r] + alpha * v[r]
            for r in range(s, n):
                for c in range(s, n):
                    a[r, c] = a[r, c] - (x[r] * v[c] + v[r] * x[c])
    for i in range(n):
        d[i] = a[i, i]
    for i in range(n - 1):
        sd[i] = a[i + 1, i]


@njit(cache=True, nogil=True)
def _chop(d, sd, lo, n):
    for i in range(lo, lo + n - 1):
        if D(abs(sd[i])) < _EPS * D(abs(d[i]) + abs(d[i + 1])):
            sd[i] = F(0.0)


@njit(cache=True, nogil=True)
def _givens(a, b):
    if b == 0:
        return F(1.0), F(0.0)
    if abs(b) > abs(a):
        t = -a / b
        s1 = F(D(1.0) / math.sqrt(D(F(1.0) + t * t)))
        return s1 * t, s1
    t = -b / a
    c1 = F(D(1.0) / math.sqrt(D(F(1.0) + t * t)))
    return c1, c1 * t


@njit(cache=True, nogil=True)
def _qr_step(d, sd, lo, n):
    ta, tb, tab = d[lo + n - 2], d[lo + n - 1], sd[lo + n - 2]
    dt = F(D(ta - tb) / D(2.0))
    if dt > 0:
        mu = tb - tab * (tab / (dt + _sqrt_f(dt * dt + tab * tab)))
    elif dt == 0:
        mu = tb - abs(tab)
    else:
        mu = tb + tab * (tab / (-dt + _sqrt_f(dt * dt + tab * tab)))
    if _EPS * D(abs(mu)) > D(abs(d[lo]) + abs(sd[lo])):
        mu = F(0.0)
    x = d[lo] - mu
    z = sd[lo]
    bk = F(0.0)
    zk = F(0.0)
    ap, bp, aq = d[lo], sd[lo], d[lo + 1]
    if n == 2:
        c, s = _givens(x, z)
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq)
        aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq)
        d[lo] = ap1
        sd[lo] = bp1
        d[lo + 1] = aq1
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
        ak = ap1
        bk = bp1
        zk = zp1
        ap = aq1
        bp = bq1
        if k < n - 2:
            aq = d[lo + k + 2]
        if k < n - 3:
            bq = sd[lo + k + 2]
        d[lo + k] = ak
        if k > 0:
            sd[lo + k - 1] = bk1
        if k < n - 2:
            sd[lo + k + 1] = bp
        x = bk
        z = zk
    d[lo + n - 1] = ap
    sd[lo + n - 2] = bk


@njit(cache=True, nogil=True)
def _eigenvalues(cov):
    n = cov.shape[0]
    a = cov.copy()
    d = np.zeros(n, dtype=np.float32)
    sd = np.zeros(n, dtype=np.float32)
    _tridiagonal(a, d, sd)
    _chop(d, sd, 0, n)
    b = n - 1
    sweeps = 0
    while b > 0 and sweeps < 500:
        if sd[b - 1] == 0:
            b -= 1
            continue
        lo = b - 1
        while lo > 0 and sd[lo - 1] != 0:
            lo -= 1
        _qr_step(d, sd, lo, b - lo + 1)
        _chop(d, sd, lo, b - lo + 1)
        sweeps += 1
    return d


@njit(cache=True, nogil=True)
def _matmul(x, y, out):
    for i in range(x.shape[0]):
        for j in range(y.shape[1]):
            out[i, j] = F(0.0)
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            xik = x[i, k]
            for j in range(y.shape[1]):
                out[i, j] = out[i, j] + xik * y[k, j]


@njit(cache=True, nogil=True, inline="always")
def _reflect_rows(h, y, out, k):
    """``out = h @ y`` for libvmaf's Householder matrix of step ``k``, whose first ``k`` rows and columns are the
    identity's (their off-diagonal entries are +-0: products of the reflection vector's zeros). Rows before ``k``
    are copied, and the others sum only the terms from ``k`` on. The skipped terms are exact zeros, so each
    sum is the same except where it is itself zero, whose sign may differ. A zero's sign never reaches the
    scores: zeros only meet other sums and products, the divisors near zero take the singular branch, and the
    variances enter as ``x + sigma`` or ``1 + x``."""
    n = h.shape[0]
    for i in range(k):
        for j in range(y.shape[1]):
            out[i, j] = y[i, j]
    for i in range(k, n):
        for j in range(y.shape[1]):
            out[i, j] = F(0.0)
        for m in range(k, n):
            him = h[i, m]
            for j in range(y.shape[1]):
                out[i, j] = out[i, j] + him * y[m, j]


@njit(cache=True, nogil=True)
def _solve(cov, y, x):
    """libvmaf's QR solve into ``x``; False when ``|R_ii| < 1e-6``."""
    n = cov.shape[0]
    z = cov.copy()
    q = np.eye(n, dtype=np.float32)
    h = np.empty((n, n), dtype=np.float32)
    tmp = np.empty((n, n), dtype=np.float32)
    vec = np.empty(n, dtype=np.float32)
    for k in range(n - 1):
        for i in range(n):
            for j in range(n):
                if i < k or j < k:
                    z[i, j] = F(1.0) if i == j else F(0.0)
        for i in range(n):
            vec[i] = z[i, k]
        acc = F(0.0)
        for i in range(n):
            acc = acc + vec[i] * vec[i]
        norm = _sqrt_f(acc)
        sign = F(1.0) if cov[k, k] >= 0 else F(-1.0)
        vec[k] = vec[k] + sign * norm
        acc = F(0.0)
        for i in range(n):
            acc = acc + vec[i] * vec[i]
        norm2 = _sqrt_f(acc)
        for i in range(n):
            vec[i] = vec[i] / norm2
        for i in range(n):
            for j in range(n):
                h[i, j] = (F(-2.0) * vec[i]) * vec[j]
        for i in range(n):
            h[i, i] = h[i, i] + F(1.0)
        _reflect_rows(h, z, tmp, k)
        z[:, :] = tmp
        _reflect_rows(h, q, tmp, k)
        q[:, :] = tmp
    r = np.empty((n, n), dtype=np.float32)
    _matmul(q, cov, r)
    rhs = np.empty_like(y)
    _matmul(q, y, rhs)  # q is libvmaf's Q transposed twice: the accumulated product
    for i in range(n - 1, -1, -1):
        den = r[i, i]
        if D(abs(den)) < _EPS:
            return False
        for j in range(y.shape[1]):
            acc = rhs[i, j]
            for k in range(i + 1, n):
                acc = acc - x[k, j] * r[i, k]
            x[i, j] = acc / den
    return True


@njit(cache=True, nogil=True)
def _est_params(r, sigma_nn):
    h, w = r.shape
    return _est_params_given(r, _covariance(r, h // 5 * 5, w // 5 * 5), sigma_nn)


@njit(cache=True, nogil=True)
def _est_params_given(r, cov, sigma_nn):
    """:func:`_est_params` of the residual ``r`` whose covariance ``cov`` is already known."""
    h, w = r.shape
    th, tw = h // 5 * 5, w // 5 * 5
    eig = _eigenvalues(cov)
    nbh, nbv = tw // 5, th // 5
    nb = nbh * nbv
    y = np.empty((25, nb), dtype=np.float32)
    for a in range(5):
        for b in range(5):
            for bi in range(nbv):
                for bj in range(nbh):
                    y[5 * a + b, bi * nbh + bj] = r[5 * bi + a, 5 * bj + b]
    x = np.zeros((25, nb), dtype=np.float32)
    regular = True
    for v in eig:
        if D(v) < _EPS:
            regular = False
    solved = _solve(cov, y, x) if regular else False
    singular = not solved
    if singular:
        x[:, :] = F(0.0)
    variances = np.empty(nb, dtype=np.float32)
    for j in range(nb):
        acc = (x[0, j] * y[0, j]) / F(25.0)
        for i in range(1, 25):
            acc = acc + (x[i, j] * y[i, j]) / F(25.0)
        variances[j] = acc
    entropies = np.zeros(nb, dtype=np.float32)
    snn = F(sigma_nn)
    for k in range(25):
        lam = F(0.0) if eig[k] < 0 else eig[k]
        for j in range(nb):
            entropies[j] = F(D(entropies[j]) + (math.log2(D(lam * variances[j] + snn)) + _LOG2_2PIE))
    return entropies, variances, singular


def est_params_numba(residual: np.ndarray, sigma_nn: float) -> GsmParams:
    """:func:`.gsm.est_params`, compiled: the same :class:`~.gsm.GsmParams`, bit for bit."""
    entropies, variances, singular = _est_params(np.ascontiguousarray(residual, dtype=np.float32), float(sigma_nn))
    return GsmParams(entropies, variances, bool(singular))


# ----------------------------------------------------------------------------------------------- scores
@njit(cache=True, nogil=True)
def _weight_args(mode, v_ref, v_dis):
    """:func:`.gsm._weight`: the doubles whose ``log2`` weights the ref and dist entropies."""
    one = F(1.0)
    if mode == 0:
        return D(one + v_ref), D(one + v_dis)
    if mode == 1:
        return D(one + v_ref), D(one + v_ref)
    if mode == 2:
        return D(one + v_dis), D(one + v_dis)
    mean = D(v_ref + v_dis) / D(2.0)
    if mode == 3:
        return D(1.0) + mean, D(1.0) + mean
    if mode == 4:
        return D(one + v_ref), D(1.0) + mean
    if mode == 5:
        return D(one + v_ref), D(1.0) + (D(0.75) * D(v_ref) + D(0.25) * D(v_dis))
    return D(one + v_ref), D(1.0) + (D(0.25) * D(v_ref) + D(0.75) * D(v_dis))  # mode 6 (checked by the caller)


@njit(cache=True, nogil=True)
def _plane_score(e_ref, v_ref, s_ref, e_dis, v_dis, s_dis, sigma_nn, nn_floor, mode):
    """:func:`.gsm.speed_score`: the float32 SpEED score of one plane pair."""
    if s_ref != s_dis:
        return F(0.0)
    snn, nnf = F(sigma_nn), F(nn_floor)
    base = F(D(25.0) * (math.log2(D((F(1.0) + nnf) * snn)) + _LOG2_2PIE))
    score = F(0.0)
    for j in range(e_ref.shape[0]):
        if e_ref[j] < base and e_dis[j] < base:
            continue
        arg_ref, arg_dis = _weight_args(mode, v_ref[j], v_dis[j])
        spatial_ref = F(D(e_ref[j]) * math.log2(arg_ref))
        spatial_dis = F(D(e_dis[j]) * math.log2(arg_dis))
        score = F(score + abs(spatial_ref - spatial_dis))
    return F(score / F(e_ref.shape[0]))


@njit(cache=True, nogil=True)
def _clipped(score, max_val):
    """:func:`.twin.combine`'s clip: the score as a double where below ``max_val`` (NaN gives ``max_val``)."""
    return D(score) if D(score) < max_val else max_val


@parallel_kernel
def _covariances(residuals, out):
    h, w = residuals.shape[1:]
    for m in prange(residuals.shape[0]):
        out[m] = _covariance(residuals[m], h // 5 * 5, w // 5 * 5)


def covariances_many(residuals: np.ndarray) -> np.ndarray:
    """libvmaf's 25x25 covariances ``(N, 25, 25)`` float32 of residuals ``(N, H', W')`` float32 (at least 5x5),
    threads taking planes: :func:`.gsm.covariance`'s bits."""
    residuals = np.ascontiguousarray(residuals, dtype=np.float32)
    out = np.empty((residuals.shape[0], 25, 25), dtype=np.float32)
    if residuals.shape[0]:
        _covariances(residuals, out)
    return out


@parallel_kernel
def _speed_scores_batch(residuals, covariances, sigma_nn, nn_floor, mode, max_val, entropies, variances, singular,
                        out):
    for m in prange(residuals.shape[0]):  # planes (frame, plane) in order ref_u, ref_v, dis_u, dis_v
        r = residuals[m]
        h, w = r.shape
        cov = covariances[m] if covariances.shape[0] else _covariance(r, h // 5 * 5, w // 5 * 5)
        e, v, s = _est_params_given(r, cov, sigma_nn)
        entropies[m] = e
        variances[m] = v
        singular[m] = s
    for i in prange(out.shape[0]):
        u = _plane_score(entropies[4 * i], variances[4 * i], singular[4 * i], entropies[4 * i + 2],
                         variances[4 * i + 2], singular[4 * i + 2], sigma_nn, nn_floor, mode)
        v = _plane_score(entropies[4 * i + 1], variances[4 * i + 1], singular[4 * i + 1], entropies[4 * i + 3],
                         variances[4 * i + 3], singular[4 * i + 3], sigma_nn, nn_floor, mode)
        err_u = singular[4 * i] or singular[4 * i + 2]
        err_v = singular[4 * i + 1] or singular[4 * i + 3]
        if err_u and not err_v:
            uv = v
        elif err_v and not err_u:
            uv = u
        else:
            uv = F(D(F(u + v)) / 2.0)
        out[i, 0] = _clipped(u, max_val)
        out[i, 1] = _clipped(v, max_val)
        out[i, 2] = _clipped(uv, max_val)


def speed_scores_many(residuals: np.ndarray, sigma_nn: float, nn_floor: float, weight_var_mode: int,
                      max_val: float, covariances: np.ndarray | None = None) -> np.ndarray:
    """libvmaf's ``(u, v, uv)`` scores ``(N, 3)`` float64 of ``N`` frames from their residuals ``(N, 4, H', W')``
    float32 (planes ref_u, ref_v, dis_u, dis_v), threads taking planes then frames: :func:`.twin.combine` of
    :func:`.gsm.speed_score` of :func:`.gsm.est_params`, bit for bit. ``covariances`` ``(N, 4, 25, 25)`` float32:
    the residuals' covariances when already computed (the op ``speed_covariance``), else computed here."""
    if not 0 <= weight_var_mode <= 6:
        raise ValueError(f"speed_weight_var_mode must be 0..6; got {weight_var_mode}")
    n, planes, h, w = residuals.shape
    flat = np.ascontiguousarray(residuals, dtype=np.float32).reshape(n * planes, h, w)
    blocks = (h // 5) * (w // 5)
    entropies = np.empty((n * planes, blocks), dtype=np.float32)
    variances = np.empty((n * planes, blocks), dtype=np.float32)
    singular = np.empty(n * planes, dtype=np.bool_)
    out = np.empty((n, 3), dtype=np.float64)
    if covariances is None:
        known = np.zeros((0, 25, 25), dtype=np.float32)
    else:
        if covariances.shape != (n, planes, 25, 25):
            raise ValueError(f"covariances must be (N, 4, 25, 25) = {(n, planes, 25, 25)}; got {covariances.shape}")
        known = np.ascontiguousarray(covariances, dtype=np.float32).reshape(n * planes, 25, 25)
    if n:
        _speed_scores_batch(flat, known, float(sigma_nn), float(nn_floor), int(weight_var_mode), float(max_val), entropies,
                            variances, singular, out)
    return out
