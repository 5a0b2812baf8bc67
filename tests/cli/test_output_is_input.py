"""Data loss: an output that is also an input (the same path, a symlink or a hard link to it) is refused before any
work, by every command and every output option, with exit status 2 and a message naming the argument and both
paths; the input is left byte for byte as it was."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _pair_images import write_images

from fusedsim.cli.main import main
from fusedsim.cli import outputs

SRC = Path(__file__).resolve().parents[2] / "src"


def _y4m(path: Path, shade: int, w: int = 32, h: int = 32, frames: int = 2) -> Path:
    frame = bytes([shade]) * (w * h) + bytes([128]) * (w * h // 2)
    path.write_bytes(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420\n".encode() + b"".join(b"FRAME\n" + frame
                                                                                     for _ in range(frames)))
    return path


def _link(kind: str, target: Path, name: Path) -> Path:
    if kind == "hard":
        os.link(target, name)
    else:
        name.symlink_to(target)
    return name


def _snapshot(*paths: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in paths}


def _refused(rc: int, err: str, option: str, before: dict[Path, bytes]) -> None:
    assert rc == 2, err
    assert option in err and "is the input" in err, err
    for path, data in before.items():
        assert path.read_bytes() == data, f"{path} was changed"


# --------------------------------------------------------------------------------------------------- the helper
@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hard"])
def test_helper_finds_the_same_file(tmp_path, monkeypatch, how):
    src = tmp_path / "a.png"
    src.write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    out = {"same": str(src), "relative": "./sub/../a.png", "symlink": str(_link("sym", src, tmp_path / "s.png")),
           "hard": str(_link("hard", src, tmp_path / "h.png"))}[how]
    (tmp_path / "sub").mkdir()
    with pytest.raises(ValueError, match=r"-o .* is the input REF .*a\.png"):
        outputs.refuse_outputs_that_are_inputs([outputs.Output(out, "png", "-o")], [("REF", str(src))])


def test_helper_accepts_other_files_and_stdin(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    (tmp_path / "b").write_bytes(b"x")  # same bytes, another file
    outs = [outputs.Output(str(tmp_path / "b"), "png", "-o"), outputs.Output(str(tmp_path / "new"), "x", "--json")]
    outputs.refuse_outputs_that_are_inputs(outs, [("REF", str(tmp_path / "a")), ("DIST", "-")])


# --------------------------------------------------------------------------------------------------- image commands
@pytest.mark.parametrize("kind", ["same", "symlink", "hard"])
def test_diffmap_output_is_an_input(tmp_path, capsys, kind):
    write_images(tmp_path, refs=1, dists=1)
    ref, dist = tmp_path / "r0.png", tmp_path / "d00.png"
    out = {"same": ref, "symlink": tmp_path / "s.png", "hard": tmp_path / "h.png"}[kind]
    if kind != "same":
        _link("hard" if kind == "hard" else "sym", dist if kind == "hard" else ref, out)
    before = _snapshot(ref, dist)
    rc = main(["diffmap", str(ref), str(dist), "-o", str(out)])
    _refused(rc, capsys.readouterr().err, "-o", before)


@pytest.mark.parametrize("option", ["-o", "--plot"])
def test_sweep_output_is_a_reference(tmp_path, capsys, option):
    write_images(tmp_path, refs=1, dists=1)
    ref = tmp_path / "r0.png"
    other = tmp_path / "table.tsv" if option == "--plot" else tmp_path / "plot.png"
    args = ["sweep", str(ref), "--codec", "jpeg", "--quality", "50"]
    args += [option, str(_link("hard", ref, tmp_path / "h.png"))]
    before = _snapshot(ref)
    rc = main(args + (["-o", str(other)] if option == "--plot" else []))
    _refused(rc, capsys.readouterr().err, option, before)


@pytest.mark.parametrize("command", ["score", "compare"])
def test_stdout_appended_to_an_input_is_refused(tmp_path, command):
    write_images(tmp_path, refs=1, dists=1)
    ref, dist = tmp_path / "r0.png", tmp_path / "d00.png"
    before = _snapshot(ref, dist)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with open(dist, "ab") as stdout:
        proc = subprocess.run([sys.executable, "-m", "fusedsim.cli.main", command, str(ref), str(dist)],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    _refused(proc.returncode, proc.stderr, "standard output", before)


# --------------------------------------------------------------------------------------------------- batch
@pytest.mark.parametrize("target", ["table", "image"])
def test_batch_overwrite_with_a_hard_link_to_an_input(tmp_path, capsys, target):
    images = write_images(tmp_path, refs=1, dists=2)
    table = tmp_path / "pairs.csv"
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([("ref", "dist"), *(("r0.png", d) for d in images["r0.png"])])
    out = _link("hard", table if target == "table" else tmp_path / "d00.png", tmp_path / "results.csv")
    before = _snapshot(table, tmp_path / "r0.png", tmp_path / "d00.png")
    rc = main(["batch", str(table), "-o", str(out), "--overwrite", "--quiet", "--device", "cpu"])
    _refused(rc, capsys.readouterr().err, "-o", before)


# --------------------------------------------------------------------------------------------------- vmaf
@pytest.mark.parametrize("option", ["-o", "--xml", "--json", "--csv"])
@pytest.mark.parametrize("kind", ["same", "symlink", "hard"])
def test_vmaf_output_is_a_clip(tmp_path, capsys, option, kind):
    ref, dist = _y4m(tmp_path / "v.y4m", 100), _y4m(tmp_path / "d.y4m", 110)
    out = {"same": ref, "symlink": tmp_path / "o.json", "hard": tmp_path / "o.xml"}[kind]
    if kind != "same":
        _link("hard" if kind == "hard" else "sym", dist, out)
    before = _snapshot(ref, dist)
    rc = main(["vmaf", str(ref), str(dist), "-n", "-q", "--device", "cpu", option, str(out)])
    _refused(rc, capsys.readouterr().err, option, before)


@pytest.mark.parametrize("which", ["pairs file", "REF", "DIST", "other pair's REF"])
def test_vmaf_pairs_output_is_an_input(tmp_path, capsys, which):
    ref, dist = _y4m(tmp_path / "v.y4m", 100), _y4m(tmp_path / "d.y4m", 110)
    ref2, dist2 = _y4m(tmp_path / "v2.y4m", 90), _y4m(tmp_path / "d2.y4m", 95)
    pairs = tmp_path / "pairs.txt"
    out = {"pairs file": pairs, "REF": ref, "DIST": dist, "other pair's REF": ref2}[which]
    pairs.write_text(f"{ref} {dist} {out}\n{ref2} {dist2} {tmp_path / 'o2.xml'}\n")
    before = _snapshot(pairs, ref, dist, ref2, dist2)
    rc = main(["vmaf", "--pairs", str(pairs), "-n", "-q", "--device", "cpu"])
    _refused(rc, capsys.readouterr().err, "--pairs line 1", before)


def test_vmaf_output_is_the_file_stdin_reads(tmp_path, capsys, monkeypatch):
    ref, dist = _y4m(tmp_path / "v.y4m", 100), _y4m(tmp_path / "d.y4m", 110)
    before = _snapshot(ref, dist)
    with open(dist) as stdin:  # fusedsim vmaf v.y4m - --json d.y4m < d.y4m
        monkeypatch.setattr(sys, "stdin", stdin)
        rc = main(["vmaf", str(ref), "-", "-n", "-q", "--device", "cpu", "--json", str(dist)])
    _refused(rc, capsys.readouterr().err.replace("is the file standard input", "is the input"), "--json", before)
