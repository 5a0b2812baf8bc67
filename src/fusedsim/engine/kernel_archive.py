"""Ahead-of-time compiled kernels: a recorded run's Triton cache, packed once on a GPU and installed on fresh
machines of the same platform, so their first batch compiles nothing.

Compiling from the recording (:mod:`~fusedsim.engine.kernel_specs`) spreads a metric set's kernels over every
core, but a fresh machine still pays processes that import torch and Triton, and ~90 CPU-seconds of compiling.
Where the machine has the very Triton build and GPU architecture the recording was made with (the common cloud
set-up: the torch wheel's pinned Triton on an H100/H200), the compiled kernels themselves can be reused: an
archive (``fusedsim/data/kernels/*.tar.xz``, or the file named by ``FUSEDSIM_KERNEL_ARCHIVE``) holds each
recorded kernel's binary and metadata and the C launchers Triton built for them, written by ``python -m
fusedsim.engine.kernel_specs --archive``.

Triton's cache is content-addressed: a folder's name is the hash of everything that went into its kernel (Triton's
own sources and library, the backend and its ``ptxas``, the GPU architecture, the kernel's source, its
specialisation and options). So unpacking an archive into a cache can never change a result: a kernel that does
not match this machine has another address, is never looked up, and is compiled as usual. What the archive's
metadata decides is only whether the warm-up may skip a phase: when this machine's Triton key, backend hash and
extension suffix equal the archive's, and each kernel's source fingerprint (``JITFunction.cache_key``) equals the
recorded one, the phases recorded at the size asked for are ready.

Triton's cache groups name their files by absolute path, so a cache copied elsewhere (unpacked here, or shipped to
a Ray node) must have its group files pointed at the new folder (:func:`relocate_groups`), or Triton would miss
every kernel in it.
"""

from __future__ import annotations

import io
import json
import os
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["ARCHIVE_ENV", "FORMAT", "InstallResult", "bundled_archives", "default_archive_path", "install_archive",
           "install_archives", "kernel_fingerprints", "platform_stamp", "ready_runs", "relocate_groups", "run_digest",
           "unpack_package_kernels", "write_archive"]

FORMAT = 1  # the archive layout's version; another version is not installed
ARCHIVE_ENV = "FUSEDSIM_KERNEL_ARCHIVE"  # another archive's path, or "none"
ARCHIVE_FOLDER = "kernels"  # in fusedsim/data
META = "meta.json"  # the archive's first member
CACHE_PREFIX = "cache/"  # the members below it are Triton cache folders
KERNEL_SUFFIXES = (".json", ".cubin", ".hsaco")  # what a kernel needs to load: metadata and binary (no IR)
GROUP_PREFIX = "__grp__"


def platform_stamp() -> dict[str, str]:
    """What a Triton cache entry's address depends on besides the kernel: Triton's key (its sources and library),
    the active backend's hash (compiler version and GPU architecture) and the extension suffix of the C launchers.
    Needs a GPU (the backend is the current device's)."""
    import triton
    from triton.compiler.compiler import make_backend
    from triton.runtime import cache

    from fusedsim.core.triton_key import install_triton_key_cache

    install_triton_key_cache()
    target = triton.runtime.driver.active.get_current_target()
    return {"triton": triton.__version__, "triton_key": cache.triton_key(), "backend": make_backend(target).hash(),
            "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or ""}


def default_archive_path() -> Path:
    """Where the recorder packs this platform's kernels in the package: ``data/kernels/triton-<version>-<GPU
    architecture>.tar.xz`` (needs a GPU)."""
    import triton

    target = triton.runtime.driver.active.get_current_target()
    name = f"triton-{triton.__version__}-{target.backend}-{target.arch}.tar.xz"
    return Path(__file__).resolve().parents[1] / "data" / ARCHIVE_FOLDER / name


def kernel_fingerprints(manifest: dict[str, Any], kernel_ids: Iterable[str] | None = None) -> dict[str, str]:
    """``JITFunction.cache_key`` of the manifest's kernels (its sources and the jitted functions it calls) by kernel
    id, computed in the order given (default: the manifest's, the order the recording first launched them; the key
    of a kernel can depend on which kernel sharing its callees was hashed first); a kernel that no longer resolves
    is left out."""
    from fusedsim.engine.kernel_specs import RecordedKernel, resolve_kernel

    out = {}
    for kid in manifest["kernels"] if kernel_ids is None else kernel_ids:
        entry = manifest["kernels"][kid]
        kernel = RecordedKernel(entry["module"], entry["qualname"], tuple(entry["arg_names"]), "{}",
                                source=entry.get("source", ""),
                                do_not_specialize=tuple(entry.get("do_not_specialize", ())))
        try:
            out[kid] = str(resolve_kernel(kernel).cache_key)
        except Exception:  # noqa: BLE001 - a kernel removed or renamed since the recording is simply not current
            continue
    return out


def run_digest(manifest: dict[str, Any], run: str) -> str:
    """A digest of what ``manifest`` recorded for ``run`` (its specialisations, with their kernels' identities)."""
    import hashlib

    specs = [manifest["specs"][n] for n in manifest["runs"][run]]
    body = [[manifest["kernels"][s["kernel"]], s["spec"]] for s in specs]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _run_kernels(manifest: dict[str, Any], run: str) -> set[str]:
    return {manifest["specs"][n]["kernel"] for n in manifest["runs"][run]}


def _kept(path: Path) -> bool:
    """Whether a cache file goes into an archive: a kernel's metadata and binary, its group, a built launcher."""
    name = path.name
    return name.startswith(GROUP_PREFIX) or name.endswith(KERNEL_SUFFIXES) or name.endswith(".so")


def write_archive(cache: Path, out: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Pack the Triton cache folder ``cache`` (filled by recording ``manifest``'s runs on this machine's GPU) into
    ``out`` (``.tar.xz``): the kernels' metadata and binaries (no intermediate IR), their groups, the launchers, and
    a ``meta.json`` with :func:`platform_stamp`, the manifest's runs and each kernel's fingerprint. Returns the
    metadata."""
    if not Path(cache).is_dir():
        raise ValueError(f"kernel cache {cache}: not a folder (record the runs on a GPU first)")
    meta = {"format": FORMAT, **platform_stamp(), "runs": {run: run_digest(manifest, run) for run in manifest["runs"]},
            "fingerprints": kernel_fingerprints(manifest)}
    files = sorted(p for p in Path(cache).glob("*/*") if p.is_file() and _kept(p))
    with tarfile.open(out, "w:xz", preset=9) as tar:
        data = json.dumps(meta, indent=0, sort_keys=True).encode()
        info = tarfile.TarInfo(META)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for path in files:
            name = f"{CACHE_PREFIX}{path.parent.name}/{path.name}"
            if path.name.startswith(GROUP_PREFIX):  # only the children that travel, by file name
                children = json.loads(path.read_text()).get("child_paths", {})
                kept = {c: Path(p).name for c, p in children.items() if _kept(Path(p))}
                body = json.dumps({"child_paths": kept}).encode()
                info = tarfile.TarInfo(name)
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
            else:
                tar.add(path, arcname=name)
    return meta


def relocate_groups(folder: Path, at: Path | None = None) -> int:
    """Point every group file of the Triton cache ``folder`` at the files beside it (Triton writes absolute paths,
    so a copied cache's groups name the original folder), as they will be once ``folder`` is moved to ``at``
    (default: where it is); a child that is not there is dropped from its group, and a group without its metadata
    file is removed (Triton then compiles that kernel). Returns the groups rewritten. Files are replaced
    atomically: processes reading the cache meanwhile see the old or the new."""
    at = Path(folder) if at is None else Path(at)
    rewritten = 0
    for group in Path(folder).glob(f"*/{GROUP_PREFIX}*"):
        try:
            children = json.loads(group.read_text()).get("child_paths", {})
        except (OSError, ValueError):
            continue
        names = {c: Path(p).name for c, p in children.items() if (group.parent / Path(p).name).exists()}
        moved = {c: str(at / group.parent.name / n) for c, n in names.items()}
        if moved == children:
            continue
        if not any(c.endswith(".json") for c in moved):
            group.unlink(missing_ok=True)
            continue
        tmp = group.with_name(f"{group.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"child_paths": moved}))
        os.replace(tmp, group)
        rewritten += 1
    return rewritten


@dataclass(frozen=True)
class InstallResult:
    """An archive unpacked into a cache: whether it was built for this platform, the manifest's runs it makes
    ready (recorded alike in both, every kernel's compiled form current), and the cache folders it added."""

    path: str
    platform_match: bool
    ready: frozenset[str]
    added: int


def bundled_archives() -> list[Any]:
    """The archives to install: the file named by ``FUSEDSIM_KERNEL_ARCHIVE`` (``none``: none), else the package's
    own (``fusedsim/data/kernels/*.tar.xz``)."""
    named = os.environ.get(ARCHIVE_ENV)
    if named:
        return [] if named.lower() == "none" else [Path(named)]
    try:
        folder = resources.files("fusedsim").joinpath("data", ARCHIVE_FOLDER)
        return sorted((f for f in folder.iterdir() if f.name.endswith(".tar.xz")), key=lambda f: f.name)
    except (OSError, FileNotFoundError):
        return []


def _read_meta(tar: tarfile.TarFile, source: str) -> dict[str, Any]:
    try:
        member = tar.extractfile(META)
        meta = json.loads(member.read()) if member is not None else None
    except (KeyError, ValueError):
        meta = None
    if not isinstance(meta, dict):
        raise ValueError(f"kernel archive {source}: no {META} (not written by fusedsim's recorder)")
    return meta


def _unpack(tar: tarfile.TarFile, cache: Path) -> int:
    """Extract the archive's cache folders that ``cache`` lacks, each moved in whole (never seen half-written),
    with its groups pointed at its new place. Returns the folders added."""
    added = 0
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fusedsim-unpack-") as tmp:
        for member in tar:
            folder, _, name = member.name.removeprefix(CACHE_PREFIX).partition("/")
            if (member.isfile() and member.name.startswith(CACHE_PREFIX) and folder and name and "/" not in name
                    and not folder.startswith(".") and not (cache / folder).exists()):
                tar.extract(member, tmp, filter="data")
        staged = Path(tmp) / CACHE_PREFIX.rstrip("/")
        if staged.is_dir():
            relocate_groups(staged, at=cache)  # the archive names children by file name: give them their paths
        for folder in sorted(staged.iterdir()) if staged.is_dir() else ():
            try:
                os.rename(folder, cache / folder.name)
                added += 1
            except OSError:  # another process installed it meanwhile
                pass
    return added


def install_archive(path: Any, cache: Path, manifest: dict[str, Any] | None,
                    stamp: dict[str, str] | None = None) -> InstallResult:
    """Unpack the archive at ``path`` (a path or a package resource) into the Triton cache folder ``cache``
    (folders already there are kept). ``ready``: the runs of ``manifest`` it makes ready on this machine; empty
    when the platform differs (:func:`platform_stamp`; ``stamp`` is this machine's, computed when None). Raises
    ValueError naming the file when it cannot be read."""
    source = str(path)
    try:
        with path.open("rb") as raw, tarfile.open(fileobj=raw, mode="r:xz") as tar:
            meta = _read_meta(tar, source)
            if meta.get("format") != FORMAT:
                return InstallResult(source, False, frozenset(), 0)
            stamp = platform_stamp() if stamp is None else stamp
            match = all(meta.get(k) == v for k, v in stamp.items())
            try:
                added = _unpack(tar, cache) if match else 0  # another platform's kernels would never be looked up
            except OSError as exc:  # the cache folder, not the archive: read-only, full
                raise ValueError(f"kernel cache {cache}: cannot take the kernels of {source} ({exc})") from None
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise ValueError(f"kernel archive {source}: cannot be read ({exc})") from None
    if not match or manifest is None:
        return InstallResult(source, match, frozenset(), added)
    runs = {run: digest for run, digest in meta.get("runs", {}).items()
            if run in manifest["runs"] and run_digest(manifest, run) == digest}
    recorded = meta.get("fingerprints", {})
    wanted = set().union(*(_run_kernels(manifest, run) for run in runs)) if runs else set()
    # in the manifest's order, as the recorder computed them: Triton 3.6 merges the globals of a kernel's jitted
    # callees into whichever kernel is hashed first, so two kernels sharing a callee hash differently in another
    # order (seen on the H200: SSIMULACRA2's two colour kernels, hashed alphabetically, matched nothing)
    now = kernel_fingerprints(manifest, [k for k in manifest["kernels"] if k in wanted])
    current = {k for k in wanted if k in now and recorded.get(k) == now[k]}
    return InstallResult(source, match, frozenset(r for r in runs if _run_kernels(manifest, r) <= current), added)


def install_archives(cache: Path, manifest: dict[str, Any] | None) -> list[InstallResult]:
    """Install every archive of :func:`bundled_archives` into ``cache`` (see :func:`install_archive`)."""
    archives = bundled_archives()
    if not archives:
        return []
    try:
        stamp = platform_stamp()
    except Exception:  # noqa: BLE001 - no GPU driver, no compiler: no archive can fit, the kernels are compiled
        return []
    return [install_archive(a, cache, manifest, stamp) for a in archives]


def unpack_package_kernels(cache: Path | None = None) -> int:
    """On a GPU process that scores without a warm-up (a Ray actor on a node of its own): unpack the package's
    archives that fit this platform into ``cache`` (default: Triton's cache folder) so that its kernels load
    instead of compiling; returns the folders added. Never raises: a failure only leaves Triton to compile."""
    if cache is None:
        from fusedsim.engine.warmup import triton_cache_dir

        cache = triton_cache_dir()
    try:
        return sum(r.added for r in install_archives(cache, None))
    except Exception:  # noqa: BLE001 - an unreadable archive or cache folder: the kernels are compiled as usual
        return 0


def ready_runs(results: Iterable[InstallResult]) -> frozenset[str]:
    """The manifest runs made ready by any of ``results``."""
    out: set[str] = set()
    for r in results:
        out |= r.ready
    return frozenset(out)
