"""Bit-exact left-to-right float64 sum on the GPU (the order of ``double s = 0; for (...) s += x[i];``).

A parallel reduction rounds differently from a C loop, so it cannot reproduce scores such as libvmaf's, which
pool millions of per-pixel doubles in one running sum. This kernel gets exactly the running sum's bits, in
parallel, from one observation about IEEE round-to-nearest:

While the exact value ``s + t`` stays inside one binade ``[2^e, 2^(e+1))`` (by magnitude), the result lies on
the grid of spacing ``u = 2^(e-52)`` and ``fl(s + t) = s + u * rn(t / u)``, where ``rn`` rounds to the nearest
integer; ``t / u`` is exact (a power-of-two scale) and ``rn`` does not depend on ``s`` unless ``t / u`` sits
exactly halfway (a tie, resolved to even by ``s``). So between binade changes and ties, the running sum in units
of ``u`` is a plain **integer prefix sum** of ``q_i = rn(t_i / u)``, which is associative and can be scanned in
parallel; whether every step really stays in the binade is itself checkable exactly on integers:
``2^52 <= S_(i-1) + floor(t_i / u) <= 2^53 - 1`` with ``S`` the running sum in units of ``u``.

* :func:`_advance` takes a block of terms from the current exact sum: it quantises, scans, finds the first term
  that leaves the binade (or is a tie, NaN, Inf, or the sum is 0 / tiny), takes every term before it in one step,
  and that term with one ordinary double addition. The number of such events is about the number of binades the
  sum crosses (~30 for a video frame) plus ties, which are rare. A NaN or infinite sum, and runs of zeros from a
  zero sum, are taken a whole block at a time.
* Phase 1 (:func:`_seqsum_summary_kernel`, parallel over chunks of every row) guesses each chunk's binade from a
  plain (approximate) prefix of chunk sums and records, for that binade, the chunk's integer total and the
  range of start values for which it is valid.
* Phase 2 (:func:`_seqsum_scan_vec_kernel`, one program per row) walks the chunks in order: from the exact
  running sum it checks the next ``_CB`` chunk summaries at once (their starts are an integer prefix sum), takes
  the leading run of valid chunks in one addition, and re-runs the first invalid chunk with :func:`_advance`.
  (:func:`_seqsum_scan_kernel` is the one-summary-per-step form, and without summaries the walk-only form.)
  Every shortcut is checked exactly, so the guesses only decide speed, never the result.

The result equals :func:`fusedsim.families.vmaf.sequential_sum_twin.sequential_sum_ref` bit for bit (tests compare with
``==`` on adversarial inputs: ties, sign changes, zeros, NaN/Inf, powers of two).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.vmaf.ops import sequential_sum

__all__ = ["sequential_sum_fwd"]

# Integer bounds used in the kernels (written out there as literals): 2**52, 2**53 - 1, and 2**62 as "no bound".


@triton.jit
def _biased_exponent(x):
    return (x.to(tl.int64, bitcast=True) >> 52) & 0x7FF


@triton.jit
def _pow2(biased):
    """2**(biased - 1023) as a double, for 1 <= biased <= 2046."""
    return (biased.to(tl.int64) << 52).to(tl.float64, bitcast=True)


@triton.jit
def _quantise(t, sg, inv_u):
    """``t * sg / u`` split as ``(qi, frac, q, special)``: floor, fraction, rounded, and not-usable lanes."""
    y = t * sg * inv_u
    finite = tl.abs(y) < 9007199254740992.0  # 2**53; NaN and Inf fail too
    yc = tl.where(finite, y, 0.0)
    qf = tl.floor(yc)
    frac = yc - qf  # exact
    qi = qf.to(tl.int64)
    q = qi + (frac > 0.5).to(tl.int64)
    special = (~finite) | (frac == 0.5)
    return qi, q, special


@triton.jit
def _advance(row_ptr, pos, end, s, B: tl.constexpr):
    """Add ``x[pos:]`` to the exact running sum ``s`` up to and including the first event in this block.

    Returns the new sum and position. Equal, bit for bit, to adding the same terms one by one in double.
    """
    lane = tl.arange(0, B)
    offs = pos + lane
    mask = offs < end
    t = tl.load(row_ptr + offs, mask=mask, other=0.0)
    nvalid = tl.minimum(end - pos, B)

    eb = _biased_exponent(s)
    fast = (eb >= 54) & (eb <= 2046)  # s is a normal number, not 0 / tiny, not Inf / NaN
    ebc = tl.where(fast, eb, 1023)
    sg = tl.where(s < 0, -1.0, 1.0).to(tl.float64)
    u = _pow2(ebc - 52)
    inv_u = _pow2(2098 - ebc)
    s0 = (s * sg * inv_u).to(tl.int64)  # |s| / u: an integer in [2**52, 2**53)

    qi, q, special = _quantise(t, sg, inv_u)
    incl = tl.cumsum(q, 0)
    excl = incl - q
    pos_units = s0 + excl + qi  # floor of the exact |s_(i-1) + t_i| / u
    ok = (~special) & (pos_units >= 4503599627370496) & (pos_units <= 9007199254740991)
    first_bad = tl.min(tl.where(mask & (~ok), lane, B), 0)
    # from a zero sum, zeros add nothing and the first non-zero term becomes the sum (0.0 + t == t)
    first_nonzero = tl.min(tl.where(mask & (t != 0.0), lane, B), 0)
    j = tl.where(fast, first_bad, tl.where(s == 0.0, first_nonzero, 0))

    all_ok = j >= nvalid
    total = s0 + tl.sum(q, 0)
    s_all = tl.where(fast, sg * total.to(tl.float64) * u, s)
    s_before = tl.where(fast, sg * (s0 + tl.sum(tl.where(lane == j, excl, 0), 0)).to(tl.float64) * u, s)
    t_j = tl.sum(tl.where(lane == j, t, 0.0), 0)
    s_event = s_before + t_j
    new_s = tl.where(all_ok, s_all, s_event)
    new_pos = tl.where(all_ok, pos + nvalid, pos + j + 1)

    # A NaN sum stays NaN; an infinite one stays as it is unless a NaN or the opposite infinity comes: take the
    # whole block at once in both cases.
    nonfinite = eb == 2047
    kills = mask & ((t != t) | (t == -s))
    killed = tl.max(kills.to(tl.int32), 0) > 0
    new_s = tl.where(nonfinite, tl.where(killed, s - s, s), new_s)
    new_pos = tl.where(nonfinite, pos + nvalid, new_pos)
    return new_s, new_pos


@triton.jit
def _walk(row_ptr, start, end, s, B: tl.constexpr):
    """Exact running sum over ``x[start:end]`` from ``s`` by :func:`_advance` steps."""
    pos = start
    while pos < end:
        s, pos = _advance(row_ptr, pos, end, s, B)
    return s


@triton.jit
def _seqsum_summary_kernel(x_ptr, stride_x, n, approx_ptr, total_ptr, lo_ptr, hi_ptr, code_ptr, CH, NCHUNK,
                           B: tl.constexpr):
    """Per chunk: for the binade guessed from ``approx`` (its start), the integer total and valid start range."""
    c = tl.program_id(0)
    f = tl.program_id(1).to(tl.int64)
    row_ptr = x_ptr + f * stride_x
    a = tl.load(approx_ptr + f * NCHUNK + c)
    eb = _biased_exponent(a)
    fast = (eb >= 54) & (eb <= 2046)
    ebc = tl.where(fast, eb, 1023)
    neg = a < 0
    sg = tl.where(neg, -1.0, 1.0).to(tl.float64)
    inv_u = _pow2(2098 - ebc)
    start = c.to(tl.int64) * CH
    end = tl.minimum(start + CH, n)
    lane = tl.arange(0, B)

    carry = tl.full([], 0, tl.int64)
    lo = tl.full([], 4611686018427387904, tl.int64)
    hi = tl.full([], -4611686018427387904, tl.int64)
    bad = tl.full([], 0, tl.int32)
    for off in range(0, CH, B):
        offs = start + off + lane
        mask = offs < end
        t = tl.load(row_ptr + offs, mask=mask, other=0.0)
        qi, q, special = _quantise(t, sg, inv_u)
        incl = tl.cumsum(q, 0) + carry
        pos_units = incl - q + qi
        lo = tl.minimum(lo, tl.min(tl.where(mask, pos_units, 4611686018427387904), 0))
        hi = tl.maximum(hi, tl.max(tl.where(mask, pos_units, -4611686018427387904), 0))
        bad = tl.maximum(bad, tl.max((mask & special).to(tl.int32), 0))
        carry = carry + tl.sum(q, 0)
    code = tl.where(fast & (bad == 0), tl.where(neg, -ebc, ebc), 0)
    out = f * NCHUNK + c
    tl.store(total_ptr + out, carry)
    tl.store(lo_ptr + out, lo)
    tl.store(hi_ptr + out, hi)
    tl.store(code_ptr + out, code)


@triton.jit
def _seqsum_scan_kernel(x_ptr, stride_x, n, out_ptr, total_ptr, lo_ptr, hi_ptr, code_ptr, CH, NCHUNK,
                        USE_SUMMARY: tl.constexpr, B: tl.constexpr):
    """One program per row: walk the chunks in order, taking checked shortcuts, else exact block steps."""
    f = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + f * stride_x
    s = tl.full([], 0.0, tl.float64)
    for c in range(0, NCHUNK):
        start = c * CH
        end = tl.minimum(start + CH, n)
        if USE_SUMMARY:
            idx = f * NCHUNK + c
            code = tl.load(code_ptr + idx)
            eb = _biased_exponent(s)
            s_code = tl.where(s < 0, -eb, eb)
            ebc = tl.where(code != 0, tl.abs(code), 1023)
            sg = tl.where(s < 0, -1.0, 1.0).to(tl.float64)
            inv_u = _pow2(2098 - ebc)
            u = _pow2(ebc - 52)
            s0 = (s * sg * inv_u).to(tl.int64)
            lo = tl.load(lo_ptr + idx)
            hi = tl.load(hi_ptr + idx)
            total = tl.load(total_ptr + idx)
            take = (code != 0) & (code == s_code) & (lo >= 4503599627370496 - s0) & (hi <= 9007199254740991 - s0)
            if take.to(tl.int32) != 0:
                s = sg * (s0 + total).to(tl.float64) * u
            else:
                s = _walk(row_ptr, start, end, s, B)
        else:
            s = _walk(row_ptr, start, end, s, B)
    tl.store(out_ptr + f, s + 0.0)


@triton.jit
def _seqsum_scan_vec_kernel(x_ptr, stride_x, n, out_ptr, total_ptr, lo_ptr, hi_ptr, code_ptr, CH, NCHUNK,
                            B: tl.constexpr, CB: tl.constexpr):
    """Phase 2, ``CB`` chunk summaries at a time: one program per row.

    From the exact running sum ``s`` (binade ``u``), the start of every following chunk in units of ``u`` is
    ``|s| / u`` plus an integer prefix of the chunks' totals, so all of their validity checks run at once; the
    leading run of valid chunks is taken in one addition, the first invalid chunk is walked exactly, and the scan
    resumes after it. Steps: about (chunks that cross a binade or were guessed wrong) + NCHUNK / CB.
    """
    f = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + f * stride_x
    lane = tl.arange(0, CB)
    s = tl.full([], 0.0, tl.float64)
    c = tl.full([], 0, tl.int32)
    while c < NCHUNK:
        idx = c + lane
        m = idx < NCHUNK
        base = f * NCHUNK + idx
        code = tl.load(code_ptr + base, mask=m, other=0)
        lo = tl.load(lo_ptr + base, mask=m, other=0)
        hi = tl.load(hi_ptr + base, mask=m, other=0)
        total = tl.load(total_ptr + base, mask=m, other=0)
        eb = _biased_exponent(s)
        fast = (eb >= 54) & (eb <= 2046)
        ebc = tl.where(fast, eb, 1023)
        s_code = tl.where(fast, tl.where(s < 0, -eb, eb), 0)
        sg = tl.where(s < 0, -1.0, 1.0).to(tl.float64)
        u = _pow2(ebc - 52)
        inv_u = _pow2(2098 - ebc)
        s0 = (s * sg * inv_u).to(tl.int64)
        incl = tl.cumsum(total, 0)
        start_units = s0 + incl - total  # exact start of each chunk if all before it are taken
        ok = (code != 0) & (code == s_code) & (lo >= 4503599627370496 - start_units) & \
            (hi <= 9007199254740991 - start_units)
        nval = tl.minimum(NCHUNK - c, CB)
        k = tl.min(tl.where(m & (~ok), lane, CB), 0)  # chunks taken now
        k = tl.minimum(k, nval)
        taken = tl.sum(tl.where(lane < k, total, 0), 0)
        s = tl.where(k > 0, sg * (s0 + taken).to(tl.float64) * u, s)
        c = c + k
        if k < nval:  # chunk c cannot be taken from this sum: walk it term by term (exactly)
            start = c * CH
            end = tl.minimum(start + CH, n)
            s = _walk(row_ptr, start, end, s, B)
            c = c + 1
    tl.store(out_ptr + f, s + 0.0)


def _launch_params(length: int) -> tuple[int, int]:
    """(chunk, block) sizes: short chunks make the exact walks of binade-crossing chunks short, and phase 2
    checks ``_CB`` chunk summaries per step. Under the interpreter (one numpy call per block operation) larger
    blocks cost the same per call.
    """
    if triton_interpreting():
        block = 4096
        return (8 * block if length >= 64 * block else block), block
    block = 512
    return (4 * block if length >= 64 * block else block), block


_CB = 256  # chunk summaries per phase-2 step


def _chunk_sums(x: torch.Tensor, ch: int, nchunk: int) -> torch.Tensor:
    """Plain (any-order) float64 sums of the chunks of every row: only a guide for phase 1's binade guesses."""
    n_rows, length = x.shape
    full = length // ch
    parts = []
    if full:
        parts.append(x[:, : full * ch].reshape(n_rows, full, ch).sum(dim=2))  # a view: no copy of x
    if full < nchunk:
        parts.append(x[:, full * ch :].sum(dim=1, keepdim=True))
    return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]


@sequential_sum.triton_launcher
@on_tensors_device
def sequential_sum_fwd(x: torch.Tensor, *, use_summary: bool = True, vector_scan: bool = True,
                       chunk: int | None = None, block: int | None = None) -> torch.Tensor:
    """Left-to-right double sum of each row of ``x`` ``(N, L)`` float64 (CUDA, or CPU under the interpreter).

    Bit-identical to ``s = 0.0; for v in row: s += v``. ``use_summary=False`` runs phase 2 alone (every chunk by
    exact block steps, no phase 1); ``vector_scan=False`` checks one chunk summary per step instead of ``_CB``.
    All variants give the same bits; they differ in speed.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be (N, L); got shape {tuple(x.shape)}")
    if x.dtype != torch.float64:
        raise TypeError(f"x must be float64; got {x.dtype}")
    n_rows, length = x.shape
    out = torch.empty(n_rows, dtype=torch.float64, device=x.device)
    if n_rows == 0:
        return out
    if length == 0:
        return out.zero_()
    if x.stride(1) != 1:
        x = x.contiguous()
    ch, blk = _launch_params(length)
    ch = chunk or ch
    blk = block or blk
    if ch % blk:
        raise ValueError(f"chunk ({ch}) must be a multiple of block ({blk})")
    nchunk = triton.cdiv(length, ch)
    i64 = dict(dtype=torch.int64, device=x.device)
    opts = dict(num_warps=4, enable_fp_fusion=False)
    if not use_summary or nchunk == 1:
        dummy = torch.empty(1, **i64)
        _seqsum_scan_kernel[(n_rows,)](x, x.stride(0), length, out, dummy, dummy, dummy, dummy, ch, nchunk,
                                       USE_SUMMARY=False, B=blk, **opts)
        return out
    chunk_sums = _chunk_sums(x, ch, nchunk)
    approx = (torch.cumsum(chunk_sums, dim=1) - chunk_sums).contiguous()
    total = torch.empty(n_rows, nchunk, **i64)
    lo = torch.empty(n_rows, nchunk, **i64)
    hi = torch.empty(n_rows, nchunk, **i64)
    code = torch.empty(n_rows, nchunk, **i64)
    _seqsum_summary_kernel[(nchunk, n_rows)](x, x.stride(0), length, approx, total, lo, hi, code, ch, nchunk,
                                             B=blk, **opts)
    if vector_scan:
        _seqsum_scan_vec_kernel[(n_rows,)](x, x.stride(0), length, out, total, lo, hi, code, ch, nchunk,
                                           B=blk, CB=_CB, **opts)
    else:
        _seqsum_scan_kernel[(n_rows,)](x, x.stride(0), length, out, total, lo, hi, code, ch, nchunk,
                                       USE_SUMMARY=True, B=blk, **opts)
    return out

