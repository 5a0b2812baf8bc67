"""The shared progress helper (fusedsim.cli.progress.Progress): a line every few seconds with the rate and the ETA
when standard error is not a terminal, a tqdm bar when it is, nothing when disabled; and the commands that use it."""

from __future__ import annotations

import io
import re

import pytest
from _pair_images import write_images

import fusedsim.cli.progress as progress_module
from fusedsim.cli.main import main
from fusedsim.cli.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def clock(monkeypatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(progress_module, "_now", c)
    return c


def test_lines_when_not_a_terminal(clock):
    out = io.StringIO()  # not a TTY
    with Progress(10, desc="demo", unit="pair", file=out, interval_s=5) as progress:
        for _ in range(4):  # one pair every 1.25 s: a line once 5 s have passed
            clock.t += 1.25
            progress.update()
        assert out.getvalue() == "demo: 4/10 pairs (40%), 0.8 pairs/s, elapsed 00:05, ETA 00:07\n"
        for _ in range(3):  # 3.75 s more: under the interval, no line
            clock.t += 1.25
            progress.update()
        assert out.getvalue().count("\n") == 1
        clock.t += 1.25
        progress.update()  # 10 s, 8 pairs: 0.8 pairs/s, 2 left: 2.5 s, shown as 00:02
    lines = out.getvalue().splitlines()
    assert lines[1] == "demo: 8/10 pairs (80%), 0.8 pairs/s, elapsed 00:10, ETA 00:02"
    assert lines[2] == "demo: 8/10 pairs (80%), 0.8 pairs/s, elapsed 00:10"  # the totals line at the end
    assert "\r" not in out.getvalue()


def test_short_work_and_disabled_write_nothing(clock):
    out = io.StringIO()
    with Progress(3, desc="demo", file=out) as progress:
        progress.update(3)
    with Progress(3, desc="demo", file=out, enabled=False, interval_s=0) as progress:
        clock.t += 60
        progress.update(3)
    assert out.getvalue() == ""


def test_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    with Progress(10, desc="demo", unit="pair", file=out) as progress:
        progress.update(3)
        progress.write("a result line", file=out)
    text = out.getvalue()
    assert "\r" in text and "demo" in text and "3/10" in text and "pair/s" in text  # tqdm: rate, ETA after "<"
    assert re.search(r"\[\d\d:\d\d<(\d\d:\d\d|\?)", text)
    assert "a result line\n" in text


@pytest.mark.parametrize("command", ["compare", "sweep", "batch", "bench"])
def test_commands_report_progress_lines(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(progress_module, "LINE_INTERVAL_S", 0.0)  # a line per item
    monkeypatch.setenv("FUSEDSIM_CACHE_DIR", str(tmp_path / "cache"))
    images = write_images(tmp_path, refs=1, dists=2)
    ref, dists = str(tmp_path / "r0.png"), [str(tmp_path / d) for d in images["r0.png"]]
    if command == "compare":
        argv, unit = ["compare", ref, *dists, "--metric", "psnr"], "images"
    elif command == "sweep":
        argv, unit = ["sweep", ref, "--codec", "jpeg", "--quality", "50,90", "--metric", "psnr"], "encodings"
    elif command == "batch":
        (tmp_path / "pairs.csv").write_text("ref,dist\n" + "".join(f"r0.png,{d}\n" for d in images["r0.png"]))
        argv, unit = ["batch", str(tmp_path / "pairs.csv"), "-o", str(tmp_path / "out.csv"), "--metric", "psnr"], "pairs"
    else:
        argv, unit = ["bench", "--metric", "psnr", "--sizes", "16,24", "--repeats", "1"], "measurements"
    assert main([*argv, "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"^{command}: 1/2 {unit} \(50%\), [\d.e+]+ {unit}/s, elapsed \d\d:\d\d, ETA \d\d:\d\d$", err,
                     re.MULTILINE), err
    assert re.search(rf"^{command}: 2/2 {unit} \(100%\)", err, re.MULTILINE), err
    if command == "batch":
        argv.append("--overwrite")
    assert main([*argv, "--device", "cpu", "--quiet"]) == 0  # every one of them takes --quiet
    assert f"{command}: 1/2" not in capsys.readouterr().err
