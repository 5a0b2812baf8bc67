"""``fusedsim vmaf --feature psnr_hvs --feature ciede`` writes what libvmaf 3.2.0 writes.

The command is ``commands.txt``'s ``extra`` line of the ``k256x144_12b_mixed`` pair in ``refdata/vmaf-score``
(``-w 256 -h 144 -p 420 -b 12 -n --feature ... --threads 1 -q --json``) with only the two features built here;
its expected document is ``reference/k256x144_12b_mixed.json``, run ``extra``: every frame's ``psnr_hvs_y/_cb/_cr``,
``psnr_hvs`` and ``ciede2000``, and their pooled values (an even size: ciede2000 is deterministic there).
"""

from __future__ import annotations

import json
import lzma

from fusedsim.cli import main as cli_main

PAIR = "k256x144_12b_mixed"
COLUMNS = ("psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs", "ciede2000")


def test_cli_writes_libvmaf_values(refdata, tmp_path):
    score = refdata / "vmaf-score"
    clips = {}
    for name in ("k256x144_12b_ref", PAIR):
        clips[name] = tmp_path / f"{name}.yuv"
        clips[name].write_bytes(lzma.open(score / "clips" / f"{name}.yuv.xz").read())
    out = tmp_path / "out.json"
    assert cli_main.main(["vmaf", "-r", str(clips["k256x144_12b_ref"]), "-d", str(clips[PAIR]), "-w", "256",
                          "-h", "144", "-p", "420", "-b", "12", "-n", "--feature", "psnr_hvs", "--feature", "ciede",
                          "--threads", "1", "-q", "--json", "-o", str(out)]) == 0
    got = json.loads(out.read_text())
    extra = json.loads((score / "reference" / f"{PAIR}.json").read_text())["runs"]["extra"]
    for name in COLUMNS:
        assert [frame["metrics"][name] for frame in got["frames"]] == extra["metrics"][name], name
        assert got["pooled_metrics"][name] == extra["pooled_metrics"][name], name
