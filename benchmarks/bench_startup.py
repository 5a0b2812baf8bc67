"""Whole-process timings of start-up: what a user waits for when running the CLI or importing the package.

Each command runs as a fresh process (subprocess, output discarded), the commands interleaved round by round
after one warm-up round so that drift of a shared machine hits all alike; medians of wall time and of CPU time
(user + sys of the child). Also records which heavy modules ``import fusedsim`` and ``fusedsim --help`` load.
Goals (issue 6): ``fusedsim --help`` <= 0.3 s; ``import fusedsim`` <= ``import torch`` + 0.1 s.

Run: PYTHONPATH=src python benchmarks/bench_startup.py [--quick] [--runs N] [--skip NAME,...]
(the CUDA-context row runs only where a GPU is visible; without a ``fusedsim`` script beside the interpreter
the CLI rows run ``python -m fusedsim``, which imports the same modules.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    add_bytecode_option,
    fmt,
    package_dir,
    parse_skip,
    process_env,
    version_of,
    write_json,
)

PY = sys.executable
HEAVY = ("torch", "torch._dynamo", "triton", "numpy", "PIL")
MARK = "MODULES:"
# which heavy modules a fresh process has loaded after the statement (printed on stderr after MARK)
PROBE = ("import sys, json\n{stmt}\n"
         "print('" + MARK + "' + json.dumps({{m: m in sys.modules for m in " + repr(HEAVY) + "}}), file=sys.stderr)")
#: Environment of the timed processes (``--bytecode``, :func:`_harness.process_env`).
ENV = dict(os.environ)
HELP_STMT = ("from fusedsim.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")


def cli() -> list[str]:
    script = Path(PY).parent / "fusedsim"
    return [str(script)] if script.exists() else [PY, "-m", "fusedsim"]


def commands(gpu: bool) -> dict[str, list[str]]:
    out = {
        "import torch": [PY, "-c", "import torch"],
        "import fusedsim": [PY, "-c", "import fusedsim"],
        # imports are lazy: the first attribute access is where a user pays for torch and the kernels' modules
        "import fusedsim; fusedsim.fused_ssim": [PY, "-c", "import fusedsim; fusedsim.fused_ssim"],
        "fusedsim --help": [*cli(), "--help"],
        "fusedsim score --example": [*cli(), "score", "--example"],
    }
    if gpu:
        out["import torch + CUDA context"] = [PY, "-c", "import torch; torch.zeros(1, device='cuda')"]
    return out


def run_once(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall s, child CPU s, return code, stderr tail) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode, proc.stderr[-400:]


def loaded_modules(stmt: str) -> dict | str:
    proc = subprocess.run([PY, "-c", PROBE.format(stmt=stmt)], capture_output=True, text=True)
    for line in proc.stderr.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    return f"probe failed (rc {proc.returncode}): {proc.stderr[-300:]}"


def gpu_visible() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([PY, "-c", probe], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 counted runs instead of 5")
    parser.add_argument("--runs", type=int, default=None, help="counted runs of each command")
    parser.add_argument("--skip", default="", help="comma-separated command labels to skip")
    parser.add_argument("--label", default="", help="tag for the output file, e.g. 'before' for an older src/")
    add_bytecode_option(parser)
    args = parser.parse_args()
    ENV.clear()  # replaced, not updated: process_env drops PYTHONDONTWRITEBYTECODE
    ENV.update(process_env(args.bytecode, Path(tempfile.gettempdir()) / "fusedsim-bench-startup"))
    runs = args.runs or (2 if args.quick else 5)
    skip = parse_skip(args.skip)
    gpu = gpu_visible()
    cmds = {k: v for k, v in commands(gpu).items() if k not in skip}
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "python": sys.version.split()[0], "executable": PY,
            "torch": version_of("torch"), "triton": version_of("triton"), "cpu_count": os.cpu_count(),
            "gpu_visible": gpu, "runs": runs, "warmup_rounds": 1, "cli": cli(),
            "pythonpath": os.environ.get("PYTHONPATH", ""), "fusedsim": package_dir("fusedsim"),
            "bytecode": args.bytecode}
    if gpu:
        name = subprocess.run([PY, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
                              capture_output=True, text=True).stdout.strip()
        meta["gpu"] = name
    print(meta, flush=True)

    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    failures: dict[str, str] = {}
    for round_ in range(runs + 1):  # round 0 warms the page cache and is not counted
        for label, argv in cmds.items():
            wall, cpu, rc, err = run_once(argv)
            if rc != 0:
                failures[label] = f"rc {rc}: {err}"
            if round_ > 0:
                samples[label].append((wall, cpu))
    rows = []
    for label, argv in cmds.items():
        walls = [w for w, _ in samples[label]]
        cpus = [c for _, c in samples[label]]
        rows.append({"command": label, "argv": [Path(a).name if a == PY else a for a in argv],
                     "wall_s_median": statistics.median(walls), "wall_s_min": min(walls),
                     "wall_s_max": max(walls), "cpu_s_median": statistics.median(cpus), "wall_s": walls,
                     **({"failed": failures[label]} if label in failures else {})})
    modules = {"import fusedsim": loaded_modules("import fusedsim"),
               "import fusedsim; fusedsim.fused_ssim": loaded_modules("import fusedsim; fusedsim.fused_ssim"),
               "fusedsim --help": loaded_modules(HELP_STMT)}
    by = {r["command"]: r["wall_s_median"] for r in rows}
    goals = {}
    if "fusedsim --help" in by:
        goals["fusedsim --help <= 0.3 s"] = by["fusedsim --help"] <= 0.3
    for label in ("import fusedsim", "import fusedsim; fusedsim.fused_ssim"):
        if label in by and "import torch" in by:
            goals[f"{label} <= import torch + 0.1 s"] = by[label] <= by["import torch"] + 0.1
    meta["label"] = args.label
    name = f"startup-{args.label}" if args.label else "startup"
    path = write_json(name, {"meta": meta, "rows": rows, "modules_loaded": modules, "goals": goals},
                      os.environ.get("OUT"))

    print(f"\nWhole-process timings, {runs} runs after a warm-up round (seconds):")
    print(f"{'command':38} {'wall median':>11} {'min':>7} {'max':>7} {'cpu median':>10}")
    for r in rows:
        print(f"{r['command']:38} {fmt(r['wall_s_median']):>11} {fmt(r['wall_s_min']):>7} "
              f"{fmt(r['wall_s_max']):>7} {fmt(r['cpu_s_median']):>10}" + (f"  FAILED {r['failed']}"
                                                                             if "failed" in r else ""))
    for label, mods in modules.items():
        print(f"modules loaded by {label}: {mods}")
    for goal, met in goals.items():
        print(f"goal {goal}: {'met' if met else 'NOT met'}")
    print("wrote", path)


if __name__ == "__main__":
    main()
