"""Compile a Triton kernel for a CUDA target without a GPU: read what it lowers to and the loop-carried values of
its loops.

Triton's interpreter runs kernels as Python, so it cannot show what the compiler decides: the instructions a
kernel lowers to, which values a loop carries (found by object identity of the names' values: two states that
start as the same tensor, one later assigned the other's old value, are carried as one). The compile runs in a
subprocess without ``TRITON_INTERPRET``; where this Triton has no CUDA backend or another compiler API the calling
test is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SCRIPT = """
import importlib, json, sys
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
module, name, sig, consts, options, stage = json.loads(sys.argv[1])
consts = {k: getattr(tl, v[3:]) if isinstance(v, str) and v.startswith("tl.") else v for k, v in consts.items()}
fn = eval(name, vars(importlib.import_module(module)))  # an attribute, or a factory call of generated kernels
src = ASTSource(fn=fn, signature=sig, constexprs=consts)
print(triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm[stage])
"""


def compiled_asm(kernel: str, signature: dict, constexprs: dict, stage: str = "ttir", **options) -> str:
    """``"module:kernel"`` (or ``"module:factory(args)"`` for generated kernels) compiled for sm_90: the text of
    one stage (``ttir``, ``ttgir``, ``llir``, ``ptx``); ``"tl.int32"``-style strings in ``constexprs`` name
    Triton dtypes."""
    import json

    module, name = kernel.split(":")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    arg = json.dumps([module, name, signature, constexprs, options, stage])
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, arg], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "CompilationError" in proc.stderr:  # the kernel itself does not compile
        pytest.fail(f"{kernel} does not compile for sm_90: {proc.stderr[-1500:]}")
    if proc.returncode != 0:  # pragma: no cover - no CUDA backend or another compiler API in this Triton
        pytest.skip(f"offline compile for a CUDA target is not available here: {proc.stderr[-300:]}")
    return proc.stdout


def carried_per_loop(kernel: str, signature: dict, constexprs: dict, **options) -> list[int]:
    """The number of loop-carried values of each ``scf.for`` with iteration arguments of ``kernel`` compiled for
    sm_90 (:func:`compiled_asm`), in program order."""
    ttir = compiled_asm(kernel, signature, constexprs, "ttir", **options)
    loops = [line for line in ttir.splitlines() if "scf.for" in line and "iter_args(" in line]
    return [line.split("iter_args(")[1].split(")")[0].count("=") for line in loops]
