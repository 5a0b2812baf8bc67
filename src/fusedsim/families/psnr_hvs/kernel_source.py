"""The source of the PSNR-HVS block kernel, rendered as straight-line code: one lane per 8x8 block, the block's
64 samples and coefficients as 64 register variables, so that every float32 sum runs in libvmaf's order (a
Python list of tensors cannot live in a Triton function). Triton-free: it only writes text."""

from __future__ import annotations

from fusedsim.core.codegen import indent

__all__ = ["render_block_kernel"]

# Daala's od_bin_fdct8 as lifting steps on t0..t7 (input permutation first; see twin.fdct8)
_FDCT8 = """t1 = t0 - t1
t1h = (t1 + (t1 < 0).to(tl.int32)) >> 1
t0 = t0 - t1h
t4 = t4 + t5
t4h = (t4 + (t4 < 0).to(tl.int32)) >> 1
t5 = t5 - t4h
t3 = t2 - t3
t2 = t2 - ((t3 + (t3 < 0).to(tl.int32)) >> 1)
t6 = t6 + t7
t6h = (t6 + (t6 < 0).to(tl.int32)) >> 1
t7 = t6h - t7
t0 = t0 + t6h
t6 = t0 - t6
t2 = t4h - t2
t4 = t2 - t4
t0 = t0 - ((t4 * 13573 + 16384) >> 15)
t4 = t4 + ((t0 * 11585 + 8192) >> 14)
t0 = t0 - ((t4 * 13573 + 16384) >> 15)
t6 = t6 - ((t2 * 21895 + 16384) >> 15)
t2 = t2 + ((t6 * 15137 + 8192) >> 14)
t6 = t6 - ((t2 * 21895 + 16384) >> 15)
t3 = t3 + ((t5 * 19195 + 16384) >> 15)
t5 = t5 + ((t3 * 11585 + 8192) >> 14)
t3 = t3 - ((t5 * 7489 + 4096) >> 13)
t7 = ((t5 + (t5 < 0).to(tl.int32)) >> 1) - t7
t5 = t5 - t7
t3 = t1h - t3
t1 = t1 - t3
t7 = t7 + ((t1 * 3227 + 16384) >> 15)
t1 = t1 - ((t7 * 6393 + 16384) >> 15)
t7 = t7 + ((t1 * 3227 + 16384) >> 15)
t5 = t5 + ((t3 * 2485 + 4096) >> 13)
t3 = t3 - ((t5 * 18205 + 16384) >> 15)
t5 = t5 + ((t3 * 2485 + 4096) >> 13)""".splitlines()
_ORDER = (0, 4, 2, 6, 7, 3, 5, 1)  # t variable read from input k


def _fdct8(inputs: list[str], outputs: list[str]) -> list[str]:
    lines = [f"t{_ORDER[k]} = {inputs[k]}" for k in range(8)]
    lines += _FDCT8
    lines += [f"{outputs[k]} = t{k}" for k in range(8)]
    return lines


def _quadrant(k: int) -> int:
    i, j = divmod(k, 8)
    return (i >= 4) + 2 * (j >= 4)


def _image(p: str, ptr: str) -> list[str]:
    """Loads, statistics, DCT and masking strength of one image's blocks (variables and strides prefixed ``p``)."""
    s1, s2 = f"{p}s1", f"{p}s2"
    out = [f"{p}base = {ptr} + f * {p}s0 + y0 * {s1} + x0 * {s2}"]
    for k in range(64):
        i, j = divmod(k, 8)
        out.append(f"{p}{k} = tl.load({p}base + {i} * {s1} + {j} * {s2}, mask=live, other=0).to(tl.int32)")
        out += ["if MASK16:", f"    {p}{k} = {p}{k} & 0xFFFF"]
    out.append(f"{p}gsum = " + " + ".join(f"{p}{k}" for k in range(64)))  # integer: exact in any order
    out.append(f"{p}gmean = tl.div_rn({p}gsum.to(tl.float32), 64.0)")
    for q in range(4):
        members = " + ".join(f"{p}{k}" for k in range(64) if _quadrant(k) == q)
        out.append(f"{p}mean{q} = tl.div_rn(({members}).to(tl.float32), 16.0)")
    out.append(f"{p}gvar = tl.zeros([BLK], tl.float32)")
    out += [f"{p}var{q} = tl.zeros([BLK], tl.float32)" for q in range(4)]
    for k in range(64):
        q = _quadrant(k)
        out.append(f"{p}f = {p}{k}.to(tl.float32)")
        out.append(f"{p}dg = {p}f - {p}gmean")
        out.append(f"{p}gvar = {p}gvar + {p}dg * {p}dg")
        out.append(f"{p}dq = {p}f - {p}mean{q}")
        out.append(f"{p}var{q} = {p}var{q} + {p}dq * {p}dq")
    out.append(f"{p}gvar = {p}gvar * var64")
    out += [f"{p}var{q} = {p}var{q} * var16" for q in range(4)]
    out.append(f"{p}pos = {p}gvar > 0")
    out.append(f"{p}gvar = tl.where({p}pos, tl.div_rn((({p}var0 + {p}var1) + {p}var2) + {p}var3, "
               f"tl.where({p}pos, {p}gvar, 1.0)), {p}gvar)")
    for col in range(8):  # z{col}_{u}: vertical frequency u of column col
        out += _fdct8([f"{p}{8 * i + col}" for i in range(8)], [f"{p}z{col}_{u}" for u in range(8)])
    for u in range(8):  # {p}c{8u + v}: horizontal frequency v of vertical frequency u
        out += _fdct8([f"{p}z{col}_{u}" for col in range(8)], [f"{p}c{8 * u + v}" for v in range(8)])
    out.append(f"{p}energy = tl.zeros([BLK], tl.float32)")
    for k in range(1, 64):
        out.append(f"{p}energy = {p}energy + ({p}c{k} * {p}c{k}).to(tl.float32) * m{k}")
    out.append(f"{p}strength = (tl.sqrt(({p}energy * {p}gvar).to(tl.float64)) * 0.03125).to(tl.float32)")
    return out


def render_block_kernel(name: str) -> str:
    """A kernel ``name(ref, dist, csf, mask, out, ...)``: program ``(i, f)`` writes the 64 error terms of blocks
    ``i*BLK ..`` of frame ``f`` to ``out[f, block*64 + k]`` (float32), libvmaf's ``(err * csf)^2``."""
    body = ["pid = tl.program_id(0)", "f = tl.program_id(1).to(tl.int64)",
            "b = pid * BLK + tl.arange(0, BLK)", "live = b < NB", "bb = tl.where(live, b, 0).to(tl.int64)",
            "y0 = (bb // BX) * 7", "x0 = (bb % BX) * 7"]
    body += [f"c{k} = tl.load(csf_ptr + {k})" for k in range(64)]
    body += [f"m{k} = tl.load(mask_ptr + {k})" for k in range(1, 64)]
    body += _image("r", "ref_ptr") + _image("d", "dist_ptr")
    body.append("strength = tl.where(dstrength > rstrength, dstrength, rstrength)")
    body.append("obase = out_ptr + f * L + bb * 64")
    for k in range(64):
        body.append(f"err = tl.abs(rc{k} - dc{k}).to(tl.float32)")
        if k:
            body.append(f"thr = tl.div_rn(strength, m{k})")
            body.append("err = tl.where(err < thr, 0.0, err - thr)")
        body.append(f"w = err * c{k}")
        body.append(f"tl.store(obase + {k}, w * w, mask=live)")
    signature = (f"def {name}(ref_ptr, dist_ptr, csf_ptr, mask_ptr, out_ptr, rs0, rs1, rs2, ds0, ds1, ds2, NB, BX, L, "
                 "var64, var16, MASK16: tl.constexpr, BLK: tl.constexpr):")
    return "\n".join([signature] + indent(body)) + "\n"
