"""Decode workers die with the process that reads their results (issue 38): a SIGKILLed ``batch --decoder
processes`` left its fork server, resource tracker and workers alive, each keeping the others alive (the workers
hold the fork server's liveness pipe, the fork server is the workers' parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path

    import numpy as np
    from PIL import Image

    from fusedsim.engine.batch_pairs import PairTask, plan
    from fusedsim.engine.decode_workers import decode_in_processes


    def main() -> None:
        folder = Path(sys.argv[1])
        rng = np.random.default_rng(0)
        for i in range(40):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i}.png")
        tasks = plan(PairTask(i, str(folder / "0.png"), str(folder / f"{i}.png")) for i in range(1, 40))
        pairs = decode_in_processes(tasks, workers=2, prefetch=4)
        next(pairs)
        print("READY", flush=True)
        time.sleep(300)


    if __name__ == "__main__":
        main()
""")


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[1]), fields[0]


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                children.setdefault(info[0], []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie is dead: only its exit status is left to collect)."""
    return {pid for pid in pids if (info := _stat(pid)) is not None and info[1] != "Z"}


def test_sigkill_of_the_consumer_ends_every_worker_process(tmp_path):
    script = tmp_path / "consumer.py"
    script.write_text(SCRIPT)
    (tmp_path / "images").mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "images")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    survivors: set[int] = set()
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read() if proc.poll() is not None else line
        family = _descendants(proc.pid)
        assert len(family) >= 3  # the fork server (or spawned workers), the resource tracker, the workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _alive(family) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = _alive(family)
        assert not survivors, f"still running 10 s after the consumer was killed: {sorted(survivors)}"
    finally:
        for pid in survivors | ({proc.pid} if proc.poll() is None else set()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_watch_consumer_exits_when_the_consumer_dies(pidfd):
    """Both ways of noticing a dead consumer: its pidfd, and the portable polling of its pid."""
    consumer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    code = textwrap.dedent(f"""
        import time
        from fusedsim.engine import decode_workers
        if not {pidfd}:
            decode_workers._wait_pidfd = lambda pid: False
        decode_workers.watch_consumer({consumer.pid})
        print("WATCHING", flush=True)
        time.sleep(60)
    """)
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "WATCHING"
        assert worker.poll() is None
        consumer.kill()
        consumer.wait(10)
        assert worker.wait(5) == 1
    finally:
        for proc in (consumer, worker):
            if proc.poll() is None:
                proc.kill()
