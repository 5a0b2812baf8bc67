"""Cache files (``ladder-*.json``, ``bench-*.json``) are validated on load: a malformed one is ignored with a
warning naming it, never a crash of ``score``; a cache that cannot be written says so (issue 38)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from engine_pairs import image_pair

from fusedsim.engine import Scorer
from fusedsim.engine.bench_cache import BenchCache, Measurement, load_bench_cache, save_bench_cache
from fusedsim.engine.ladder import Step, record_failure, recorded_failure
from fusedsim.engine.machine import CacheFileWarning, CacheWriteError, cache_path, machine_identity

BAD_LADDERS = [
    "{not json",
    "[1, 2]",
    json.dumps({"failures": []}),
    json.dumps({"failures": {"ssim|cpu full": []}}),
    json.dumps({"failures": {"ssim|cpu full": {"c3": [1, "x"]}}}),
    json.dumps({"failures": {"ssim|cpu full": {"c3": [{"pixels": "big"}]}}}),
    json.dumps({"failures": {"ssim|cpu strip": {"c3": [{"pixels": 1, "rows": None}]}}}),
    "\xff\xfe garbage",
]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1", errors="replace"))


@pytest.mark.parametrize("text", BAD_LADDERS)
def test_malformed_ladder_file_is_ignored_with_a_warning(text):
    path = cache_path("ladder")
    _write(path, text)
    with pytest.warns(CacheFileWarning, match=path.name):
        assert recorded_failure("ssim", Step("cpu", "full"), 100, 100, 3) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheFileWarning)
        assert recorded_failure("ssim", Step("cpu", "strip", 64), 100, 100, 3) is None
    # the next failure replaces the bad file with a valid one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheFileWarning)
        record_failure("ssim", Step("cpu", "full"), 100, 100, 3, "out of memory")
    assert json.loads(path.read_text())["failures"]["ssim|cpu full"]["c3"][0]["pixels"] == 10000
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheFileWarning)
        assert recorded_failure("ssim", Step("cpu", "full"), 100, 100, 3) is not None


@pytest.mark.parametrize("text", BAD_LADDERS)
def test_score_runs_with_a_malformed_ladder_file(text):
    _write(cache_path("ladder"), text)
    ref, dist = image_pair(64, 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheFileWarning)
        result = Scorer(["ssim", "psnr"], device="cpu").score(ref, dist)
    assert set(result.values) == {"ssim", "psnr"}


def test_a_bad_file_is_reported_once():
    path = cache_path("ladder")
    _write(path, "{not json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            recorded_failure("ssim", Step("cpu", "full"), 100, 100, 3)
    assert sum(issubclass(w.category, CacheFileWarning) for w in caught) == 1


@pytest.mark.parametrize("measurement", [
    {"metric": "ssim", "backend": "cpu full", "height": "a", "width": 1, "channels": 3, "seconds": 1.0,
     "peak_bytes": 1},
    {"metric": "ssim", "backend": "cpu full", "height": 8, "width": 8, "channels": 3, "seconds": "fast",
     "peak_bytes": 1},
    {"metric": 5, "backend": "cpu full", "height": 8, "width": 8, "channels": 3, "seconds": 1.0, "peak_bytes": 1},
    {"metric": "ssim", "backend": "cpu full", "height": 8, "width": 8, "channels": 3, "seconds": -1.0,
     "peak_bytes": 1},
    [1, 2, 3],
])
def test_malformed_bench_cache_is_ignored_with_a_warning(measurement):
    ident = machine_identity()
    path = cache_path("bench", ident)
    good = BenchCache(ident, 1000.0, [Measurement("ssim", "cpu full", 8, 8, 3, 1e-3, 100)])
    data = good.to_dict()
    data["measurements"].append(measurement)
    _write(path, json.dumps(data))
    with pytest.warns(CacheFileWarning, match=path.name):
        assert load_bench_cache(ident, now=1000.0) is None


def test_bench_cache_of_another_version_is_ignored_quietly():
    ident = machine_identity()
    _write(cache_path("bench", ident), json.dumps({"version": 99}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_bench_cache(ident, now=0.0) is None


def _unwritable(tmp_path: Path, monkeypatch) -> Path:
    """A cache folder that cannot be created, even by root: its parent is a regular file."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    monkeypatch.setenv("FUSEDSIM_CACHE_DIR", str(blocker / "cache"))
    return blocker / "cache"


def test_saving_the_bench_cache_to_an_unwritable_folder_raises(tmp_path, monkeypatch):
    folder = _unwritable(tmp_path, monkeypatch)
    with pytest.raises(CacheWriteError, match="could not save") as info:
        save_bench_cache(BenchCache(machine_identity(), 1000.0))
    assert str(folder) in str(info.value)


def test_bench_command_does_not_report_an_unsaved_cache(tmp_path, monkeypatch, capsys):
    from fusedsim.cli.main import main

    _unwritable(tmp_path, monkeypatch)
    code = main(["bench", "--metric", "psnr", "--sizes", "24", "--repeats", "1", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code != 0 and "written to" not in out and "could not save" in err


def test_ladder_record_in_an_unwritable_folder_warns_and_scoring_goes_on(tmp_path, monkeypatch):
    _unwritable(tmp_path, monkeypatch)
    with pytest.warns(CacheFileWarning, match="could not save"):
        record_failure("ssim", Step("cpu", "full"), 100, 100, 3, "out of memory")
    assert not Path(os.environ["FUSEDSIM_CACHE_DIR"]).exists()


def test_the_ladder_is_read_again_only_when_its_file_changes(tmp_path, monkeypatch):
    """Every group a batch scores looks the ladder up: a file read per call cost ~5 % of the scoring thread in a
    profile; a failure recorded by another process must still be seen at once."""
    from fusedsim.engine import ladder as ladder_module

    monkeypatch.setenv("FUSEDSIM_CACHE_DIR", str(tmp_path))
    step = ladder_module.Step("cuda", "full")
    assert ladder_module.recorded_failure("ssim", step, 64, 64, 3) is None
    reads = []
    real = ladder_module.load_json
    monkeypatch.setattr(ladder_module, "load_json", lambda *a: reads.append(a) or real(*a))
    for _ in range(3):
        assert ladder_module.recorded_failure("ssim", step, 64, 64, 3) is None
    assert reads == []  # unchanged (absent) file: no read
    ladder_module.record_failure("ssim", step, 64, 64, 3, "out of memory")
    assert ladder_module.recorded_failure("ssim", step, 64, 64, 3)["reason"] == "out of memory"
    ladder_module.recorded_failure("ssim", step, 64, 64, 3)
    assert len([a for a in reads if a[0].name.startswith("ladder-")]) == 2  # the write's own read, then one
