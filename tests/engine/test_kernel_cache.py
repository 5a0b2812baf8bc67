"""The driver's Triton kernel cache shipped with a Ray job (issue 36: fresh nodes load kernels instead of compiling
them): what is shipped and when, and that an actor on a Ray worker finds its node's copy."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fusedsim.engine.kernel_cache import SHIPPED_ENV, adopt_shipped_cache, cache_to_ship
from fusedsim.engine.ray_batch import job_runtime_env
from fusedsim.engine.warmup import leave_markers


def _warm(folder: Path, metrics=("psnr",), height=24, width=40) -> None:
    """Markers as `fusedsim warmup` leaves them on a GPU, and a kernel file."""
    for metric in metrics:
        leave_markers(metric, height, width, None, ["one"])
    (folder / "HASH").mkdir(parents=True, exist_ok=True)
    (folder / "HASH" / "kernel.cubin").write_bytes(b"\0" * 4096)


def test_only_a_cache_warm_for_the_metrics_and_small_enough_is_shipped(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    folder, why = cache_to_ship(["psnr"], 24, 40)
    assert folder is None and "lacks psnr at 40x24" in why and "fusedsim warmup" in why
    _warm(tmp_path / "cache")
    assert cache_to_ship(["psnr"], 24, 40) == (tmp_path / "cache", "")
    folder, why = cache_to_ship(["psnr", "ssim"], 24, 40)
    assert folder is None and "lacks ssim" in why  # every metric of the run, not some
    folder, why = cache_to_ship(["psnr"], 24, 40, limit_bytes=1000)
    assert folder is None and "more than" in why and "a folder of its own" in why


def test_the_job_ships_the_folder_and_stops_forwarding_the_drivers_path(tmp_path):
    env = job_runtime_env(False, {"TRITON_CACHE_DIR": "/driver/cache"}, tmp_path / "kernels")
    assert env["py_modules"] == [str(tmp_path / "kernels")]
    assert env["env_vars"] == {SHIPPED_ENV: "kernels"}  # the driver's path means nothing on another node
    assert job_runtime_env(False, {"TRITON_CACHE_DIR": "/shared/triton"}) == {
        "env_vars": {"TRITON_CACHE_DIR": "/shared/triton"}}  # not shipped: forwarded as before
    shipped = job_runtime_env(True, {}, tmp_path / "kernels")["py_modules"]
    assert shipped[1:] == [str(tmp_path / "kernels")] and shipped[0].endswith("fusedsim")


def test_a_worker_adopts_the_shipped_copy_only_when_it_finds_it(tmp_path):
    copy = tmp_path / "pkg" / "kernels"
    (copy / "fusedsim-warm").mkdir(parents=True)
    # Triton's group files name the driver's folder: on another node those paths do not exist, so the copy's
    # groups must be pointed at the copy, or every kernel in it would be compiled again
    (copy / "KERNEL").mkdir()
    (copy / "KERNEL" / "k.json").write_text("{}")
    driver_path = "/driver/home/.triton/cache/KERNEL/k.json"
    (copy / "KERNEL" / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.json": driver_path}}))
    environ = {SHIPPED_ENV: "kernels"}
    assert adopt_shipped_cache([str(tmp_path / "other"), str(tmp_path / "pkg")], environ) == copy
    assert environ["TRITON_CACHE_DIR"] == str(copy)
    group = json.loads((copy / "KERNEL" / "__grp__k.json").read_text())
    assert group == {"child_paths": {"k.json": str(copy / "KERNEL" / "k.json")}}
    assert adopt_shipped_cache([str(tmp_path)], {SHIPPED_ENV: "kernels"}) is None  # not on the path
    (tmp_path / "bare" / "kernels").mkdir(parents=True)  # a folder of that name that is no warmed cache
    assert adopt_shipped_cache([str(tmp_path / "bare")], {SHIPPED_ENV: "kernels"}) is None
    environ = {"TRITON_CACHE_DIR": "/mine"}
    assert adopt_shipped_cache([str(tmp_path / "pkg")], environ) is None and environ == {"TRITON_CACHE_DIR": "/mine"}


def test_the_cli_ships_only_to_a_cluster_and_only_when_asked(tmp_path, monkeypatch):
    from fusedsim.cli.batch import kernels_to_ship
    from fusedsim.cli.pair_table import read_pairs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    _warm(tmp_path / "cache")
    Image.fromarray(np.zeros((24, 40, 3), dtype=np.uint8)).save(tmp_path / "r.png")
    (tmp_path / "pairs.csv").write_text("ref,dist\nr.png,r.png\n")
    table = read_pairs(tmp_path / "pairs.csv")
    args = argparse.Namespace(engine="ray", address="10.0.0.1:6379", ship_kernels="auto", device="auto", quiet=True)
    assert kernels_to_ship(args, table, ["psnr"], {}) == tmp_path / "cache"
    for changed in ({"ship_kernels": "never"}, {"address": None}, {"address": "local"}, {"device": "cpu"},
                    {"engine": "local"}):
        assert kernels_to_ship(argparse.Namespace(**{**vars(args), **changed}), table, ["psnr"], {}) is None
    assert kernels_to_ship(args, table, ["ssim"], {}) is None  # not warm for this run's metrics


_ON_A_WORKER = r"""
import json, os, sys
from pathlib import Path
import ray
from fusedsim.engine.ray_batch import job_runtime_env
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR",
         runtime_env=job_runtime_env(False, {"TRITON_CACHE_DIR": "/driver/only"}, Path(sys.argv[1])))
from fusedsim.engine.ray_actor import ScoringWorker
actor = ray.remote(num_cpus=1)(ScoringWorker).remote(["psnr"], ["psnr"], "cpu", "auto")
info = ray.get(actor.ready.remote())
cache = info["kernel_cache"]
print(json.dumps({"cache": cache, "kernel": (Path(cache) / "HASH" / "kernel.cubin").stat().st_size if cache else None}))
ray.shutdown()
"""


@pytest.mark.xdist_group("ray")
def test_an_actor_on_a_ray_worker_uses_its_nodes_copy_of_the_shipped_cache(tmp_path):
    """Ray unpacks ``py_modules`` folders on each node under their own name, on the workers' path: the actor finds
    the copy there and points Triton at it before it builds its scorer (a separate driver process, as a run is)."""
    pytest.importorskip("ray", reason="the Ray engine needs ray (pip install 'fusedsim[ray]')")
    cache = tmp_path / "kernels"
    (cache / "fusedsim-warm").mkdir(parents=True)
    (cache / "HASH").mkdir()
    (cache / "HASH" / "kernel.cubin").write_bytes(b"\0" * 4096)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    out = subprocess.run([sys.executable, "-c", _ON_A_WORKER, str(cache)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cache"].endswith("/kernels") and not got["cache"].startswith(str(tmp_path))  # the node's copy
    assert got["kernel"] == 4096
