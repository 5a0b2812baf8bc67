"""Recorded kernel specialisations (issue 36, cold start): what the recorder keeps, the manifest's round trip, the
rebuild of generated kernels under Triton's own cache key, and the warm-up's fall-back to running a phase when a
recorded kernel cannot be compiled. Compiling from a recording needs a GPU: that part is in the GPU test at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

triton = pytest.importorskip("triton")

from fusedsim.engine import kernel_specs  # noqa: E402
from fusedsim.engine.kernel_specs import (  # noqa: E402
    RecordedKernel,
    compile_recorded,
    load_manifest,
    recorded_phase,
    recording,
    save_manifest,
)
from fusedsim.engine.warmup import marker_path, warmup  # noqa: E402

GENERATED = '''
def _probe_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


@pytest.fixture
def compiled_mode(monkeypatch):
    """Kernels decorated in the test are JITFunctions (as on a GPU), not the interpreter's functions."""
    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)


def _spec_text(name: str, options: dict) -> str:
    """A specialisation described as Triton 3.4+'s compile hook describes one (``serialize_specialization_data``)."""
    return json.dumps({"name": name, "signature": {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       "constant_keys": [[2]], "constant_vals": [{"constexpr": 128}], "attrs_keys": [[0]],
                       "attrs_vals": [[["tt.divisibility", 16]]], "options": options, "key": "k",
                       "target": {"backend": "cuda", "arch": 90, "warp_size": 32}})


def test_recording_keeps_kernel_spec_and_launch_options_only(compiled_mode):
    from fusedsim.core.codegen import jit_from_source

    fn = jit_from_source("_probe_kernel", GENERATED)
    seen = []
    triton.knobs.runtime.jit_post_compile_hook = lambda **kw: seen.append(kw["key"]) or False
    try:
        info = triton.runtime.jit.JitFunctionInfo(fn.module, "_probe_kernel", fn)
        options = {"num_warps": 8, "num_stages": 2, "arch": "sm90", "debug": False, "ptx_version": 86}
        with recording() as rows:
            hooks = triton.knobs.runtime
            assert hooks.jit_cache_hook(key="a", fn=info) is False  # not skipped: Triton compiles
            hooks.jit_post_compile_hook(key="a", fn=info, compile={"specialization_data": _spec_text("p", options)})
        assert seen == ["a"]  # the hook installed before is still called
        assert triton.knobs.runtime.jit_post_compile_hook is not None  # and restored afterwards
        (entry, spec, seconds), = rows
    finally:
        triton.knobs.runtime.jit_post_compile_hook = None
    assert entry["module"] == "fusedsim.generated._probe_kernel" and "tl.store" in entry["source"]
    assert entry["arg_names"] == ["x_ptr", "n", "BLOCK"]
    assert "target" not in spec  # the compiling machine's own target is used
    assert spec["options"] == {"num_warps": 8, "num_stages": 2}  # the rest is the target's default there
    assert seconds >= 0


def test_generated_kernel_is_rebuilt_with_tritons_cache_key(compiled_mode):
    # Triton's on-disk cache is keyed by the kernel's cache_key: a rebuilt kernel must hash the same, or the
    # warm-up would fill the cache with kernels the run never finds
    from fusedsim.core.codegen import jit_from_source

    original = jit_from_source("_probe_kernel", GENERATED, do_not_specialize=["n"])
    entry = kernel_specs._kernel_entry(original)
    assert entry["do_not_specialize"] == ["n"]
    kernel = RecordedKernel(entry["module"], entry["qualname"], tuple(entry["arg_names"]), "{}",
                            source=entry["source"], do_not_specialize=tuple(entry["do_not_specialize"]))
    rebuilt = kernel_specs.resolve_kernel(kernel)
    assert rebuilt is not original and rebuilt.cache_key == original.cache_key


def test_manifest_round_trip_shares_kernels_and_specs(tmp_path):
    kernel = {"module": "fusedsim.families.dssim.kernel", "qualname": "_k", "arg_names": ["a"]}
    spec_a, spec_b = {"name": "a", "options": {}}, {"name": "b", "options": {"num_warps": 4}}
    runs = {"dssim/one/64x32": [(kernel, spec_a, 1.5), (kernel, spec_b, 0.5)],
            "dssim/own/64x32": [(kernel, spec_a, 0.01)]}  # a disk-cache hit in a later phase: not its compile time
    path = tmp_path / "m.json"
    save_manifest(path, runs, {"triton": "x"})
    manifest = load_manifest(path)
    assert len(manifest["specs"]) == 2 and len(manifest["kernels"]) == 1
    one = recorded_phase(manifest, "dssim", "one", 32, 64)
    own = recorded_phase(manifest, "dssim", "own", 32, 64)
    assert [k.seconds for k in one] == [1.5, 0.5] and own == one[:1]  # equal entries: compiled once
    assert json.loads(one[1].spec) == spec_b and one[0].arg_names == ("a",)
    assert recorded_phase(manifest, "dssim", "one", 64, 32) is None  # another size was not recorded
    assert recorded_phase(manifest, "dssim", "one", 32, 64, {"scale": 2}) is None  # nor other parameters
    assert recorded_phase(None, "dssim", "one", 32, 64) is None
    path.write_text(json.dumps({"format": 999}))
    assert load_manifest(path) is None  # another layout is not read


def test_compile_recorded_reports_instead_of_raising():
    gone = RecordedKernel("fusedsim.no_such_module", "_k", ("a",), "{}")
    seconds, error = compile_recorded(gone)
    assert "No module named 'fusedsim.no_such_module'" in error and seconds >= 0


def test_compile_recorded_refuses_a_kernel_whose_parameters_changed(compiled_mode, monkeypatch):
    from fusedsim.core.codegen import jit_from_source

    fn = jit_from_source("_probe_kernel", GENERATED)
    monkeypatch.setitem(kernel_specs._RESOLVED, ("m", "_probe_kernel", ""), fn)
    seconds, error = compile_recorded(RecordedKernel("m", "_probe_kernel", ("x_ptr", "count", "BLOCK"), "{}"))
    assert error == "_probe_kernel: its parameters changed since the recording"


def test_shipped_manifest_names_kernels_that_exist_with_their_parameters():
    # a kernel renamed or given other parameters since the recording would only be compiled in vain; this keeps
    # the shipped recording in step with the code (record it again on a GPU: python -m fusedsim.engine.kernel_specs)
    manifest = load_manifest()
    if manifest is None:
        pytest.skip("no manifest shipped")
    for kid, kernel in manifest["kernels"].items():
        if "source" in kernel:
            continue  # generated: rebuilt from its recorded source
        import importlib

        fn = importlib.import_module(kernel["module"])
        for part in kernel["qualname"].split("."):
            fn = getattr(fn, part, None)
        assert fn is not None, f"{kid} no longer exists"
        assert list(getattr(fn, "arg_names", kernel["arg_names"])) == kernel["arg_names"], kid
    assert {run.split("/")[0] for run in manifest["runs"]} >= {"butteraugli", "ssimulacra2", "dssim", "cvvdp",
                                                              "iw-ssim", "ssim"}


def test_warmup_runs_the_phase_when_a_recorded_kernel_fails(tmp_path, monkeypatch):
    # a recording that cannot be compiled here (no GPU: Triton has no driver) must not leave the phase cold:
    # the phase runs as without a recording, and no marker claims a preloaded phase
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.json"
    kernel = {"module": "fusedsim.no_such_module", "qualname": "_k", "arg_names": ["a"]}
    save_manifest(path, {"psnr/one/16x16": [(kernel, {"options": {}}, 1.0)]}, {})
    psnr, = warmup(["psnr"], "cpu", 16, 16, jobs=1, manifest=load_manifest(path))
    assert (psnr.metric, psnr.device, psnr.error) == ("psnr", "cpu", "")
    assert not marker_path("psnr", "cuda", 16, 16, None, "one").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_recorded_phase_leaves_nothing_to_compile(tmp_path):
    # record SSIM's phase at a size into a manifest, compile it from the recording into an empty cache, then run
    # the phase itself: Triton's cache gains no entry (every kernel it launches was compiled from the recording)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    manifest = tmp_path / "m.json"
    subprocess.run([sys.executable, "-m", "fusedsim.engine.kernel_specs", "--metric", "ssim,dssim", "--size",
                    "200x120", "--out", str(manifest)], env=env, check=True, timeout=600)
    cache = tmp_path / "cache"
    code = ("import sys; from fusedsim.engine.kernel_specs import load_manifest; "
            "from fusedsim.engine.warmup import warmup; "
            f"r = warmup(['ssim', 'dssim'], 'cuda', 120, 200, manifest=load_manifest({str(manifest)!r})); "
            "sys.exit(any(x.error for x in r))")
    subprocess.run([sys.executable, "-c", code], env={**env, "TRITON_CACHE_DIR": str(cache)}, check=True,
                   timeout=600)
    def compiled() -> dict[str, list[str]]:  # Triton's entries (a kernel's or a launcher's files per folder)
        return {p.name: sorted(f.name for f in p.iterdir()) for p in cache.iterdir() if p.is_dir()
                and p.name != "fusedsim-warm"}

    entries = compiled()
    assert entries and marker_path("ssim", "cuda", 120, 200, None, "one").name in os.listdir(cache / "fusedsim-warm")
    code = ("import sys; from fusedsim.engine.warmup import warm_metric; "
            "sys.exit(bool(warm_metric('ssim', 'cuda', 120, 200).error "
            "or warm_metric('dssim', 'cuda', 120, 200).error))")
    subprocess.run([sys.executable, "-c", code], env={**env, "TRITON_CACHE_DIR": str(cache)}, check=True,
                   timeout=600)
    after = compiled()
    assert {k: v for k, v in after.items() if k not in entries} == {}


def test_compile_recorded_gives_triton_the_signature_in_parameter_order(monkeypatch):
    # Triton's C launcher (3.4-3.6) takes the arguments in the signature's key order: a recording whose keys were
    # sorted built launchers that no launch found (seen on the H200: the run compiled every launcher again)
    from types import SimpleNamespace

    seen = {}

    class Kernel:
        arg_names = ["x_ptr", "n", "BLOCK"]
        _fn_name = "m._k"

        def preload(self, text):
            seen["spec"] = json.loads(text)

    monkeypatch.setitem(kernel_specs._RESOLVED, ("m", "_k", ""), Kernel())
    target = SimpleNamespace(backend="cuda", arch=90, warp_size=32)
    driver = SimpleNamespace(get_current_target=lambda: target)  # a GPU's driver, as far as this path asks
    monkeypatch.setattr(type(triton.runtime.driver), "active", property(lambda self: driver))
    spec = json.dumps({"name": "m._k", "signature": {"BLOCK": "constexpr", "n": "i32", "x_ptr": "*fp32"}})
    seconds, error = compile_recorded(RecordedKernel("m", "_k", ("x_ptr", "n", "BLOCK"), spec))
    assert error == ""
    assert list(seen["spec"]["signature"]) == ["x_ptr", "n", "BLOCK"]
    assert seen["spec"]["target"] == {"backend": "cuda", "arch": 90, "warp_size": 32}  # this machine's own


def test_warmup_takes_a_recorded_phase_without_kernels_as_ready(tmp_path, monkeypatch):
    # a metric whose phase compiled nothing when recorded (no Triton kernel) has nothing to warm: no task, a marker
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.json"
    save_manifest(path, {"psnr/one/16x16": []}, {})
    psnr, = warmup(["psnr"], "cpu", 16, 16, jobs=1, manifest=load_manifest(path))
    assert (psnr.metric, psnr.error, psnr.seconds) == ("psnr", "", 0.0)
    assert marker_path("psnr", "cuda", 16, 16, None, "one").exists()


def test_a_named_recording_that_cannot_be_read_is_said(tmp_path, monkeypatch):
    missing = tmp_path / "none-here.json"
    monkeypatch.setenv("FUSEDSIM_KERNEL_SPECS", str(missing))
    with pytest.raises(ValueError, match=r"none-here\.json \(named by FUSEDSIM_KERNEL_SPECS\)"):
        load_manifest()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"broken\.json: not a recording"):
        load_manifest(broken)
    monkeypatch.setenv("FUSEDSIM_KERNEL_SPECS", "none")
    assert load_manifest() is None  # switched off


@pytest.mark.parametrize("argv,match", [(["--size", "12xa"], "--size must be S or WxH"),
                                        (["--jobs", "0"], "--jobs must be >= 1"),
                                        (["--out", "m.json", "--archive", "./m.json"], "the archive would replace it")])
def test_recorder_refuses_bad_options_by_name(argv, match, capsys):
    with pytest.raises(SystemExit):
        kernel_specs.main(argv)
    assert match in capsys.readouterr().err
