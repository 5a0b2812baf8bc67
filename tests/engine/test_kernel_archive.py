"""Ahead-of-time compiled kernels (issue 36, cold start): an archive of a recorded run's Triton cache is unpacked
only where the platform matches, its groups point at their new folder, what the cache has is kept, a phase is ready
only when its recording and every kernel's source are unchanged, and the warm-up then starts no process. Whether
Triton really loads the unpacked kernels needs a GPU: the GPU test at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton")

from fusedsim.engine import kernel_archive, kernel_specs, warmup as warmup_module  # noqa: E402
from fusedsim.engine.kernel_archive import install_archive, relocate_groups, write_archive  # noqa: E402
from fusedsim.engine.kernel_specs import load_manifest, save_manifest  # noqa: E402
from fusedsim.engine.warmup import marker_path, warmup  # noqa: E402

STAMP = {"triton": "9.9.9", "triton_key": "key", "backend": "12.8-90", "ext_suffix": ".so"}

SOURCE = '''
def _archive_probe(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
'''
PROBE = {"module": "fusedsim.generated._archive_probe", "qualname": "_archive_probe",
         "arg_names": ["x_ptr", "n", "BLOCK"], "source": SOURCE, "do_not_specialize": []}
GONE = {"module": "fusedsim.no_such_module", "qualname": "_k", "arg_names": ["a"]}


@pytest.fixture
def compiled_mode(monkeypatch):
    """Kernels are JITFunctions (with Triton's ``cache_key``), as on a GPU, and resolved afresh in this mode."""
    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)
    monkeypatch.setattr(kernel_specs, "_RESOLVED", {})


def _kernel_folder(cache: Path, name: str, payload: bytes) -> Path:
    """A kernel's cache folder as Triton writes one: metadata, binary, IR, and a group naming them by absolute
    path."""
    folder = cache / name
    folder.mkdir(parents=True)
    files = {"k.json": b'{"name": "k"}', "k.cubin": payload, "k.ptx": b"// ptx", "k.ttir": b"// ttir"}
    for file, body in files.items():
        (folder / file).write_bytes(body)
    (folder / "__grp__k.json").write_text(json.dumps({"child_paths": {f: str(folder / f) for f in files}}))
    return folder


def _recorded_cache(tmp_path: Path) -> tuple[Path, Path]:
    """A cache with one kernel folder, one launcher folder and warm-up markers, and a manifest of two runs: one of
    a kernel that resolves, one of a kernel that no longer exists."""
    cache = tmp_path / "recorded"
    _kernel_folder(cache, "KERNELA", b"\x7fcubin-a")
    (cache / "LAUNCHER").mkdir()
    (cache / "LAUNCHER" / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (cache / "fusedsim-warm").mkdir()
    (cache / "fusedsim-warm" / "probe-x-one").touch()
    manifest = tmp_path / "m.json"
    save_manifest(manifest, {"probe/one/16x16": [(PROBE, {"signature": {}}, 1.0)],
                             "probe/own/16x16": [(GONE, {"signature": {}}, 1.0)]}, {})
    return cache, manifest


def _archive(tmp_path: Path, monkeypatch) -> tuple[Path, dict]:
    cache, manifest_path = _recorded_cache(tmp_path)
    manifest = load_manifest(manifest_path)
    monkeypatch.setattr(kernel_archive, "platform_stamp", lambda: dict(STAMP))
    out = tmp_path / "kernels.tar.xz"
    write_archive(cache, out, manifest)
    return out, manifest


def test_relocate_groups_points_a_copied_cache_at_its_own_files(tmp_path):
    original = _kernel_folder(tmp_path / "driver", "KERNELA", b"a")
    copy = tmp_path / "node"
    copy.mkdir()
    os.rename(original, copy / "KERNELA")  # the driver's folder is gone: its paths name nothing now
    (copy / "KERNELA" / "k.ttir").unlink()  # a child missing in the copy is dropped from its group
    _kernel_folder(tmp_path / "other", "KERNELB", b"b")
    os.rename(tmp_path / "other" / "KERNELB", copy / "KERNELB")
    (copy / "KERNELB" / "k.json").unlink()  # without its metadata a group is no kernel: removed
    assert relocate_groups(copy) == 1
    children = json.loads((copy / "KERNELA" / "__grp__k.json").read_text())["child_paths"]
    assert children == {f: str(copy / "KERNELA" / f) for f in ("k.json", "k.cubin", "k.ptx")}
    assert not (copy / "KERNELB" / "__grp__k.json").exists()
    assert relocate_groups(copy) == 0  # already in place


def test_archive_holds_binaries_metadata_and_launchers_not_ir_or_markers(tmp_path, monkeypatch, compiled_mode):
    out, manifest = _archive(tmp_path, monkeypatch)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        meta = json.loads(tar.extractfile("meta.json").read())
        group = json.loads(tar.extractfile("cache/KERNELA/__grp__k.json").read())
    assert names[0] == "meta.json"
    assert sorted(names[1:]) == ["cache/KERNELA/__grp__k.json", "cache/KERNELA/k.cubin", "cache/KERNELA/k.json",
                                 "cache/LAUNCHER/__triton_launcher.cpython-312-x86_64-linux-gnu.so"]
    assert group == {"child_paths": {"k.json": "k.json", "k.cubin": "k.cubin"}}  # by name: placed on install
    assert {k: meta[k] for k in STAMP} == STAMP
    assert set(meta["runs"]) == {"probe/one/16x16", "probe/own/16x16"}
    probe_id = next(k for k, v in manifest["kernels"].items() if v["qualname"] == "_archive_probe")
    assert set(meta["fingerprints"]) == {probe_id}  # the kernel that no longer exists has none


def test_install_unpacks_what_the_cache_lacks_and_names_the_ready_runs(tmp_path, monkeypatch, compiled_mode):
    out, manifest = _archive(tmp_path, monkeypatch)
    cache = tmp_path / "fresh"
    (cache / "LAUNCHER").mkdir(parents=True)  # built here already: kept as it is
    (cache / "LAUNCHER" / "mine.so").write_bytes(b"mine")
    result = install_archive(out, cache, manifest, dict(STAMP))
    assert result.platform_match and result.added == 1
    # the run whose kernel resolves with its recorded fingerprint is ready; the one whose kernel is gone is not
    assert result.ready == frozenset({"probe/one/16x16"})
    assert sorted(p.name for p in (cache / "KERNELA").iterdir()) == ["__grp__k.json", "k.cubin", "k.json"]
    children = json.loads((cache / "KERNELA" / "__grp__k.json").read_text())["child_paths"]
    assert children == {"k.json": str(cache / "KERNELA" / "k.json"), "k.cubin": str(cache / "KERNELA" / "k.cubin")}
    assert (cache / "KERNELA" / "k.cubin").read_bytes() == b"\x7fcubin-a"
    assert sorted(p.name for p in (cache / "LAUNCHER").iterdir()) == ["mine.so"]
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # the staging folder is gone


def test_install_on_another_platform_adds_nothing_and_readies_nothing(tmp_path, monkeypatch, compiled_mode):
    out, manifest = _archive(tmp_path, monkeypatch)
    for key in STAMP:  # any one difference: another Triton build, compiler, GPU architecture or Python
        cache = tmp_path / f"other-{key}"
        result = install_archive(out, cache, manifest, dict(STAMP, **{key: "other"}))
        assert (result.platform_match, result.ready, result.added) == (False, frozenset(), 0)
        assert not cache.exists() or not any(cache.iterdir())


def test_a_changed_kernel_source_or_recording_makes_its_run_not_ready(tmp_path, monkeypatch, compiled_mode):
    out, manifest = _archive(tmp_path, monkeypatch)
    probe_id = next(k for k, v in manifest["kernels"].items() if v["qualname"] == "_archive_probe")
    real = kernel_archive.kernel_fingerprints
    monkeypatch.setattr(kernel_archive, "kernel_fingerprints",
                        lambda m, ids=None: {k: v + "-edited" for k, v in real(m, ids).items()})
    assert install_archive(out, tmp_path / "a", manifest, dict(STAMP)).ready == frozenset()
    monkeypatch.setattr(kernel_archive, "kernel_fingerprints", real)
    rerecorded = json.loads(json.dumps(manifest))
    rerecorded["specs"][rerecorded["runs"]["probe/one/16x16"][0]]["spec"] = {"signature": {"n": "i64"}}
    assert install_archive(out, tmp_path / "b", rerecorded, dict(STAMP)).ready == frozenset()
    assert probe_id in manifest["kernels"]


def test_install_hashes_kernels_in_the_recordings_order(tmp_path, monkeypatch, compiled_mode):
    # Triton 3.6 merges a shared callee's globals into whichever kernel is hashed first: fingerprints taken in
    # another order than the recorder's differ (seen on the H200 for SSIMULACRA2's two colour kernels)
    out, manifest = _archive(tmp_path, monkeypatch)
    asked = []
    real = kernel_archive.kernel_fingerprints
    monkeypatch.setattr(kernel_archive, "kernel_fingerprints",
                        lambda m, ids=None: asked.append(list(ids)) or real(m, ids))
    reordered = dict(manifest, kernels=dict(reversed(list(manifest["kernels"].items()))))
    install_archive(out, tmp_path / "c", reordered, dict(STAMP))
    assert asked == [list(reordered["kernels"])] and asked[0] != sorted(asked[0])  # the manifest's, not sorted


def test_a_cache_folder_that_cannot_take_the_kernels_is_named(tmp_path, monkeypatch, compiled_mode):
    out, manifest = _archive(tmp_path, monkeypatch)
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")  # a cache path that is a file: no folder can be made in it
    with pytest.raises(ValueError, match=r"kernel cache .*file-not-folder/cache: cannot take the kernels of "
                                         r".*kernels\.tar\.xz"):
        install_archive(out, blocked / "cache", manifest, dict(STAMP))


def test_packing_a_cache_folder_that_does_not_exist_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_archive, "platform_stamp", lambda: dict(STAMP))
    with pytest.raises(ValueError, match=r"kernel cache .*nowhere: not a folder"):
        write_archive(tmp_path / "nowhere", tmp_path / "k.tar.xz", {"runs": {}, "kernels": {}, "specs": []})
    assert not (tmp_path / "k.tar.xz").exists()


def test_a_file_that_is_no_archive_is_an_error_naming_it(tmp_path):
    bad = tmp_path / "kernels.tar.xz"
    bad.write_bytes(b"not xz")
    with pytest.raises(ValueError, match=r"kernels\.tar\.xz: cannot be read"):
        install_archive(bad, tmp_path / "cache", None, dict(STAMP))
    with tarfile.open(bad, "w:xz"):
        pass  # an xz tar without meta.json
    with pytest.raises(ValueError, match=r"kernels\.tar\.xz: no meta\.json"):
        install_archive(bad, tmp_path / "cache", None, dict(STAMP))


def test_warmup_takes_phases_an_archive_made_ready_without_any_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.json"
    save_manifest(path, {"psnr/one/16x16": [(GONE, {"options": {}}, 1.0)]}, {})
    monkeypatch.setattr(warmup_module, "_archived_runs", lambda manifest: frozenset({"psnr/one/16x16"}))

    def no_pool(*args, **kwargs):
        raise AssertionError("a phase made ready by an archive must start no process")

    monkeypatch.setattr(warmup_module, "ProcessPoolExecutor", no_pool)
    psnr, = warmup(["psnr"], "cuda", 16, 16, manifest=load_manifest(path))
    assert (psnr.metric, psnr.error, psnr.precompiled) == ("psnr", "", True)
    assert marker_path("psnr", "cuda", 16, 16, None, "one").exists()


def test_without_a_gpu_driver_no_archive_is_installed(tmp_path, monkeypatch):
    def no_driver():
        raise RuntimeError("0 active drivers")

    monkeypatch.setattr(kernel_archive, "platform_stamp", no_driver)
    assert kernel_archive.install_archives(tmp_path / "cache", None) == []
    assert not (tmp_path / "cache").exists()


def test_a_scoring_process_unpacks_the_package_kernels_without_a_manifest(tmp_path, monkeypatch, compiled_mode):
    # a Ray actor on a node of its own only needs the files: no fingerprints, no markers
    out, _ = _archive(tmp_path, monkeypatch)
    monkeypatch.setenv("FUSEDSIM_KERNEL_ARCHIVE", str(out))
    monkeypatch.setattr(kernel_archive, "kernel_fingerprints", lambda *a: pytest.fail("no fingerprints needed"))
    assert kernel_archive.unpack_package_kernels(tmp_path / "node") == 2
    assert (tmp_path / "node" / "KERNELA" / "k.cubin").read_bytes() == b"\x7fcubin-a"
    assert not (tmp_path / "node" / "fusedsim-warm").exists()
    monkeypatch.setenv("FUSEDSIM_KERNEL_ARCHIVE", str(tmp_path / "missing.tar.xz"))
    assert kernel_archive.unpack_package_kernels(tmp_path / "other") == 0  # unreadable: compiled as usual


def test_the_package_archives_are_read_from_the_named_file_or_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEDSIM_KERNEL_ARCHIVE", "none")
    assert kernel_archive.bundled_archives() == []
    monkeypatch.setenv("FUSEDSIM_KERNEL_ARCHIVE", str(tmp_path / "k.tar.xz"))
    assert kernel_archive.bundled_archives() == [tmp_path / "k.tar.xz"]


def test_shipped_archives_were_recorded_from_the_shipped_manifest():
    # an archive's runs must be the manifest's as shipped: a re-recorded manifest without a new archive would
    # leave the archive's phases never ready (not wrong, only slow), which this catches before a release
    manifest = load_manifest()
    for archive in kernel_archive.bundled_archives():
        with archive.open("rb") as raw, tarfile.open(fileobj=raw, mode="r:xz") as tar:
            meta = json.loads(tar.extractfile("meta.json").read())
        assert meta["runs"] == {run: kernel_archive.run_digest(manifest, run) for run in manifest["runs"]}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_archive_leaves_a_fresh_cache_with_nothing_to_compile(tmp_path):
    # record SSIM at a size with an archive, install it into an empty cache in another folder (the recording's
    # folder removed), then run the phases: Triton's cache gains no entry and no process compiled anything
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    manifest, archive = tmp_path / "m.json", tmp_path / "k.tar.xz"
    subprocess.run([sys.executable, "-m", "fusedsim.engine.kernel_specs", "--metric", "ssim,dssim", "--size",
                    "200x120", "--out", str(manifest), "--archive", str(archive)], env=env, check=True, timeout=600)
    cache = tmp_path / "cache"
    env |= {"TRITON_CACHE_DIR": str(cache), "FUSEDSIM_KERNEL_ARCHIVE": str(archive)}
    code = ("import sys; from fusedsim.engine.kernel_specs import load_manifest; "
            "from fusedsim.engine import warmup as w; "
            "w.ProcessPoolExecutor = None; "  # any process started would fail the run
            f"r = w.warmup(['ssim', 'dssim'], 'cuda', 120, 200, manifest=load_manifest({str(manifest)!r})); "
            "sys.exit(any(x.error for x in r))")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
    entries = {p.name: sorted(f.name for f in p.iterdir()) for p in cache.iterdir() if p.is_dir()}
    code = ("import sys; from fusedsim.engine.warmup import warm_metric; "
            "sys.exit(bool(warm_metric('ssim', 'cuda', 120, 200).error "
            "or warm_metric('dssim', 'cuda', 120, 200).error))")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
    after = {p.name: sorted(f.name for f in p.iterdir()) for p in cache.iterdir() if p.is_dir()}
    assert {k: v for k, v in after.items() if k not in entries and k != "fusedsim-warm"} == {}
