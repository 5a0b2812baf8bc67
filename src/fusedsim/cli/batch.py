"""``fusedsim batch PAIRS -o OUT``: score every pair of a table, unattended, without ever losing a finished row.

Building the parser imports neither torch nor a metric; ``run`` imports them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from typing import Any

from fusedsim.cli.common import (DEFAULT_METRICS, chosen_metrics, metric_table, parse_device, parse_image_metric,
                                 parse_memory)
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param
from fusedsim.core.device import DEVICE_HELP

DESCRIPTION = """\
Score many image pairs listed in a table and write one row per pair.

PAIRS is a .csv, .tsv or .parquet table with a reference column (ref,
reference or ref_path) and a distorted column (dist, distorted or
dist_path); relative paths are read from the table's folder. Other columns
are copied to the output.

OUT (.csv, .tsv, .jsonl or .parquet) gets the input columns, one column per
metric output (ssim, butteraugli.max_norm, ...), the backend used and the
error (empty when the pair was scored). In a .tsv, tabs, line breaks and
backslashes inside cells are written as \\t, \\n, \\r and \\\\ (one row per
line); in a .parquet the input columns keep their types (a CSV/TSV table's
as pyarrow.csv infers them). Rows are written as they finish, in finishing
order: a killed run keeps every finished row and --resume skips them (a
pair listed k times is done once k rows carry it; failed rows count as
finished). Parquet's durable log is OUT.log.jsonl beside it: the Parquet
file is written from it at the end of every run, and the log is removed when
every pair is done. A run holds a lock (OUT.lock beside OUT) from start to
end: a second run on the same OUT, --resume too, fails at once naming the
process that holds it. OUT may not be the table or one of its images (a
hard link or symlink to one included).

A bad pair (missing or unreadable file, different sizes, too small for a
metric) gets NaN and its error message, and the run goes on; --fail-fast
stops at the first one. Pairs sharing a reference are scored together and
the prepared reference is reused (equal pixels under another path too).
Images are decoded ahead of scoring in worker threads or worker processes
(--decoder), and the GPU computes a pair while the next ones are queued. On
a GPU the perceptual metrics score up to 8 consecutive pairs of one size in
one call (against their shared reference, or each against its own).

Exit status: 0 when every pair was scored, 1 when some failed, 2 on a usage
error (nothing scored); Ctrl-C says how many rows were kept and ends as
interrupted (130 in a shell).

metrics:
{metrics}"""


DECODER_CHOICES = ("auto", "threads", "processes")  # fusedsim.engine.batch_pairs.DECODER_MODES, torch-free here


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1; got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("batch", help="score every pair of a CSV/TSV/Parquet table into an output table",
                            description=DESCRIPTION.format(metrics=metric_table()),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", metavar="PAIRS", help="table of pairs (.csv, .tsv, .parquet)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="results table (.csv, .tsv, .jsonl, .parquet)")
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help=f"metrics to compute, repeatable or comma-separated, or all (default: "
                             f"{', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    parser.add_argument("--resume", action="store_true", help="keep the rows already in OUT and skip their pairs")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT (default: refuse)")
    parser.add_argument("--fail-fast", action="store_true", help="stop at the first pair that fails")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.add_argument("--memory", type=parse_memory, default="auto",
                        help="memory mode: auto, full, strip or strip:ROWS (auto: full when the working set fits)")
    parser.add_argument("--workers", type=_positive, default=None,
                        help="image-decoding workers (local engine; default: the CPU count less one, at most 31 "
                             "processes or 8 threads), or the number of CPU actors (Ray engine without GPUs; default: "
                             "the cluster's CPUs)")
    parser.add_argument("--decoder", choices=DECODER_CHOICES, default="auto",
                        help="local engine: threads (no start-up; the GIL caps them at a few cores), processes "
                             "(scale with the cores; pixels come back through shared memory; about a second to "
                             "start) or auto (processes from 4 workers on, else threads)")
    parser.add_argument("--prefetch", type=_positive, default=None,
                        help="pairs decoded ahead of scoring (default: 32, or eight per decoding worker when more, "
                             "within an eighth of the memory; Ray engine: per actor, default from the free CPUs "
                             "and the object store)")
    parser.add_argument("--warmup", choices=("auto", "never"), default="auto",
                        help="auto: on a GPU whose kernel cache lacks a metric at the first pair's size (a fresh "
                             "machine), compile its kernels in parallel processes first, as `fusedsim warmup` "
                             "does; never: compile them one after the other as the pairs need them")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local: this process; ray: one actor per GPU (or CPU actors) of a Ray cluster")
    parser.add_argument("--address", default=None,
                        help="Ray cluster address (--engine ray; default: start a local Ray instance)")
    parser.add_argument("--ship-kernels", choices=("auto", "never"), default="auto",
                        help="--engine ray --address: auto ships this machine's Triton kernel cache with the job "
                             "when it is warm for the metrics (after `fusedsim warmup`), so fresh nodes load the "
                             "kernels instead of compiling them; never: the nodes use their own caches (e.g. a "
                             "TRITON_CACHE_DIR on a file system they share, which the driver forwards)")
    parser.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, else a line every few "
                                                              "seconds) and no summary")
    parser.set_defaults(run=run)


def _local_outcomes(scorer, tasks, columns, args, stats) -> Iterator[Any]:
    from fusedsim.engine.batch_pairs import (PairRunner, decode_ahead, default_prefetch, default_workers,
                                             image_bytes_estimate, plan)

    runner = PairRunner(scorer, columns)
    workers = args.workers or default_workers(args.decoder)
    prefetch = args.prefetch or default_prefetch(workers, image_bytes_estimate(tasks[0].ref) if tasks else None)
    pairs = decode_ahead(plan(tasks), workers=workers, prefetch=prefetch, mode=args.decoder)
    try:
        with closing(pairs):  # an early stop (--fail-fast, Ctrl-C) stops the decoding workers now
            yield from runner.run_all(pairs)
    finally:
        stats["prepared"] = runner.prepared


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.outputs import Output, check_outputs
    from fusedsim.cli.pair_table import read_pairs, table_format
    from fusedsim.cli.rowsink import OUTPUT_FORMATS, RowSink
    from fusedsim.engine.batch_pairs import metric_columns
    from fusedsim.metrics.registry import get_metric

    if args.address and args.engine != "ray":
        raise ValueError("--address needs --engine ray")
    metric_names = chosen_metrics(args.metric)
    specs = [get_metric(n) for n in metric_names]
    params = chosen_params(args.param, metric_names)
    fmt = table_format(args.output, OUTPUT_FORMATS, "-o")
    table = read_pairs(args.pairs)
    out = Output(args.output, fmt, "-o")
    check_outputs([out])
    if out.stream:
        raise ValueError(f"-o {args.output}: batch writes a file it can resume; give a file path")
    _refuse_inputs_as_output(args, table, out, fmt)
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError(f"-o {args.output}: writing Parquet needs pyarrow (pip install 'fusedsim[parquet]')"
                             ) from None
    score_columns = metric_columns(specs)
    columns = [*table.columns, *score_columns, "backend", "error"]
    clash = sorted(set(table.columns) & set(columns[len(table.columns):]))
    if clash:
        raise ValueError(f"PAIRS {table.path} already has the output column(s) {', '.join(clash)}; rename them")
    parquet = None
    if fmt == "parquet":
        from fusedsim.cli.parquet_columns import parquet_columns

        parquet = parquet_columns(table, score_columns)
    sink = RowSink(out.target, fmt, columns, (table.ref_column, table.dist_column), args.output, parquet)
    from fusedsim.cli.lock import exclusive_output_lock

    # held from before the output is read until it is closed: a second run on the same -o fails at once
    with exclusive_output_lock(out.target, "-o", args.output):
        return _locked_run(args, table, sink, metric_names, score_columns, params)


def _refuse_inputs_as_output(args: argparse.Namespace, table: Any, out: Any, fmt: str) -> None:
    """-o (its lock file, and Parquet's side log) must be neither the pairs table nor one of its images: writing would destroy
    it. Compared by device and inode, so a hard link or symlink to an input is refused too."""
    from fusedsim.cli.outputs import Output, refuse_outputs_that_are_inputs

    from fusedsim.cli.lock import lock_path

    outputs = [out, Output(lock_path(out.target), "lock", "-o (its lock file)")]
    if fmt == "parquet":
        outputs.append(Output(out.target + ".log.jsonl", "jsonl", "-o (its log)"))
    inputs: list[tuple[str, str]] = [("PAIRS", str(args.pairs))]
    for number, row in enumerate(table.rows, start=1):
        for column in (table.ref_column, table.dist_column):
            path = table.image_path(row[column])
            if path:
                inputs.append((f"PAIRS row {number} {column}", path))
    refuse_outputs_that_are_inputs(outputs, inputs)


def first_pair_size(table: Any) -> tuple[int, int] | None:
    """(height, width) of the first row's reference from its file header, or None when it cannot be read (the
    run itself then reports that row)."""
    from PIL import Image

    for row in table.rows:
        path = table.image_path(row[table.ref_column])
        if path:
            try:
                with Image.open(path) as img:
                    return img.height, img.width
            except Exception:
                return None
    return None


def cold_warmup_plan(args: argparse.Namespace, table: Any, metric_names: list[str],
                     params: dict[str, dict[str, Any]]) -> tuple[list[str], int, int] | None:
    """The metrics to compile before scoring, and at what (height, width): with ``--warmup auto``, a CUDA device
    (``auto`` or ``cuda``) and this machine's kernel cache (a local engine, or Ray started here), those whose
    markers (:func:`~fusedsim.engine.warmup.cold_metrics`) are missing at the first pair's size. None: nothing
    to do."""
    if args.warmup != "auto" or args.device not in ("auto", "cuda") or (args.engine == "ray" and args.address):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    size = first_pair_size(table)
    if size is None:
        return None
    from fusedsim.engine.warmup import cold_metrics

    cold = cold_metrics(metric_names, "cuda", *size, params)
    return (cold, *size) if cold else None


def _warm_cold_kernels(args: argparse.Namespace, table: Any, metric_names: list[str],
                       params: dict[str, dict[str, Any]]) -> None:
    """Compile the kernels a fresh cache lacks in parallel processes (:func:`cold_warmup_plan`); a metric whose
    warm-up fails is only reported here (the run compiles, or reports, it itself)."""
    plan = cold_warmup_plan(args, table, metric_names, params)
    if plan is None:
        return
    cold, height, width = plan
    import torch

    from fusedsim.engine.warmup import gpu_jobs, triton_cache_dir, warmup

    jobs = gpu_jobs(cold, height, width, torch.cuda.mem_get_info()[0])  # the processes share the GPU's memory
    if not args.quiet:
        print(f"fusedsim batch: preparing the kernels of {', '.join(cold)} at {width}x{height} (not in "
              f"{triton_cache_dir()} yet; --warmup never skips this)", file=sys.stderr)
    start = time.perf_counter()
    results = warmup(cold, "cuda", height, width, jobs=jobs, params=params)
    for result in results:
        if result.error:
            print(f"fusedsim batch: warm-up of {result.metric} failed: {result.error}", file=sys.stderr)
    if not args.quiet:
        ready = [r.metric for r in results if r.precompiled]
        compiled = [r.metric for r in results if not r.precompiled]
        parts = [f"installed compiled: {', '.join(ready)}"] if ready else []
        parts += [f"compiled in up to {jobs} processes: {', '.join(compiled)}"] if compiled else []
        how = "; ".join(parts)
        print(f"fusedsim batch: kernels ready in {time.perf_counter() - start:.1f} s ({how})", file=sys.stderr)


def kernels_to_ship(args: argparse.Namespace, table: Any, metric_names: list[str],
                    params: dict[str, dict[str, Any]]) -> Any:
    """The Triton cache folder to ship with a Ray job to a cluster (``--ship-kernels auto``, ``--address`` of a
    cluster, a GPU device), when it is warm for the metrics at the first pair's size; None otherwise (saying why
    unless ``--quiet``)."""
    from fusedsim.engine.ray_batch import remote_cluster

    if args.engine != "ray" or not remote_cluster(args.address) or args.ship_kernels != "auto" or args.device == "cpu":
        return None
    size = first_pair_size(table)
    if size is None:
        return None
    from fusedsim.engine.kernel_cache import cache_to_ship, folder_bytes

    folder, why = cache_to_ship(metric_names, *size, params)
    if not args.quiet:
        if folder is None:
            print(f"fusedsim batch: not shipping kernels to the Ray nodes: {why}", file=sys.stderr)
        else:
            print(f"fusedsim batch: shipping the kernel cache {folder} ({folder_bytes(folder) / 2**20:.1f} MiB) to the "
                  "Ray nodes (--ship-kernels never keeps their own)", file=sys.stderr)
    return folder


def _locked_run(args: argparse.Namespace, table: Any, sink: Any, metric_names: list[str],
                score_columns: list[str], params: dict[str, dict[str, Any]]) -> int:
    """The run once the output's lock is held: refuse to clobber earlier results, build the engine, score."""
    if sink.existing() and not (args.resume or args.overwrite):
        raise ValueError(f"-o {args.output} already holds results; pass --resume to continue that run or "
                         "--overwrite to replace it")

    if args.engine == "local":
        from fusedsim.engine.batch_pairs import decoder_mode, default_workers

        if decoder_mode(args.decoder, args.workers or default_workers(args.decoder)) == "processes":
            from fusedsim.engine.decode_workers import prestart

            prestart()  # the decoders' fork server imports while the kernels warm and the scorer is built
    _warm_cold_kernels(args, table, metric_names, params)
    # the engine first: a device, metric or cluster error stops the run before the output is touched
    stats: dict[str, Any] = {"prepared": 0}
    if args.engine == "ray":
        from fusedsim.engine.ray_batch import RayBatch

        engine: Any = RayBatch(metric_names, score_columns, device=args.device, memory=args.memory,
                               address=args.address, workers=args.workers, prefetch=args.prefetch, params=params,
                               kernel_cache=kernels_to_ship(args, table, metric_names, params))
    else:
        from fusedsim.engine import Scorer

        engine = Scorer(metric_names, device=args.device, memory=args.memory, params=params)
    try:
        return _run_batch(args, table, sink, engine, score_columns, stats)
    except KeyboardInterrupt as exc:
        exc.reported = True  # type: ignore[attr-defined]  # _run_batch said what was kept and how to resume
        raise
    finally:
        if args.engine == "ray":
            engine.shutdown()


def _run_batch(args, table, sink, engine, score_columns, stats) -> int:
    import math

    from fusedsim.cli.rowsink import cell_text
    from fusedsim.engine.batch_pairs import PairOutcome, PairTask

    done = sink.start(args.resume)
    skipped, tasks, early = 0, [], []
    for index, row in enumerate(table.rows):
        key = (cell_text(row[table.ref_column]), cell_text(row[table.dist_column]))
        if done[key] > 0:
            done[key] -= 1
            skipped += 1
            continue
        ref, dist = table.image_path(row[table.ref_column]), table.image_path(row[table.dist_column])
        if not ref or not dist:
            missing = table.ref_column if not ref else table.dist_column
            early.append(PairOutcome(index, {c: math.nan for c in score_columns}, "",
                                     f"row {index + 1}: the {missing} cell is empty"))
        else:
            tasks.append(PairTask(index, ref, dist))

    if args.engine == "ray":
        outcomes: Iterator[Any] = engine.outcomes(tasks, stats)
    else:
        outcomes = _local_outcomes(engine, tasks, score_columns, args, stats)

    from fusedsim.cli.progress import Progress

    total = len(tasks) + len(early)
    failed, backends = 0, Counter()
    stopped = ""
    complete = False
    start = time.perf_counter()
    bar = Progress(total, desc="batch", unit="pair", enabled=not args.quiet)
    try:
        for outcome in _chain(early, outcomes):
            row = dict(table.rows[outcome.index])
            row.update({c: math.nan for c in score_columns})
            row.update(outcome.values)
            row["backend"], row["error"] = outcome.backend, outcome.error
            sink.write(row)
            bar.update(1)
            if outcome.error:
                failed += 1
                if args.fail_fast:
                    stopped = f"row {outcome.index + 1}: {outcome.error}"
                    break
            else:
                backends[outcome.backend] += 1
        else:
            complete = True
    finally:
        if hasattr(outcomes, "close"):
            outcomes.close()
        bar.close()
        sink.close(complete)
        if not complete and not stopped:
            print(f"fusedsim batch: interrupted; {sink.written} new rows kept in {args.output} (rerun with "
                  "--resume to continue)", file=sys.stderr)
    elapsed = time.perf_counter() - start
    scored = sink.written - failed
    if not args.quiet:
        rate = sink.written / elapsed if elapsed > 0 else float("inf")
        used = ", ".join(f"{name} {count}" for name, count in backends.items()) or "none"
        print(f"fusedsim batch: {scored} scored, {failed} failed, {skipped} already done; {sink.written} rows in "
              f"{elapsed:.1f} s ({rate:.2f} pairs/s); references prepared: {stats['prepared']}; backends: {used}; "
              f"output: {args.output}", file=sys.stderr)
    if not args.quiet and args.engine == "ray" and "idle_s" in stats:  # where a Ray run's time went
        shipped = sum(1 for c in engine.kernel_caches if c and engine.shipped_name and
                      os.path.basename(c) == engine.shipped_name)
        kernels = f"; shipped kernels used by {shipped} of {len(engine.kernel_caches)} actors" if engine.shipped_name \
            else ""
        print(f"fusedsim batch: Ray: {len(engine.actors)} actors on {', '.join(sorted(set(engine.devices)))}; "
              f"decoding {stats['decode_s']:.1f} CPU-s; scoring threads idle {stats['idle_s']:.1f} s (waiting for "
              f"decoded pairs) in {stats['streams']} streams; chunks retried {stats['retried']}, actors lost "
              f"{stats['actors_lost']}{kernels}",
              file=sys.stderr)
    if stopped:
        print(f"fusedsim batch: stopped at the first failed pair (--fail-fast): {stopped}", file=sys.stderr)
    return 1 if failed else 0


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest
