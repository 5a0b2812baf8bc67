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
from typing import Any

# command name -> module under fusedsim.cli
COMMANDS = {"score": "score", "vmaf": "vmaf", "list-metrics": "list_metrics", "batch": "batch", "compare": "compare",
            "sweep": "sweep", "diffmap": "diffmap", "bench": "bench", "video": "video", "warmup": "warmup"}


def build_parser() -> argparse.ArgumentParser:
    from fusedsim import __version__

    parser = argparse.ArgumentParser(prog="fusedsim", description="Fused GPU image and video similarity metrics.")
    parser.add_argument("--version", action="version", version=f"fusedsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMANDS.values():
        importlib.import_module(f"fusedsim.cli.{module_name}").add_parser(sub)
    return parser


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The sub-parser of ``command`` (for its usage line in errors found after parsing), else ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def _quiet_interrupt() -> None:
    """Make the interpreter's report of an unhandled KeyboardInterrupt silent: the command has printed its line,
    and a traceback after it hides that line. Other exceptions still get the previous hook's traceback."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            return
        previous(kind, value, tb)

    sys.excepthook = hook


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "paths", None), list):
        # a command with positional ``paths`` takes them anywhere on the line (``REF --json OUT DIST``)
        args.paths = [*args.paths, *(e for e in extra if e == "-" or not e.startswith("-"))]
        extra = [e for e in extra if e != "-" and e.startswith("-")]
    if extra:
        # the sub-command's usage, not the top-level one: the flag is unknown to that command
        command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        print(f"fusedsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C: a line, not a traceback (commands that keep work say so first)
        if not getattr(exc, "reported", False):
            print(f"fusedsim {args.command}: interrupted", file=sys.stderr)
        _quiet_interrupt()
        raise  # callers in Python see the interrupt; the process then dies of SIGINT (status 130 in a shell)
    except BrokenPipeError:  # the reader went away (``fusedsim score ... | head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not raise again
        return 141  # 128 + SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
