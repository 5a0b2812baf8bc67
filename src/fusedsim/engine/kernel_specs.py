"""Recorded kernel specialisations: compile a metric's kernels on every core without running the metric.

Triton compiles a kernel at its first launch, for that launch's specialisation (argument types, constexpr values,
which integer arguments divide by 16). A metric's pipeline launches its kernels one after another, so on a fresh
machine its first pair compiles them in sequence on one core (Butteraugli: 23 kernels, ~17 s on an H200 host);
running metrics in parallel processes cannot split one pipeline. But a specialisation, once seen, can be compiled
from its description alone (Triton's ``JITFunction.preload``), with no launch and no input.

So this module records, on a GPU, every compilation a warm-up phase makes (:func:`recording`: Triton's JIT hooks
give each specialisation's description and compile time), and keeps them in a manifest
(``fusedsim/data/kernel_specs.json``, shipped with the package, written by ``python -m
fusedsim.engine.kernel_specs``); :func:`~fusedsim.engine.warmup.warmup` then compiles the recorded
specialisations of the phases it needs as separate tasks over all its processes, longest first
(:func:`compile_recorded`), and runs a phase itself only when it was not recorded or a recorded kernel failed.

What a manifest entry holds is independent of the GPU and of Triton's build: the target is the machine's own,
and only the launch options are kept (Triton derives the rest from the target). Kernels rendered from generated
source (:mod:`fusedsim.core.codegen`) carry their source and are rebuilt from it. A recording made for other
kernels (a kernel's parameters changed, a generated source changed) costs only the compilation of a kernel that
nothing launches: the phase's own launches compile what they lack, so values never depend on the manifest.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import linecache
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "LAUNCH_OPTIONS", "RecordedKernel", "compile_recorded", "load_manifest", "main",
           "recorded_phase", "recording", "resolve_kernel", "run_key", "save_manifest"]

FORMAT = 1  # the manifest layout's version; another version is not read
MANIFEST = "kernel_specs.json"  # in fusedsim/data
SPECS_ENV = "FUSEDSIM_KERNEL_SPECS"  # another manifest's path, or "none"
GENERATED_MODULE = "fusedsim.generated."  # the module prefix of kernels built by core.codegen.jit_from_source

#: the options a launch sets (fusedsim's launchers pass these); every other compile option is the target's default,
#: derived again on the compiling machine
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


@dataclass(frozen=True)
class RecordedKernel:
    """One specialisation to compile: its kernel (``module``/``qualname``, or ``source`` for generated kernels),
    the kernel's parameter names when recorded, Triton's description of the specialisation (JSON, without the
    target; options reduced to :data:`LAUNCH_OPTIONS`), and its compile seconds on the recording machine."""

    module: str
    qualname: str
    arg_names: tuple[str, ...]
    spec: str
    seconds: float = 0.0
    source: str = ""
    do_not_specialize: tuple[str, ...] = ()


def _kernel_entry(jit_function: Any) -> dict[str, Any]:
    """A kernel's identity in a manifest: importable module and name, or its generated source."""
    fn = jit_function.fn
    entry: dict[str, Any] = {"module": fn.__module__, "qualname": fn.__qualname__,
                             "arg_names": list(jit_function.arg_names)}
    if fn.__module__.startswith(GENERATED_MODULE):
        entry["source"] = "".join(linecache.getlines(fn.__code__.co_filename))
        names = jit_function.arg_names
        entry["do_not_specialize"] = [p if isinstance(p, str) else names[p] for p in jit_function.do_not_specialize]
    return entry


def _reduced_spec(specialization_data: str) -> dict[str, Any]:
    """Triton's description of a specialisation without its target, with only the launch options."""
    spec = json.loads(specialization_data)
    spec.pop("target", None)
    spec["options"] = {k: v for k, v in spec.get("options", {}).items() if k in LAUNCH_OPTIONS}
    return spec


@contextmanager
def recording() -> Iterator[list[tuple[dict[str, Any], dict[str, Any], float]]]:
    """Record every kernel compilation in this process while the block runs: a list of ``(kernel entry, reduced
    specialisation, seconds)``, in compilation order (disk-cache hits included, with their short seconds).
    Needs Triton's JIT hooks (``triton.knobs``, Triton >= 3.4); hooks installed before are called as well."""
    import triton

    knobs = getattr(triton, "knobs", None)
    if knobs is None or not hasattr(knobs.runtime, "jit_post_compile_hook"):
        raise RuntimeError(f"recording kernel specialisations needs Triton >= 3.4 (JIT hooks); this is "
                           f"{triton.__version__}")
    runtime = knobs.runtime
    before_prev, after_prev = runtime.jit_cache_hook, runtime.jit_post_compile_hook
    started: dict[str, float] = {}
    rows: list[tuple[dict[str, Any], dict[str, Any], float]] = []

    def before(**kwargs: Any) -> bool:
        started[str(kwargs["key"])] = time.perf_counter()
        return bool(before_prev(**kwargs)) if before_prev else False

    def after(**kwargs: Any) -> bool:
        seconds = time.perf_counter() - started.pop(str(kwargs["key"]), time.perf_counter())
        data = (kwargs.get("compile") or {}).get("specialization_data")
        if data is None:
            raise RuntimeError(f"Triton {triton.__version__} reports no specialization_data to its compile hook")
        rows.append((_kernel_entry(kwargs["fn"].jit_function), _reduced_spec(data), seconds))
        return bool(after_prev(**kwargs)) if after_prev else False

    runtime.jit_cache_hook, runtime.jit_post_compile_hook = before, after
    try:
        yield rows
    finally:
        runtime.jit_cache_hook, runtime.jit_post_compile_hook = before_prev, after_prev


def _kernel_id(entry: dict[str, Any]) -> str:
    key = f"{entry['module']}:{entry['qualname']}"
    if "source" in entry:  # one generated name may be rendered from several sources
        key += ":" + hashlib.sha256(entry["source"].encode()).hexdigest()[:16]
    return key


def run_key(metric: str, phase: str, height: int, width: int) -> str:
    """A recorded run's key in a manifest (metrics with their default parameters only)."""
    return f"{metric}/{phase}/{width}x{height}"


def save_manifest(path: Path, runs: dict[str, list[tuple[dict[str, Any], dict[str, Any], float]]],
                  about: dict[str, Any]) -> None:
    """Write ``runs`` (a :func:`run_key` -> what :func:`recording` gave) to ``path``: each kernel and each distinct
    specialisation once, each run a list of specialisation numbers."""
    kernels: dict[str, dict[str, Any]] = {}
    specs: list[dict[str, Any]] = []
    numbers: dict[str, int] = {}
    out_runs: dict[str, list[int]] = {}
    for name, rows in sorted(runs.items()):
        mine: list[int] = []
        for entry, spec, seconds in rows:
            kid = _kernel_id(entry)
            kernels.setdefault(kid, entry)
            text = json.dumps([kid, spec], sort_keys=True)
            if text not in numbers:
                numbers[text] = len(specs)
                specs.append({"kernel": kid, "spec": spec, "seconds": round(seconds, 3)})
            else:  # the slowest compile seen (a disk-cache hit in a later run is not its compile time)
                known = specs[numbers[text]]
                known["seconds"] = max(known["seconds"], round(seconds, 3))
            if numbers[text] not in mine:
                mine.append(numbers[text])
        out_runs[name] = mine
    manifest = {"format": FORMAT, **about, "kernels": kernels, "specs": specs, "runs": out_runs}
    # key order kept: a signature's keys are in the kernel's parameter order
    path.write_text(json.dumps(manifest, indent=0) + "\n", encoding="utf-8")


def load_manifest(path: Path | None = None) -> dict[str, Any] | None:
    """The manifest at ``path``, or None when its format is another one (another version's recording is not
    used). Default: the file named by ``FUSEDSIM_KERNEL_SPECS`` (``none``: no manifest), else the one shipped in the
    package (None when the package has none). Raises ValueError naming the file when a given one cannot be read
    or is not a recording."""
    if path is None and os.environ.get(SPECS_ENV):
        path = None if os.environ[SPECS_ENV].lower() == "none" else Path(os.environ[SPECS_ENV])
        if path is None:
            return None
    if path is None:
        try:
            text = resources.files("fusedsim").joinpath("data", MANIFEST).read_text(encoding="utf-8")
        except OSError:
            return None
        manifest = json.loads(text)
    else:
        source = f"{path}" + (f" (named by {SPECS_ENV})" if os.environ.get(SPECS_ENV) == str(path) else "")
        try:
            manifest = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"kernel specialisations {source}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"kernel specialisations {source}: not a recording ({exc})") from None
        if not isinstance(manifest, dict):
            raise ValueError(f"kernel specialisations {source}: not a recording")
    return manifest if manifest.get("format") == FORMAT else None


def recorded_phase(manifest: dict[str, Any] | None, metric: str, phase: str, height: int, width: int,
                   params: dict[str, Any] | None = None) -> list[RecordedKernel] | None:
    """The specialisations recorded for ``metric``'s warm-up ``phase`` at ``height`` x ``width``, or None when that
    run was not recorded (another size, non-default ``params``, no manifest)."""
    if manifest is None or params:
        return None
    numbers = manifest["runs"].get(run_key(metric, phase, height, width))
    if numbers is None:
        return None
    out = []
    for n in numbers:
        spec = manifest["specs"][n]
        kernel = manifest["kernels"][spec["kernel"]]
        out.append(RecordedKernel(kernel["module"], kernel["qualname"], tuple(kernel["arg_names"]),
                                  json.dumps(spec["spec"]), float(spec["seconds"]), kernel.get("source", ""),
                                  tuple(kernel.get("do_not_specialize", ()))))
    return out


_RESOLVED: dict[tuple[str, str, str], Any] = {}  # a worker process's kernels, resolved once


def resolve_kernel(kernel: RecordedKernel) -> Any:
    """The JITFunction ``kernel`` names: imported from its module, or rebuilt from its generated source."""
    key = (kernel.module, kernel.qualname, kernel.source)
    fn = _RESOLVED.get(key)
    if fn is None:
        if kernel.source:
            from fusedsim.core.codegen import jit_from_source

            fn = jit_from_source(kernel.module[len(GENERATED_MODULE):], kernel.source, kernel.do_not_specialize)
        else:
            fn = importlib.import_module(kernel.module)
            for part in kernel.qualname.split("."):
                fn = getattr(fn, part)
        _RESOLVED[key] = fn
    return fn


def compile_recorded(kernel: RecordedKernel) -> tuple[float, str]:
    """Compile one recorded specialisation, and build its launcher, into Triton's on-disk cache for this machine's
    GPU (in a warm-up process): ``(seconds, "")``, or ``(seconds, why not)`` when the kernel no longer exists, its
    parameters changed or Triton refused the description. Never raises: a failure only means the phase compiles it
    as it runs."""
    start = time.perf_counter()
    try:
        import triton

        from fusedsim.core.triton_key import install_triton_key_cache

        install_triton_key_cache()  # Triton's self-hash read from the cache folder, not computed per process
        fn = resolve_kernel(kernel)
        if tuple(fn.arg_names) != kernel.arg_names:
            return time.perf_counter() - start, (f"{kernel.qualname}: its parameters changed since the recording")
        spec = json.loads(kernel.spec)
        # Triton reads the signature in the kernel's parameter order (its C launcher takes the arguments so): a
        # signature with any other key order would build a launcher that no launch uses
        spec["signature"] = {name: spec["signature"][name] for name in fn.arg_names}
        for value in spec.get("constant_vals", ()):  # kernels passed as constexpr arguments must be importable
            if isinstance(value, dict) and "jit_function" in value:
                importlib.import_module(value["jit_function"].split(":")[0])
        spec["target"] = triton.runtime.driver.active.get_current_target().__dict__
        spec["name"] = getattr(fn, "_fn_name", spec.get("name"))
        compiled = fn.preload(json.dumps(spec))
        init = getattr(compiled, "_init_handles", None)
        if init is not None:  # loading it builds the kernel's C launcher, which Triton caches on disk as well
            init()
        return time.perf_counter() - start, ""
    except Exception as exc:  # noqa: BLE001 - reported; the phase then compiles the kernel itself
        return time.perf_counter() - start, f"{kernel.qualname}: {type(exc).__name__}: {exc}"


def _record_phase(metric: str, phase: str, height: int, width: int) -> tuple[list[Any], str]:
    """One warm-up phase in this (fresh) process, its compilations recorded: ``(rows, error)``."""
    from fusedsim.engine.warmup import warm_metric

    with recording() as rows:
        result = warm_metric(metric, "cuda", height, width, phase=phase)
    return rows, result.error


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links too; a path that does not exist yet by its resolved name)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Record the warm-up phases of metrics at sizes on this machine's GPU into a manifest (default: the package's
    own), each phase in a fresh process as the warm-up runs it: ``python -m fusedsim.engine.kernel_specs
    [--metric M,...] [--size WxH ...] [--out FILE]``."""
    import argparse
    import multiprocessing
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    from fusedsim.cli.common import parse_size

    parser = argparse.ArgumentParser(prog="python -m fusedsim.engine.kernel_specs", description=main.__doc__)
    parser.add_argument("--metric", default="butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim,ssim")
    parser.add_argument("--size", action="append", type=parse_size, default=None, metavar="S|WxH",
                        help="repeatable (default 1024x1024)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at once (default: the CPUs)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / MANIFEST)
    parser.add_argument("--archive", nargs="?", const="auto", default=None, metavar="FILE",
                        help="also pack the compiled kernels for this platform (default file: the package's "
                             "data/kernels/triton-<version>-<arch>.tar.xz; see fusedsim.engine.kernel_archive)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    if args.archive not in (None, "auto") and _same_file(Path(args.archive), args.out):
        parser.error(f"--archive {args.archive} is the manifest --out {args.out}: the archive would replace it")
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusedsim-record-")  # compile seconds, not cache hits
    import torch
    import triton

    if not torch.cuda.is_available():
        parser.error("recording needs a CUDA GPU (Triton compiles only for launches on one)")
    from fusedsim.engine.warmup import metric_phases

    work = []
    for width, height in args.size or [(1024, 1024)]:
        work += [(m.strip(), phase, height, width) for m in args.metric.split(",") if m.strip()
                 for phase in metric_phases(m.strip(), "cuda")]
    runs = {}
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                             max_tasks_per_child=1) as pool:  # a fresh process per phase: nothing compiled before
        futures = [(w, pool.submit(_record_phase, *w)) for w in work]
        for (metric, phase, height, width), future in futures:
            rows, error = future.result()
            if error:
                raise SystemExit(f"{metric} {phase} {width}x{height}: {error}")
            runs[run_key(metric, phase, height, width)] = rows
            print(f"{metric:<12} {phase:<6} {width}x{height}: {len(rows):3d} compilations "
                  f"{sum(r[2] for r in rows):6.1f} s", flush=True)
    about = {"triton": triton.__version__, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
             "recorded": time.strftime("%Y-%m-%d")}
    save_manifest(args.out, runs, about)
    print(f"wrote {args.out}")
    if args.archive:
        from fusedsim.engine.kernel_archive import default_archive_path, write_archive

        target = default_archive_path() if args.archive == "auto" else Path(args.archive)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_archive(Path(os.environ["TRITON_CACHE_DIR"]), target, load_manifest(args.out))
        print(f"wrote {target} ({target.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
