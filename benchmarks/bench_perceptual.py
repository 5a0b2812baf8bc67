"""Perceptual-metric benchmark (SSIMULACRA2, Butteraugli, DSSIM, IW-SSIM, ColorVideoVDP, zensim): what codec
engineers call.

Per metric and square size (512², 1024², 2048², 4096² = 16 MP; one uint8 sRGB pair per call, default arguments):
  one-shot  warm per-call time of ``fusedsim.<metric>(ref, dist)`` and its peak extra GPU memory
  cached    ``m = fusedsim.Metric(name, device="cuda"); m.set_reference(ref)`` once, then ``m.score(dist)``
  1080p     frames/s at 1920x1080 (one-shot and cached), the CPU path (the PyTorch twin) at 1080p with all
            threads and with one thread, and the GPU result against the CPU twin's on the same 1080p pair
  peer      a peer on the same GPU at every size where the provider names one (IW-SSIM: piq 0.8 on the same grey
            images, float64), its time, peak memory, value and our speed-up
Vship (SSIMULACRA2, Butteraugli) is compared in ``bench_vship.py`` (its C API, agreement and speed).

Anchors recorded with the results: zenmetrics warm per-call at 16 MP on an RTX 5070 (ssim2 47.7 ms, butteraugli
50.2 ms), single-thread C++ at 1080p (SSIMULACRA2 377 ms, Butteraugli 647 ms); goals on an H200: 16 MP <= 1/5 of
zenmetrics' figure, >= 2x Vship's frames/s at 1080p.

Adding a metric: write a ``_<metric>_bench() -> MetricBench`` below and list it in ``PROVIDERS``.

GPU:  PYTHONPATH=src python benchmarks/bench_perceptual.py --metric ssimulacra2 [--sizes 512,1024,2048,4096]
      (--metric dssim,iw-ssim: the IW-SSIM rows time piq on the same GPU when it is installed: pip install piq)
                                                          [--no-cpu]
CPU smoke (proves the code paths, numbers meaningless):
      PYTHONPATH=src python benchmarks/bench_perceptual.py --metric ssimulacra2 --device cpu --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    fmt,
    median_ms,
    metadata,
    parse_skip,
    peak_extra_mib,
    run_stamp,
    smoke_dir,
    sync,
    uint8_pair,
    write_json,
)

Tensor = torch.Tensor
SIZES = (512, 1024, 2048, 4096)
FHD = (1080, 1920)  # (H, W)
CPU_SMOKE_SIZES = (64, 96)
CPU_SMOKE_FHD = (72, 128)


@dataclass
class MetricBench:
    """How to call one metric: one-shot, cached reference, its value as a float, and its peers' anchors."""

    name: str
    one_shot: Callable[[Tensor, Tensor], object]
    value: Callable[[object], float]  # the headline number of a result (for the GPU-vs-CPU check)
    anchors: dict = field(default_factory=dict)
    # a peer on the same device: (ref, dist) -> (name, call, value of a result); timed at every size
    peer: Callable[[Tensor, Tensor], tuple[str, Callable[[], object], Callable[[object], float]]] | None = None


def _ssimulacra2_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="ssimulacra2", one_shot=fusedsim.ssimulacra2, value=lambda r: float(r),
        anchors={"zenmetrics_rtx5070_16mp_ms": 47.7, "goal_h200_16mp_ms": 9.5, "cpp_single_thread_1080p_ms": 377,
                 "vship_rtx4050_laptop_1080p_fps": 149})


def _butteraugli_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="butteraugli", one_shot=fusedsim.butteraugli, value=lambda r: float(r.max_norm),
        anchors={"zenmetrics_rtx5070_16mp_ms": 50.2, "goal_h200_16mp_ms": 10.0, "cpp_single_thread_1080p_ms": 647,
                 "vship_rtx4050_laptop_1080p_fps": 36})


def _dssim_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="dssim", one_shot=fusedsim.dssim, value=lambda r: float(r),
        anchors={"zenmetrics_rtx5070_16mp_ms": 46.8, "goal_h200_16mp_ms": 9.4})


def _iw_ssim_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="iw-ssim", one_shot=fusedsim.iw_ssim, value=lambda r: float(r),
        anchors={"zenmetrics_rtx5070_16mp_ms": 39.4, "goal_h200_16mp_ms": 7.9,
                 "piq_h200_grey_ms": {"512": 14.7, "1024": 21.1, "2048": 48.9, "4096": 166.3}},
        peer=_piq_iw_ssim)


def _piq_iw_ssim(ref: Tensor, dist: Tensor):
    """piq 0.8's IW-SSIM on the same grey images (MATLAB rgb2gray rounded, float64, reference as ``y``: the
    configuration that is within 3.1e-5 of the authors' code); the grey conversion is done once, outside."""
    import piq  # ImportError: the peer is reported as missing

    from fusedsim.families.iwssim.twin import grey_ref

    x, y = grey_ref(dist.double() / 255), grey_ref(ref.double() / 255)
    return "piq", lambda: piq.information_weighted_ssim(x, y, data_range=255.0), lambda r: float(r)


def _cvvdp_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="cvvdp", one_shot=fusedsim.cvvdp, value=lambda r: float(r),
        anchors={"zenmetrics_rtx5070_16mp_ms": 41.3, "goal_h200_16mp_ms": 8.3,
                 "pycvvdp_h200_standard_4k_ms": {"512": 23.4, "1024": 30.0, "2048": 51.7, "4096": 148.7}},
        peer=_pycvvdp)


def _pycvvdp(ref: Tensor, dist: Tensor):
    """pycvvdp 0.5.7 (``pip install cvvdp``) on the same uint8 pair and device, display standard_4k; it takes the
    test image first."""
    import pycvvdp  # ImportError: the peer is reported as missing

    metric = pycvvdp.cvvdp(display_name="standard_4k", device=ref.device, quiet=True)
    return "pycvvdp", lambda: metric.predict(dist[0], ref[0], dim_order="CHW")[0], lambda r: float(r)


def _zensim_bench() -> MetricBench:
    import fusedsim

    return MetricBench(
        name="zensim", one_shot=fusedsim.zensim, value=lambda r: float(r),
        anchors={"zenmetrics_rtx5070_16mp_ms": 37.8, "goal_h200_16mp_ms": 7.6, "cpu_16core_1080p_ms": 22,
                 "goal_h200_1080p_ms": 3.0})


PROVIDERS: dict[str, Callable[[], MetricBench]] = {"ssimulacra2": _ssimulacra2_bench,
                                                   "butteraugli": _butteraugli_bench,
                                                   "dssim": _dssim_bench,
                                                   "iw-ssim": _iw_ssim_bench,
                                                   "cvvdp": _cvvdp_bench,
                                                   "zensim": _zensim_bench}


# -------------------------------------------------------------------------------------------------- inputs
# ------------------------------------------------------------------------------------------------- measuring
def bench_size(bench: MetricBench, height: int, width: int, device: str, seed: int) -> dict:
    import fusedsim

    ref, dist = uint8_pair(height, width, device, seed)
    row: dict = {"shape": [1, 3, height, width], "dtype": "uint8"}
    row["one_shot_ms"] = median_ms(lambda: bench.one_shot(ref, dist), device=device)
    row["one_shot_peak_mib"] = peak_extra_mib(lambda: bench.one_shot(ref, dist), device=device)
    metric = fusedsim.Metric(bench.name, device=device)
    metric.set_reference(ref)
    row["cached_ms"] = median_ms(lambda: metric.score(dist), device=device)
    row["cached_peak_mib"] = peak_extra_mib(lambda: metric.score(dist), device=device)
    row["set_reference_ms"] = median_ms(lambda: metric.set_reference(ref), device=device)
    row["value"] = bench.value(bench.one_shot(ref, dist))
    if bench.peer is not None:
        try:
            peer_name, call, peer_value = bench.peer(ref, dist)
            row["peer"] = {"name": peer_name, "ms": median_ms(call, device=device),
                           "peak_mib": peak_extra_mib(call, device=device), "value": peer_value(call())}
            row["peer"]["speedup"] = row["peer"]["ms"] / row["one_shot_ms"]
        except Exception as exc:  # a peer that cannot run is a row, not a failure
            row["peer"] = {"error": f"{type(exc).__name__}: {exc}"}
    return row


def _set_threads(n: int) -> None:
    """torch's and numba's (the compiled CPU kernels') thread counts."""
    torch.set_num_threads(n)
    try:
        import numba
    except ImportError:
        return
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def bench_cpu_twin(bench: MetricBench, height: int, width: int, seed: int, gpu_value: float | None) -> dict:
    """The CPU path as a user calls it (``auto``: the twins with their compiled CPU kernels where an op has one),
    after a warm-up on a crop (numba compiles once per install and caches)."""
    ref, dist = uint8_pair(height, width, "cpu", seed)
    out: dict = {"shape": [1, 3, height, width]}
    import fusedsim

    side = max(64, fusedsim.get_metric(bench.name).min_size)
    bench.one_shot(ref[..., :side, :side].contiguous(), dist[..., :side, :side].contiguous())
    threads = torch.get_num_threads()
    for label, n in (("all_threads", threads), ("one_thread", 1)):
        _set_threads(n)
        try:
            t0 = time.perf_counter()
            value = bench.value(bench.one_shot(ref, dist))
            out[f"{label}_ms"] = (time.perf_counter() - t0) * 1e3
        finally:
            _set_threads(threads)
    out["threads"] = threads
    out["value"] = value
    if gpu_value is not None:
        out["gpu_minus_cpu"] = gpu_value - value
    return out


def main(argv: list[str] | None = None) -> int:
    import fusedsim

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metric", default="ssimulacra2", help=f"comma list of {', '.join(PROVIDERS)}")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="square sizes (px per side)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--quick", action="store_true", help="fewer sizes (CPU smoke: tiny ones)")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU twin at 1080p (seconds per metric)")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: sizes,fhd,cpu")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="also copy the JSON here")
    args = parser.parse_args(argv)

    device = args.device
    smoke = device == "cpu"
    skip = parse_skip(args.skip)
    if smoke:
        sizes, fhd = CPU_SMOKE_SIZES[: 1 if args.quick else None], CPU_SMOKE_FHD
    else:
        sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
        sizes = sizes[:2] if args.quick else sizes
        fhd = FHD
    stamp = run_stamp()
    payload: dict = {"meta": metadata(device), "results": {}}
    for name in parse_skip(args.metric):
        if name not in PROVIDERS:
            parser.error(f"unknown metric {name!r}; known: {', '.join(PROVIDERS)}")
        bench = PROVIDERS[name]()
        res: dict = {"anchors": bench.anchors, "sizes": []}
        smallest = fusedsim.get_metric(bench.name).min_size  # the CPU smoke sizes are below IW-SSIM's 176 px
        sizes_m = tuple(max(size, smallest) for size in sizes)
        fhd_m = (max(fhd[0], smallest), max(fhd[1], smallest))
        payload["results"][name] = res
        if "sizes" not in skip:
            for i, size in enumerate(sizes_m):
                row = bench_size(bench, size, size, device, seed=i)
                res["sizes"].append(row)
                print(f"{name} {size}x{size}: one-shot {fmt(row['one_shot_ms'])} ms, cached {fmt(row['cached_ms'])} "
                      f"ms, peak {fmt(row['one_shot_peak_mib'], 1)} MiB, value {fmt(row['value'], 4)}", flush=True)
                if "peer" in row:
                    print(f"{name} {size}x{size} peer: {row['peer']}", flush=True)
        gpu_fhd_value = None
        if "fhd" not in skip:
            row = bench_size(bench, *fhd_m, device, seed=100)
            row["one_shot_fps"] = 1e3 / row["one_shot_ms"]
            row["cached_fps"] = 1e3 / row["cached_ms"]
            res["fhd"] = row
            gpu_fhd_value = row["value"]
            print(f"{name} {fhd_m[1]}x{fhd_m[0]}: {fmt(row['one_shot_fps'], 1)} frames/s one-shot, "
                  f"{fmt(row['cached_fps'], 1)} cached", flush=True)
        if not args.no_cpu and "cpu" not in skip:
            res["cpu_twin_fhd"] = bench_cpu_twin(bench, *fhd_m, seed=100,
                                                 gpu_value=None if smoke else gpu_fhd_value)
            print(f"{name} CPU twin {fhd[1]}x{fhd[0]}: {res['cpu_twin_fhd']}", flush=True)
        big = next((r for r in res["sizes"] if r["shape"][2:] == [4096, 4096]), None)
        if big is not None and "zenmetrics_rtx5070_16mp_ms" in bench.anchors:
            res["summary_16mp"] = {"one_shot_ms": big["one_shot_ms"], "cached_ms": big["cached_ms"],
                                   "zenmetrics_over_fusedsim": bench.anchors["zenmetrics_rtx5070_16mp_ms"]
                                   / big["one_shot_ms"], "goal_ms": bench.anchors.get("goal_h200_16mp_ms")}
            print(f"{name} 16 MP: {res['summary_16mp']}", flush=True)
        sync(device)
        path = write_json("perceptual", payload, extra_dir=args.out, stamp=stamp,
                          **({"results_dir": smoke_dir()} if smoke else {}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
