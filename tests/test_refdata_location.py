"""README: the parity tests read the reference data from FUSEDSIM_REFDATA when it is set (else ../shared/refdata
beside the checkout), and are skipped, naming the folder, when it is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_fusedsim_refdata_points_the_parity_tests(tmp_path):
    missing = tmp_path / "no-refdata-here"
    env = {**os.environ, "FUSEDSIM_REFDATA": str(missing)}
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/families/registration/test_warp.py", "-k", "test_scaling_and_squaring_fixture"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"reference data folder not found at {missing} (set FUSEDSIM_REFDATA)" in run.stdout
