"""VMAF v1's features computed here (SpEED chroma, ADM and motion with the v1 options) on the GPU and the CPU, and
libvmaf's ``speed_chroma`` for comparison. CAMBI, the fourth input of the v1 models, is measured by its own family.

* GPU: ``speed_residual`` (Triton, forced: the op stays out of ``auto`` until this run validates it) against its
  twin on the same frames (bit equality asserted), its kernel time per batch, the host GSM statistics per frame,
  ``speed_chroma`` end to end, and the v1 ADM (``csf_mode=2``) and motion (``max_val=18``) per frame.
* CPU: the same API on CPU tensors (numba), 1 thread and every thread.
* The whole ``vmaf_v1.0.16_3d0h`` model through ``VmafStream`` on frames already on the GPU, in batches
  (``--model-batches``): frames/s from the first push to the last score, and the kernels' device time per frame
  (torch profiler); each of its features alone the same way.
* The whole model on the CPU, one thread and every thread, against libvmaf's ``-m version=vmaf_v1.0.16_3d0h``
  (``--cpu-model-frames``), and each feature alone on one thread against libvmaf's ``-n --feature NAME=OPTIONS``
  after its start-up (``--cpu-feature-frames``).
* libvmaf (``--libvmaf PATH`` to its ``vmaf`` tool): ``-n --feature speed_chroma=<v1 options>`` on the same clip,
  ``--threads 1``: frames/s and equality of the printed values with ours.

Content: a panned smooth texture in Y, Cb and Cr (10-bit, 4:2:0), distorted by noise and a blur. Run:
``PYTHONPATH=src python benchmarks/bench_vmaf_v1.py [--frames 96] [--libvmaf build/tools/vmaf]``; ``--smoke`` runs
small sizes on the CPU. JSON goes to ``benchmarks/results/`` (and ``$OUT``).
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

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, smoke_dir, write_json  # noqa: E402

SPEED_V1 = dict(sigma_nn=0.19, nn_floor=0.1, weight_var_mode=5, max_val=45.0)
LIBVMAF_SPEED_V1 = "speed_chroma=speed_sigma_nn=0.19:speed_nn_floor=0.1:speed_weight_var_mode=5:speed_max_val=45.0"


def plane(n: int, height: int, width: int, seed: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(ref, dist) uint16 planes (n, H, W): a panned smooth texture and a noisy, blurred copy."""
    gen = torch.Generator().manual_seed(seed)
    big = torch.rand(1, 1, height // 8 + 8, width // 8 + 8 + n, generator=gen)
    tex = torch.nn.functional.interpolate(big, scale_factor=8, mode="bicubic", align_corners=False)[0, 0]
    ref = (torch.stack([tex[:height, i:i + width] for i in range(n)]).clamp(0, 1) * 0.8 + 0.1) * top
    blurred = torch.nn.functional.avg_pool2d(ref[:, None], 3, 1, 1, count_include_pad=False)[:, 0]
    dist = 0.5 * ref + 0.5 * blurred + torch.randn(ref.shape, generator=gen) * top / 100
    return (ref.round().clamp(0, top).to(torch.int32).numpy().astype(np.uint16),
            dist.round().clamp(0, top).to(torch.int32).numpy().astype(np.uint16))


def clip(n: int, height: int, width: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Y, Cb, Cr of a 10-bit 4:2:0 reference and distorted clip."""
    y = plane(n, height, width, 0, 1023)
    u = plane(n, height // 2, width // 2, 1, 1023)
    v = plane(n, height // 2, width // 2, 2, 1023)
    return [y[0], u[0], v[0]], [y[1], u[1], v[1]]


def timed(fn, device: str, repeats: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def gpu_part(ref, dist, batch: int) -> dict:
    from triton.testing import do_bench

    from fusedsim.core.backend import use_backend
    from fusedsim.families.adm.api import integer_adm
    from fusedsim.families.adm.twin import AdmOptions
    from fusedsim.families.motion.api import integer_motion
    from fusedsim.families.motion.twin import MotionOptions
    from fusedsim.families.speed_chroma.api import speed_chroma
    from fusedsim.families.speed_chroma.kernel import speed_residual_fwd
    from fusedsim.families.speed_chroma.twin import SpeedOptions, speed_residual_ref

    n = ref[0].shape[0]
    r = [torch.from_numpy(p).cuda() for p in ref]
    d = [torch.from_numpy(p).cuda() for p in dist]
    options = SpeedOptions(**SPEED_V1)
    out: dict = {}
    for prescale, method in ((1.0, 0), (0.6, 1)):
        got = speed_residual_fwd(r[1][:batch], 10, prescale, method, 1.0)
        want = speed_residual_ref(r[1][:batch], 10, prescale, method, 1.0)
        out[f"residual_equal_twin_ps{prescale}"] = bool(torch.equal(got, want))
        out[f"residual_kernel_ms_per_batch_ps{prescale}"] = do_bench(
            lambda: speed_residual_fwd(r[1][:batch], 10, prescale, method, 1.0))
    with use_backend("triton"):
        seconds, gpu = timed(lambda: speed_chroma(r[1], r[2], d[1], d[2], 10, options=options), "cuda")
    out["speed_chroma_gpu_fps"] = n / seconds
    cpu = speed_chroma(ref[1], ref[2], dist[1], dist[2], 10, options=options)
    out["speed_chroma_gpu_equals_cpu"] = all(torch.equal(gpu[k].cpu(), cpu[k]) for k in cpu)
    adm = AdmOptions(enhn_gain_limit=1.0, csf_mode=2, dlm_weight=0.7, noise_weight=0.02, min_val=0.5)
    seconds, _ = timed(lambda: integer_adm(r[0], d[0], 10, options=adm), "cuda")
    out["adm_v1_gpu_fps"] = n / seconds
    seconds, _ = timed(lambda: integer_motion(r[0], 10, options=MotionOptions(max_val=18.0)), "cuda")
    out["motion_v1_gpu_fps"] = n / seconds
    return out


MODEL = "vmaf_v1.0.16_3d0h"


def kernel_microseconds(run) -> float:
    """The device time of every kernel and copy ``run()`` launches (torch profiler), in µs: the kernels alone,
    without the host's gaps between them."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    # Only the device's own events: a CPU op's self device time repeats the time of the kernels it launched.
    return float(sum(e.self_device_time_total for e in prof.key_averages() if e.device_type == DeviceType.CUDA))


def model_part(ref, dist, batches: list[int], check_frames: int) -> dict:
    """The whole v1 model (``VmafStream``, libvmaf's default options for ``vmaf_v1.0.16_3d0h``) on frames already
    on the GPU, pushed in batches as a streaming caller does: frames/s from the first push to the last score on
    the host; each feature alone the same way; the first frames' scores against the CPU path's."""
    from fusedsim.families.vmaf.feature_requests import FeatureRequest
    from fusedsim.families.vmaf.model import load_models
    from fusedsim.families.vmaf.score_api import VmafStream
    from fusedsim.families.vmaf.session import FeatureSession
    from fusedsim.families.vmaf.features import to_numpy

    n = ref[0].shape[0]
    r = [torch.from_numpy(p.astype(np.int16)).cuda() for p in ref]
    d = [torch.from_numpy(p.astype(np.int16)).cuda() for p in dist]

    def stream(batch: int) -> dict:
        s = VmafStream(10, model=MODEL)
        parts = [s.push([p[i:i + batch] for p in r], [p[i:i + batch] for p in d]) for i in range(0, n, batch)]
        parts.append(s.flush())
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[-1]}

    out: dict = {"model": MODEL}
    model, = load_models(MODEL)
    requests = [FeatureRequest.of(f.extractor, f.options) for f in model.features]
    for batch in batches:
        stream(batch)  # compiles, allocates
        seconds, scores = timed(lambda: stream(batch), "cuda")
        out[f"model_fps_batch{batch}"] = n / seconds
        out[f"model_kernels_us_per_frame_batch{batch}"] = kernel_microseconds(lambda: stream(batch)) / n
        for request in requests:
            def alone():
                session = FeatureSession([request], 10)
                for i in range(0, n, batch):
                    to_numpy(session.push([p[i:i + batch] for p in r], [p[i:i + batch] for p in d]))
                to_numpy(session.flush())
            alone()
            seconds, _ = timed(alone, "cuda")
            out[f"{request.extractor}_alone_fps_batch{batch}"] = n / seconds
        print(json.dumps({k: v for k, v in out.items() if k.endswith(f"batch{batch}")}), flush=True)
    if check_frames:  # every column (features and score) but the last frame's (motion's look-ahead differs)
        s = VmafStream(10, model=MODEL)
        parts = [s.push([p[:check_frames] for p in ref], [p[:check_frames] for p in dist]), s.flush()]
        cpu = {k: np.concatenate([p[k] for p in parts]) for k in parts[-1]}
        out["model_gpu_equals_cpu_frames"] = check_frames
        out["model_gpu_equals_cpu_columns"] = sorted(cpu)
        out["model_gpu_equals_cpu"] = all(np.array_equal(scores[k][:check_frames - 1], v[:-1]) for k, v in cpu.items())
        out["model_scores_first"] = scores["vmaf"][:4].tolist()
    return out


def cpu_part(ref, dist) -> dict:
    import numba

    from fusedsim.families.speed_chroma.api import speed_chroma
    from fusedsim.families.speed_chroma.twin import SpeedOptions

    options = SpeedOptions(**SPEED_V1)
    out = {}
    speed_chroma(ref[1][:2], ref[2][:2], dist[1][:2], dist[2][:2], 10, options=options)  # compile
    for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        numba.set_num_threads(threads)
        torch.set_num_threads(threads)
        seconds, _ = timed(lambda: speed_chroma(ref[1], ref[2], dist[1], dist[2], 10, options=options), "cpu")
        out[f"speed_chroma_cpu_fps_threads{threads}"] = ref[1].shape[0] / seconds
    return out


def write_yuv(folder: Path, ref, dist) -> list[Path]:
    """Both clips as raw 10-bit 4:2:0 files in ``folder`` (frames of Y, Cb, Cr, little-endian)."""
    paths = []
    for name, planes in (("ref", ref), ("dist", dist)):
        path = folder / f"{name}.yuv"
        with open(path, "wb") as f:
            for i in range(planes[0].shape[0]):
                for p in planes:
                    f.write(p[i].astype("<u2").tobytes())
        paths.append(path)
    return paths


def run_libvmaf(binary: str, paths: list[Path], size: tuple[int, int], args: list[str], threads: int,
                out_json: Path) -> tuple[float, list[dict]]:
    """libvmaf's ``vmaf`` on the clips as a whole process: its seconds and its per-frame records."""
    h, w = size
    cmd = [binary, "-r", str(paths[0]), "-d", str(paths[1]), "-w", str(w), "-h", str(h), "-p", "420", "-b", "10",
           *args, "--threads", str(threads), "-q", "--json", "-o", str(out_json)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    return seconds, json.loads(out_json.read_text())["frames"]


def one_frame_seconds(binary: str, paths: list[Path], size: tuple[int, int], args: list[str], threads: int,
                      out_json: Path) -> float:
    """libvmaf's start-up and first frame (``--frame_cnt 1``): taken off a run, the rest is its per-frame rate."""
    return run_libvmaf(binary, paths, size, [*args, "--frame_cnt", "1"], threads, out_json)[0]


def libvmaf_part(binary: str, ref, dist, ours: dict) -> dict:
    n, h, w = ref[0].shape
    feature = ["-n", "--feature", LIBVMAF_SPEED_V1]
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_yuv(Path(tmp), ref, dist)
        first = min(one_frame_seconds(binary, paths, (h, w), feature, 1, Path(tmp) / "one.json") for _ in range(2))
        seconds, frames = run_libvmaf(binary, paths, (h, w), feature, 1, Path(tmp) / "out.json")
    name = "speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5"
    theirs = np.array([f["metrics"][name] for f in frames])
    mine = np.round(ours[name].numpy(), 6)  # stock libvmaf prints %.6f
    return {"libvmaf_speed_chroma_fps_threads1_whole_process": n / seconds,
            "libvmaf_speed_chroma_fps_threads1_after_start": (n - 1) / (seconds - first) if seconds > first else None,
            "libvmaf_printed_equals_ours_rounded": bool(np.array_equal(np.round(theirs, 6), mine))}


def cpu_model_part(binary: str | None, ref, dist, frames: int) -> dict:
    """The whole v1 model on the CPU (numba, one thread and every thread) and, with ``binary``, libvmaf's ``vmaf
    -m version=vmaf_v1.0.16_3d0h`` on the same frames (``--threads 1`` and every core): frames/s as a whole
    process and after its start-up (a one-frame run's time taken off; the per-core ratio uses this one), and
    whether libvmaf's printed scores equal ours rounded to its 6 decimals."""
    import numba

    from fusedsim.families.vmaf.score_api import vmaf

    ref = [p[:frames] for p in ref]
    dist = [p[:frames] for p in dist]
    n, h, w = ref[0].shape
    vmaf(ref, dist, 10, model=MODEL)  # compiles every kernel these frames reach, outside the timing
    out: dict = {"cpu_model_frames": n}
    cores = numba.config.NUMBA_NUM_THREADS
    for threads in sorted({1, cores}):
        numba.set_num_threads(threads)
        torch.set_num_threads(threads)
        seconds, ours = timed(lambda: vmaf(ref, dist, 10, model=MODEL), "cpu", repeats=2)
        out[f"cpu_model_fps_threads{threads}"] = n / seconds
    if binary:
        model = ["-m", f"version={MODEL}"]
        with tempfile.TemporaryDirectory() as tmp:
            paths = write_yuv(Path(tmp), ref, dist)
            first = min(one_frame_seconds(binary, paths, (h, w), model, 1, Path(tmp) / "one.json") for _ in range(2))
            for threads in sorted({1, cores}):
                seconds = float("inf")
                for _ in range(2):
                    elapsed, records = run_libvmaf(binary, paths, (h, w), model, threads, Path(tmp) / "out.json")
                    seconds = min(seconds, elapsed)
                out[f"libvmaf_model_fps_threads{threads}_whole_process"] = n / seconds
                if threads == 1:  # with more, libvmaf scores frames side by side: a one-frame run is no start-up
                    after = (n - 1) / (seconds - first) if seconds > first else None
                    out["libvmaf_model_fps_threads1_after_start"] = after
        theirs = np.array([r["metrics"]["vmaf"] for r in records])
        out["libvmaf_model_printed_equals_ours_rounded"] = bool(np.array_equal(theirs, np.round(ours["vmaf"], 6)))
        after_start = out["libvmaf_model_fps_threads1_after_start"]
        out["cpu_model_ratio_per_core"] = out["cpu_model_fps_threads1"] / after_start if after_start else None
    return out


def cpu_feature_part(binary: str, ref, dist, frames: int) -> dict:
    """Each feature of the v1 model alone on one CPU thread (a ``FeatureSession`` with that feature, the frames as
    int16 tensors as the video readers give them) against libvmaf's ``vmaf -n --feature NAME=OPTIONS --threads
    1`` on the same frames after its start-up (a one-frame run's time taken off): ms a frame and the ratio."""
    import numba

    from fusedsim.families.vmaf.feature_requests import FeatureRequest
    from fusedsim.families.vmaf.model import load_models
    from fusedsim.families.vmaf.session import FeatureSession

    ref = [p[:frames] for p in ref]
    dist = [p[:frames] for p in dist]
    n, h, w = ref[0].shape
    r = [torch.from_numpy(p.astype(np.int16)) for p in ref]
    d = [torch.from_numpy(p.astype(np.int16)) for p in dist]
    numba.set_num_threads(1)
    torch.set_num_threads(1)
    model, = load_models(MODEL)
    out: dict = {"cpu_feature_frames": n}
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_yuv(Path(tmp), ref, dist)
        for feature in model.features:
            request = FeatureRequest.of(feature.extractor, feature.options)

            def ours():
                session = FeatureSession([request], 10)
                session.push(r, d)
                session.flush()

            ours()  # compiles
            seconds, _ = timed(ours, "cpu", repeats=2)
            options = ":".join(f"{k}={v}" for k, v in feature.options.items())
            args = ["-n", "--feature", f"{feature.extractor}={options}" if options else feature.extractor]
            first = min(one_frame_seconds(binary, paths, (h, w), args, 1, Path(tmp) / "one.json") for _ in range(2))
            whole = min(run_libvmaf(binary, paths, (h, w), args, 1, Path(tmp) / "out.json")[0] for _ in range(2))
            theirs_ms = (whole - first) / (n - 1) * 1e3 if whole > first else None
            mine_ms = seconds / n * 1e3
            out[f"cpu_{feature.extractor}_ms_threads1"] = mine_ms
            out[f"libvmaf_{feature.extractor}_ms_threads1_after_start"] = theirs_ms
            out[f"cpu_{feature.extractor}_ratio_per_core"] = theirs_ms / mine_ms if theirs_ms else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=96)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--libvmaf", help="path to libvmaf's vmaf tool")
    parser.add_argument("--model-batches", default="16,20,64,1",
                        help="batch sizes of the whole v1 model's timing on the GPU (comma-separated; 20 is what "
                             "`fusedsim vmaf` picks at 1080p 10-bit)")
    parser.add_argument("--check-frames", type=int, default=6, help="frames of the model checked against the CPU")
    parser.add_argument("--cpu-model-frames", type=int, default=16,
                        help="frames of the whole model on the CPU (0: skip)")
    parser.add_argument("--cpu-feature-frames", type=int, default=12,
                        help="frames of each feature alone on one CPU thread against libvmaf (0: skip; needs --libvmaf)")
    parser.add_argument("--smoke", action="store_true", help="small sizes on the CPU, to check the script")
    args = parser.parse_args()
    height, width = (1080, 1920) if not args.smoke else (200, 240)
    n = args.frames if not args.smoke else 4
    ref, dist = clip(n, height, width)
    result = {"size": [height, width], "bit_depth": 10, "frames": n, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}

    def part(values: dict) -> None:  # printed as it lands: a run cut short keeps what it measured
        result.update(values)
        print(json.dumps(values), flush=True)

    if torch.cuda.is_available() and not args.smoke:
        part(gpu_part(ref, dist, args.batch))
        part(model_part(ref, dist, [int(b) for b in args.model_batches.split(",")], args.check_frames))
    part(cpu_part(ref, dist))
    if args.cpu_model_frames:
        part(cpu_model_part(args.libvmaf, ref, dist, args.cpu_model_frames if not args.smoke else 3))
    if args.libvmaf and args.cpu_feature_frames:
        part(cpu_feature_part(args.libvmaf, ref, dist, args.cpu_feature_frames if not args.smoke else 3))
    if args.libvmaf:
        from fusedsim.families.speed_chroma.api import speed_chroma
        from fusedsim.families.speed_chroma.twin import SpeedOptions

        ours = speed_chroma(ref[1], ref[2], dist[1], dist[2], 10, options=SpeedOptions(**SPEED_V1))
        part(libvmaf_part(args.libvmaf, ref, dist, ours))
    print(json.dumps(result, indent=1))
    write_json("vmaf_v1", result, os.environ.get("OUT"), results_dir=smoke_dir() if args.smoke else RESULTS)


if __name__ == "__main__":
    main()
