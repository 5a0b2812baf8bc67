"""A real two-node Ray cluster on one machine (issue 36): ``ray start --head`` and a second ``ray start --address``
(separate raylets, object stores and resource sets; GPU 0 and GPU 1 on a machine with two GPUs, else one CPU
each), ``fusedsim batch --engine ray --address`` as a separate driver process shipping its code to the nodes, and
the second node killed mid-run: its in-flight pairs are scored on the head's actor, every pair once.

About 20 s on 2 cores (two nodes start, the driver connects); in CI since the node crash kills the node's workers
too (before, its actor outlived the "crash" and the test was opt-in). Expected PSNR values come from numpy in float64
(independent of the package; 1e-6 relative: float32 accumulation)."""

from __future__ import annotations

import csv
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

pytestmark = [pytest.mark.xdist_group("ray")]

SIZE = 320


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # --block: the node lives as long as this process, which stops it on SIGTERM (no `ray stop`, which would stop
    # every Ray instance of the machine)
    # its own session: killing its process group is a node crash (raylet, object store and workers at once)
    with open(log, "w") as out:
        node = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--block", *args,
                                 "--disable-usage-stats"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_for(lambda: _STARTED in log.read_text() or node.poll() is not None, 120, f"ray start {' '.join(args)}")
        assert node.poll() is None, log.read_text()[-2000:]
    except BaseException:
        _stop(node)
        raise
    return node


_STARTED = "block forever"  # what `ray start --block` prints once its node has joined the cluster


def _stop(node: subprocess.Popen) -> None:
    node.send_signal(signal.SIGTERM)  # `ray start --block` stops its node's processes
    try:
        node.wait(20)
    except subprocess.TimeoutExpired:
        pass
    _crash(node)  # whatever of the node is left, its workers included
    node.wait()


@pytest.fixture
def two_nodes(tmp_path):
    pytest.importorskip("ray")
    gpus = torch.cuda.device_count() >= 2
    # Ray 2.60 turns token authentication on for a new head; every node and driver must agree
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    if gpus:
        env.pop("TRITON_INTERPRET", None)
    temp = tempfile.mkdtemp(prefix="fsr-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    per_node = ["--num-gpus", "1"] if gpus else ["--num-gpus", "0"]
    head = _ray_start(["--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard=false",
                       "--temp-dir", temp, "--resources", '{"head": 1}', *per_node],
                      {**env, **({"CUDA_VISIBLE_DEVICES": "0"} if gpus else {})}, tmp_path / "head.log")
    nodes = [head]
    try:
        address = f"127.0.0.1:{port}"
        other = _ray_start(["--address", address, "--num-cpus", "1", "--resources", '{"other": 1}', *per_node],
                           {**env, **({"CUDA_VISIBLE_DEVICES": "1"} if gpus else {})}, tmp_path / "other.log")
        nodes.append(other)
        yield address, env, other, gpus
    finally:
        for node in reversed(nodes):
            if node.poll() is None:
                _stop(node)


def _session(node: subprocess.Popen) -> list[int]:
    """The processes of ``node``'s session: its raylet, object store and workers. Ray starts each worker in a process
    group of its own, so killing the node's group would leave its actor running."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == node.pid:
                    pids.append(int(entry))
            except OSError:  # gone meanwhile
                pass
    return pids


def _crash(node: subprocess.Popen) -> None:
    """Kill every process of ``node`` at once, as a machine that goes down."""
    for pid in _session(node):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_for(ready, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            raise TimeoutError(f"{what} did not start within {seconds} s")
        time.sleep(0.2)


def _psnr(ref: Path, dist: Path) -> float:
    a = np.asarray(Image.open(ref), dtype=np.float64)
    b = np.asarray(Image.open(dist), dtype=np.float64)
    return 10 * math.log10(255**2 / np.mean((a - b) ** 2))


def test_second_node_killed_mid_run(tmp_path, two_nodes):
    address, env, other, gpus = two_nodes
    rng = np.random.default_rng(3)
    pairs = []
    for i in range(600 if gpus else 120):  # a GPU scores 120 such pairs before the node could be killed
        a = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
        Image.fromarray(a).save(tmp_path / f"r{i}.png")
        Image.fromarray(np.clip(a.astype(int) + rng.integers(-9, 10, a.shape), 0, 255).astype(np.uint8)).save(
            tmp_path / f"d{i}.png")
        pairs.append((f"r{i}.png", f"d{i}.png"))
    with open(tmp_path / "pairs.csv", "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *pairs])
    out = tmp_path / "out.csv"
    metric = "psnr,ssim"
    cmd = [sys.executable, "-m", "fusedsim", "batch", str(tmp_path / "pairs.csv"), "-o", str(out), "--metric",
           metric, "--engine", "ray", "--address", address, "--quiet"]
    cmd += [] if gpus else ["--device", "cpu", "--workers", "2"]
    driver = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: out.exists() and out.read_text().count("\n") >= 6 or driver.poll() is not None, 300,
              "the first rows")
    assert driver.poll() is None, "the run ended before the node could be killed: give it more pairs"
    _crash(other)  # the second node crashes: raylet, object store, actor, decoding tasks
    _, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    assert "died" in err  # the driver said which actor it lost
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert Counter((r["ref"], r["dist"]) for r in rows) == Counter(pairs)  # none lost, none twice
    for r in rows:
        assert not r["error"]
        assert float(r["psnr"]) == pytest.approx(_psnr(tmp_path / r["ref"], tmp_path / r["dist"]), rel=1e-6)
