"""numba's parallel kernels launched from several Python threads (fusedsim.core.cpu.parallel)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_parallel_kernels_from_several_threads_under_the_workqueue_layer():
    """numba's workqueue threading layer aborts the process when two threads launch parallel kernels at once;
    fusedsim's launches are serialised until the layer is known to be thread-safe (a fresh process forced onto
    workqueue: it must finish, not abort)."""
    script = (
        "import threading, torch, fusedsim, numba\n"
        "x = torch.randint(0, 256, (1, 3, 64, 64), dtype=torch.uint8); y = x.flip(-1)\n"
        "want = fusedsim.dssim(x, y)\n"
        "assert numba.threading_layer() == 'workqueue'\n"
        "got = []\n"
        "def work():\n"
        "    for _ in range(10):\n"
        "        got.append(bool(torch.equal(fusedsim.dssim(x, y), want)))\n"
        "threads = [threading.Thread(target=work) for _ in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(len(got), all(got))\n"
    )
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["40", "True"]
