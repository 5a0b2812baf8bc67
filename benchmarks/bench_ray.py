"""Scale-out of ``fusedsim batch`` (issue 36): the same work, in the same run, on the local engine, on Ray with one
GPU, with two GPUs, and on a two-node Ray cluster started on this machine (one GPU per node); and the time from a
fresh process to its first result with an empty Triton cache, after ``fusedsim warmup``, and with a warm cache.

Every run is ``fusedsim batch`` as a fresh process, as a user runs it; pairs/s is the tool's own summary (from its
first pair to its last: engine start-up excluded), and the process's wall time is kept too. Runs are interleaved
round by round (``--rounds``): the GPU machines' hosts drift. The decode bound is decoding alone in worker
processes, one per core but one (``bench_batch.decode_seconds``), counted from the first decoded pair (the workers'
start-up, which imports torch in every process, is not decoding); that reader hands pairs over in order, so the
host's capacity is measured too: the same processes decoding chunks of 8 pairs in any order, as Ray's tasks do.
Each run also records the mean busy share of the host's CPUs (``/proc/stat``) and each GPU's mean utilisation
(``nvidia-smi``, every 0.5 s) and its time to the first row: a run short of linear with idle GPUs and busy CPUs
is host-bound, with idle CPUs it waits on something else.

* ``local``: the local engine, ``CUDA_VISIBLE_DEVICES`` = the first GPU.
* ``ray1`` / ``ray2`` / ``rayN``: ``--engine ray``, the driver starts Ray with the first GPU / the first two /
  the first N (any N; runs asking for more GPUs than the machine has are skipped with a line saying so).
  ``--seconds-per-gpu S`` sizes each run's pair count so that each of its GPUs scores for about S seconds (from
  the marginal rate of two local-engine probes; N GPUs get N times the pairs of one), as the 4- and 8-GPU
  measurement asks (S = 60); ``--pairs-per-gpu N`` sets that count directly.
* ``nodes2``: ``ray start --head`` with GPU 0 and half the CPUs, a second ``ray start --address`` with GPU 1 and
  the other half (separate raylets and object stores, as two machines), then ``--engine ray --address`` (the
  driver ships its fusedsim to the nodes). Compare with ``ray2``: the same GPUs and CPUs on one node.
* ``cold``: local engine, empty ``TRITON_CACHE_DIR``: seconds to the first row of the output, with the package's
  compiled kernels where they fit the machine (``cold-compiling``: without them, ``FUSEDSIM_KERNEL_ARCHIVE=none``,
  so the recorded specialisations are compiled; ``cold-unrecorded``: without either); ``warmup``: an
  empty cache filled by ``fusedsim warmup`` (its seconds), then the batch's first row; ``warm``: the same cache
  again.

Without a GPU (``--device cpu``, a smoke run: numbers meaningless) ``rayN`` are N CPU actors
and ``nodes2`` two one-CPU nodes.

Run: ``PYTHONPATH=src python benchmarks/bench_ray.py [--pairs 1200] [--size 1024] [--layout 1]
[--metric butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim] [--runs local,ray1,ray2,nodes2,cold,warmup,warm]
[--rounds 1] [--seconds-per-gpu S] [--pool 2000] [--dir /tmp/fusedsim-batch]``; on 4 and 8 GPUs: ``--runs
local,ray1,ray2,ray4,ray8,cold --seconds-per-gpu 60``. Images: ``--pool`` pairs are written and the table cycles
through them (each row still decodes its two files), so long runs need no more disk. Also ``benchmarks/bench_batch.py --engine ray`` (same options).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, smoke_dir, write_json  # noqa: E402
from bench_batch import decode_seconds, table_tasks, write_images, write_table  # noqa: E402

PERCEPTUAL = "butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim"
RUNS = ("local", "ray1", "ray2", "nodes2", "cold", "cold-compiling", "cold-unrecorded", "warmup", "warm")  # and rayN for any N
_RAY_RUN = re.compile(r"^ray([1-9][0-9]*)$")
_RATE = re.compile(r"\(([0-9.]+) pairs/s\)")


def _python() -> list[str]:
    return [sys.executable]


def _ray_cli() -> list[str]:
    # the ray script may be absent (Ray unpacked onto PYTHONPATH): its module runs the same CLI
    return [sys.executable, "-m", "ray.scripts.scripts"]


def batch(table: Path, out: Path, metric: str, env: dict[str, str], extra: list[str],
          first_row: bool = False) -> dict:
    """One ``fusedsim batch`` process: wall seconds, the summary's pairs/s, and (``first_row``) the seconds from
    the process start to the output's first data row."""
    cmd = [*_python(), "-m", "fusedsim", "batch", str(table), "-o", str(out), "--metric", metric, "--overwrite",
           *extra]
    out.unlink(missing_ok=True)  # the first row polled must be this run's
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = None
    if first_row:
        while proc.poll() is None and first is None:
            try:
                if out.read_text().count("\n") >= 2:  # the header and one row
                    first = time.perf_counter() - start
            except OSError:
                pass
            time.sleep(0.02)
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    rates = _RATE.findall(err)
    # the run's own summary (a Ray run says where its time went: decoding CPU-s, scoring threads' idle seconds)
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    summary = [line for line in lines[:-3] if "ready in" in line] + lines[-3:]  # and the warm-up's seconds
    return {"wall_s": wall, "pairs_s": float(rates[-1]) if rates else None,
            "first_row_s": first if first is not None else (wall if first_row else None), "summary": summary}


class Usage:
    """The host's CPU busy share (``/proc/stat``) and each GPU's mean utilisation (``nvidia-smi -lms 500``) while
    the ``with`` block runs; either is left out where the machine has no such source."""

    def __enter__(self) -> "Usage":
        self.cpu0 = _cpu_times()
        try:
            self.smi = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,"
                                         "nounits", "-lms", "500"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)
        except OSError:
            self.smi = None
        return self

    def __exit__(self, *exc) -> None:
        cpu1 = _cpu_times()
        self.cpu_busy = None
        if self.cpu0 and cpu1 and cpu1[1] > self.cpu0[1]:
            self.cpu_busy = (cpu1[0] - self.cpu0[0]) / (cpu1[1] - self.cpu0[1])
        self.gpu_util: dict[str, float] = {}
        if self.smi is not None:
            self.smi.terminate()
            text, _ = self.smi.communicate()
            samples: dict[str, list[float]] = {}
            for line in text.splitlines():
                index, _, util = line.partition(",")
                if util.strip().isdigit():
                    samples.setdefault(index.strip(), []).append(float(util))
            self.gpu_util = {k: round(statistics.fmean(v), 1) for k, v in samples.items()}

    def fields(self) -> dict:
        return {"cpu_busy": self.cpu_busy, "gpu_util": self.gpu_util}


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, or None without ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle and iowait
    return sum(values) - idle, sum(values)


def _decode_only(tasks: list) -> int:
    """Decode (and hash the references of) ``tasks`` as the Ray engine's decoding tasks do; the pixels stay here."""
    from fusedsim.engine.batch_pairs import read_distorted, read_reference

    ref = None
    for task in tasks:
        if task.ref != ref:
            ref = task.ref
            read_reference(task.ref)
        read_distorted(task.dist)
    return len(tasks)


def cores_decode_bound(table: Path, workers: int, chunk: int = 8) -> float:
    """Pairs/s that ``workers`` processes decode, in chunks of ``chunk`` pairs taken in any order (as the Ray
    engine's tasks): the host's decoding capacity, without the local engine's in-order hand-over. The processes
    are started and warmed first."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    tasks = table_tasks(table)
    parts = [tasks[i:i + chunk] for i in range(0, len(tasks), chunk)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_decode_only, [tasks[:1]] * workers))  # imports done in every process
        start = time.perf_counter()
        done = sum(pool.map(_decode_only, parts))
        return done / (time.perf_counter() - start)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_STARTED = "block forever"  # what `ray start --block` prints once its node has joined


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """One node: ``ray start --block`` in its own session (stopping that process stops the node; ``ray stop``
    would stop every Ray instance of the machine)."""
    with open(log, "w") as out:
        node = subprocess.Popen([*_ray_cli(), "start", "--block", *args, "--disable-usage-stats"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + 180
    while _STARTED not in log.read_text():
        if node.poll() is not None or time.monotonic() > end:
            stop_node(node)
            raise RuntimeError(f"ray start {' '.join(args)} failed: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    return node


def stop_node(node: subprocess.Popen) -> None:
    node.send_signal(signal.SIGTERM)
    try:
        node.wait(20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    node.wait()


def start_two_nodes(env: dict[str, str], gpu: bool, cpus: int, logs: Path) -> tuple[str, list[subprocess.Popen]]:
    """A head node and a second node on this machine (GPU 0 and GPU 1 when ``gpu``, ``cpus`` CPUs each), each with
    its own raylet and object store; returns the head's address and the nodes (:func:`stop_node`)."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="fsr-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    gpus = ["--num-gpus", "1" if gpu else "0"]
    head = _ray_start(["--head", "--port", str(port), "--num-cpus", str(cpus), "--include-dashboard=false",
                       "--temp-dir", temp, *gpus], dict(env, CUDA_VISIBLE_DEVICES="0") if gpu else env,
                      logs / "head.log")
    address = f"127.0.0.1:{port}"
    try:
        other = _ray_start(["--address", address, "--num-cpus", str(cpus), *gpus],
                           dict(env, CUDA_VISIBLE_DEVICES="1") if gpu else env, logs / "other.log")
    except BaseException:
        stop_node(head)
        raise
    return address, [head, other]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1200)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--layout", type=int, default=1, help="distorted images per reference (1)")
    parser.add_argument("--metric", default=PERCEPTUAL)
    parser.add_argument("--runs", default=",".join(RUNS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "fusedsim-batch"))
    parser.add_argument("--quick", action="store_true", help="24 pairs at 256² (smoke run)")
    parser.add_argument("--seconds-per-gpu", type=float, default=None,
                        help="size --pairs so each GPU of the largest Ray run scores about this long")
    parser.add_argument("--pairs-per-gpu", type=int, default=None,
                        help="each run scores this many pairs per GPU (instead of --pairs or the probe's estimate)")
    parser.add_argument("--pool", type=int, default=2000, help="image pairs written; the table cycles through them")
    parser.add_argument("--skip-decode-bound", action="store_true",
                        help="leave out the two decode-bound measurements (a run that only adds GPU counts)")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.size = 24, 256
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(r for r in set(runs) - set(RUNS) if not _RAY_RUN.match(r))
    if unknown:
        parser.error(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    import torch

    gpu = args.device != "cpu"
    gpus = torch.cuda.device_count() if gpu else 0
    if gpu and gpus < 1:
        parser.error("no CUDA GPU: use --device cpu for a smoke run")
    ray_runs = [(r, int(_RAY_RUN.match(r).group(1))) for r in runs if _RAY_RUN.match(r)]
    cpus = os.cpu_count() or 2
    folder = Path(args.dir) / f"{args.size}"
    pool = max(1, min(args.pairs, args.pool))
    write_images(folder, pool, args.size, cpus)
    out = folder / "ray-bench.csv"
    # Ray 2.60 turns token authentication on for a new head: nodes and drivers must agree
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"RAY_AUTH_MODE": "token"}
    device = [] if gpu else ["--device", "cpu"]
    rows: list[dict] = []
    scale_runs = "local" in runs or "nodes2" in runs or bool(ray_runs)
    if gpu and scale_runs:  # the kernels compiled once, so the scale-out rows compare warm runs (a cold-only run
        # leaves the default cache alone: its first run is then a fresh machine's first process)
        subprocess.run([*_python(), "-m", "fusedsim", "warmup", "--metric", args.metric, "--size", str(args.size)],
                       env=env, check=True)
    per_gpu = args.pairs_per_gpu  # pairs per GPU of a run (or from --seconds-per-gpu), else every run: --pairs
    if args.seconds_per_gpu and ray_runs and not per_gpu:
        # a process's rate includes its one-off costs (decoders' start, kernel loads, first groups): two local runs
        # of pool and 3 x pool pairs give the marginal rate, which sizes runs that do score for S seconds
        gpu0 = dict(env, CUDA_VISIBLE_DEVICES="0") if gpu else env
        short, long = (batch(write_table(folder, n, args.layout, pool), out, args.metric, gpu0, device)
                       for n in (pool, 3 * pool))
        seconds = [n / r["pairs_s"] for n, r in ((pool, short), (3 * pool, long))]
        rate = 2 * pool / max(seconds[1] - seconds[0], 1e-9)
        per_gpu = max(pool, int(rate * args.seconds_per_gpu))
        print(f"probe: local {rate:.1f} pairs/s marginal ({long['pairs_s']:.1f} whole) -> {per_gpu} pairs per "
              f"GPU of a run ({args.seconds_per_gpu:g} s each)", flush=True)

    def table_for(count: int) -> tuple[Path, int]:
        pairs = per_gpu * count if per_gpu else args.pairs
        return write_table(folder, pairs, args.layout, pool), pairs

    def record(name: str, result: dict, pairs: int, **extra) -> None:
        row = {"run": name, "metric": args.metric, "pairs": pairs, "size": args.size, "layout": args.layout,
               **result, **extra}
        rows.append(row)
        rate = f"{row['pairs_s']:8.1f} pairs/s" if row.get("pairs_s") else " " * 15
        first = f"  first row {row['first_row_s']:6.1f} s" if row.get("first_row_s") else ""
        busy = f"  CPUs {100 * row['cpu_busy']:3.0f}% busy" if row.get("cpu_busy") is not None else ""
        util = ("  GPU util " + " ".join(f"{v:.0f}%" for v in row["gpu_util"].values())) if row.get("gpu_util") else ""
        print(f"{name:<8} {rate}  {pairs} pairs  process {row['wall_s']:7.1f} s{first}{busy}{util}", flush=True)
        for line in row.get("summary", []):
            if "idle" in line:
                print(f"         {line}", flush=True)

    def timed(name: str, count: int, table: Path, pairs: int, env: dict[str, str], extra: list[str],
              **kwargs) -> None:
        kwargs.setdefault("first_row", True)  # every run: its one-off costs show as the time to its first row
        with Usage() as usage:
            result = batch(table, out, args.metric, env, extra, **kwargs)
        record(name, result | usage.fields(), pairs)

    # the decode bound on the pool's pairs, every core but one decoding, counted from the first decoded pair
    if not args.skip_decode_bound:
        workers = max(1, cpus - 1)
        pool_table = write_table(folder, pool, args.layout, pool)
        decode_seconds(write_table(folder, 2, 1), 2, "processes")  # the fork server's first start
        dec, first = decode_seconds(pool_table, workers, "processes")
        bound = (pool - 1) / max(dec - first, 1e-9)
        rows.append({"run": "decode-bound", "pairs": pool, "size": args.size, "layout": args.layout,
                     "workers": workers, "pairs_s": bound, "first_pair_s": first, "whole_s": dec})
        print(f"decode bound (processes, {workers} workers): {bound:.1f} pairs/s after the first pair "
              f"({pool / dec:.1f} with the workers' start-up)", flush=True)
        cores = cores_decode_bound(pool_table, workers)
        rows.append({"run": "decode-bound-cores", "pairs": pool, "size": args.size, "layout": args.layout,
                     "workers": workers, "pairs_s": cores})
        print(f"decode bound (the cores: {workers} processes, chunks of 8 in any order): {cores:.1f} pairs/s",
              flush=True)
    for _ in range(args.rounds):
        if "local" in runs:
            timed("local", 1, *table_for(1), dict(env, CUDA_VISIBLE_DEVICES="0"), device)
        for name, count in ray_runs:
            if gpu and gpus < count:
                print(f"{name:<8} skipped: this machine has {gpus} GPU(s)", flush=True)
                continue
            visible = dict(env, CUDA_VISIBLE_DEVICES=",".join(map(str, range(count))))
            extra = ["--engine", "ray", *device] + ([] if gpu else ["--workers", str(count)])
            timed(name, count, *table_for(count), visible, extra)
        if "nodes2" in runs and (not gpu or gpus >= 2):
            address, nodes = start_two_nodes(env, gpu, max(1, cpus // 2), folder)
            try:
                extra = ["--engine", "ray", "--address", address, *device] + ([] if gpu else ["--workers", "2"])
                timed("nodes2", 2, *table_for(2), env, extra)
            finally:
                for node in reversed(nodes):
                    stop_node(node)
    # first-row runs need few pairs: the time to the first row is the point
    first_rows = write_table(folder, min(args.pairs, 200), args.layout, pool), min(args.pairs, 200)
    cache = Path(tempfile.mkdtemp(prefix="triton-cold-"))
    cold_env = dict(env, TRITON_CACHE_DIR=str(cache), CUDA_VISIBLE_DEVICES="0")
    try:
        if "cold" in runs:
            timed("cold", 1, *first_rows, cold_env, device, first_row=True)
        if "cold-compiling" in runs:  # the same without the package's compiled kernels: compiled from the recording
            shutil.rmtree(cache)
            cache.mkdir()
            timed("cold-compiling", 1, *first_rows, dict(cold_env, FUSEDSIM_KERNEL_ARCHIVE="none"), device,
                  first_row=True)
        if "cold-unrecorded" in runs:  # the same without the package's recorded kernel specialisations
            shutil.rmtree(cache)
            cache.mkdir()
            timed("cold-unrecorded", 1, *first_rows, dict(cold_env, FUSEDSIM_KERNEL_SPECS="none",
                                                           FUSEDSIM_KERNEL_ARCHIVE="none"), device,
                  first_row=True)
        if "warmup" in runs:
            shutil.rmtree(cache)
            cache.mkdir()
            start = time.perf_counter()
            subprocess.run([*_python(), "-m", "fusedsim", "warmup", "--metric", args.metric, "--size",
                            str(args.size), *device], env=cold_env, check=True)
            warm_s = time.perf_counter() - start
            timed("warmup", 1, *first_rows, cold_env, device, first_row=True)
            rows[-1]["warmup_s"] = warm_s
            print(f"         fusedsim warmup took {warm_s:.1f} s", flush=True)
        if "warm" in runs:
            timed("warm", 1, *first_rows, cold_env, device, first_row=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    summary = {}
    for name in ("local", *(n for n, _ in ray_runs), "nodes2"):
        rates = [r["pairs_s"] for r in rows if r["run"] == name and r.get("pairs_s")]
        if rates:
            summary[name] = statistics.median(rates)
    if "local" in summary:
        for name in (*(n for n, _ in ray_runs), "nodes2"):
            if name in summary:
                print(f"{name} / local: {summary[name] / summary['local']:.2f}")
    for name, count in ray_runs:
        if "ray1" in summary and name in summary and count > 1:
            print(f"{name} / ray1: {summary[name] / summary['ray1']:.2f} (linear: {count})")
    if "ray2" in summary and "nodes2" in summary:
        print(f"nodes2 / ray2: {summary['nodes2'] / summary['ray2']:.2f}")
    path = write_json("ray", {"meta": metadata(args.device), "rows": rows, "median_pairs_s": summary},
                      os.environ.get("OUT"), smoke_dir() if not gpu else Path(__file__).resolve().parent / "results")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
