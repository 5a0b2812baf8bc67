"""Where a fresh machine's cold start goes: the compile time of every Triton kernel a metric launches on its first
pairs, on a GPU, with an empty Triton cache.

For each metric, one process with an empty ``TRITON_CACHE_DIR`` runs ``fusedsim warmup``'s synthetic pairs
(:func:`fusedsim.engine.warmup.warm_metric`: one pair, a group against one reference, a group of own references)
at ``--size``, with Triton's JIT hooks (``triton.knobs.runtime.jit_cache_hook`` before a compilation,
``jit_post_compile_hook`` after it) timing every compilation: kernel, specialisation, seconds. A metric's kernels
compile one after the other in the thread that launches them, so their sum is that metric's compile share of a
cold start; the rest of the process (imports, CUDA context, the pairs themselves) is reported beside it.

Run on a GPU machine: ``PYTHONPATH=src python benchmarks/compile_times.py [--metric
butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim] [--size 1024] [--top 20]``; JSON to ``benchmarks/results/`` (and
``$OUT``). Triton before 3.4 has no ``knobs`` hooks: the script says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, write_json  # noqa: E402

PERCEPTUAL = "butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim"

_TIMED = r"""
import json, sys, time
import triton
knobs = getattr(triton, "knobs", None)
if knobs is None or not hasattr(knobs.runtime, "jit_post_compile_hook"):
    raise SystemExit(f"Triton {triton.__version__} has no JIT compile hooks (triton.knobs, Triton >= 3.4)")
started, rows = {}, []


def before(*, key, repr, fn, **kwargs):
    started[str(key)] = time.perf_counter()
    return False  # a true value would skip the compilation


def after(*, key, repr, fn, **kwargs):
    start = started.pop(str(key), None)
    rows.append({"kernel": f"{fn.module}.{fn.name}", "repr": repr[:400],
                 "seconds": None if start is None else time.perf_counter() - start})
    return False


knobs.runtime.jit_cache_hook = before
knobs.runtime.jit_post_compile_hook = after
t0 = time.perf_counter()
from fusedsim.engine.warmup import warm_metric
result = warm_metric(sys.argv[1], device="cuda", height=int(sys.argv[2]), width=int(sys.argv[2]))
print(json.dumps({"rows": rows, "error": result.error, "warm_s": result.seconds,
                  "process_s": time.perf_counter() - t0}))
"""


def timed_metric(metric: str, size: int) -> dict:
    """One metric's first pairs in a fresh process with an empty Triton cache: every compilation timed."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with tempfile.TemporaryDirectory(prefix="triton-cold-") as cache:
        env["TRITON_CACHE_DIR"] = cache
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _TIMED, metric, str(size)], env=env, capture_output=True,
                              text=True, timeout=1800)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{metric}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'failed'}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"wall_s": wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metric", default=PERCEPTUAL)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU: Triton compiles a kernel on its first launch on a GPU")
    metrics, rows = [m.strip() for m in args.metric.split(",") if m.strip()], []
    for metric in metrics:
        result = timed_metric(metric, args.size)
        compiled = sum(r["seconds"] or 0.0 for r in result["rows"])
        print(f"{metric:<12} {len(result['rows']):3d} compilations {compiled:6.1f} s; first pairs "
              f"{result['warm_s']:6.1f} s; process {result['wall_s']:6.1f} s"
              + (f"; error: {result['error']}" if result["error"] else ""), flush=True)
        rows += [{"metric": metric, **r} for r in result["rows"]]
        rows.append({"metric": metric, "total_compile_s": compiled, "warm_s": result["warm_s"],
                     "process_s": result["wall_s"]})
    timed = sorted((r for r in rows if r.get("seconds")), key=lambda r: -r["seconds"])
    print("\nlongest compilations:")
    for r in timed[:args.top]:
        print(f"  {r['seconds']:6.1f} s  {r['metric']:<12} {r['kernel']}")
    path = write_json("compile-times", {"meta": metadata("cuda"), "size": args.size, "rows": rows},
                      os.environ.get("OUT"), Path(__file__).resolve().parent / "results")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
