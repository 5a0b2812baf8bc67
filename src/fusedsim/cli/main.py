"""Entry point of ``fusedsim``: one sub-command per module in this package.

Each command module exposes ``add_parser(subparsers)`` and ``run(args) -> int``. Building the parser must not
import torch (``add_parser`` reads only the torch-free metric registry; ``run`` imports what it needs), so
``fusedsim --help``, ``--version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# command name -> module under fusedsim.cli
COMMANDS = {"score": "score", "vmaf": "vmaf", "list-metrics": "list_metrics", "batch": "batch", "compare": "compare",
            "sweep": "sweep", "diffmap": "diffmap", "bench": "bench"}


def build_parser() -> argparse.ArgumentParser:
    from fusedsim import __version__

    parser = argparse.ArgumentParser(prog="fusedsim", description="Fused GPU image and video similarity metrics.")
    parser.add_argument("--version", action="version", version=f"fusedsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMANDS.values():
        importlib.import_module(f"fusedsim.cli.{module_name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "paths", None), list):
        # a command with positional ``paths`` takes them anywhere on the line (``REF --json OUT DIST``)
        args.paths = [*args.paths, *(e for e in extra if e == "-" or not e.startswith("-"))]
        extra = [e for e in extra if e != "-" and e.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        print(f"fusedsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``fusedsim score ... | head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not raise again
        return 141  # 128 + SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
