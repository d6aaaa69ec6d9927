"""The ``pinsight-python`` command: its parser, assembled from the subcommands, and main().

Each subcommand is one module of ``commands/`` and one entry of :data:`SUBCOMMANDS`,
the one place where they are registered: its name, a one-line help, examples, a
function that adds its arguments and a function that runs it and returns the exit
status. Every subcommand's help has the same layout: usage, description, options,
examples. Exit status (``exit_status.py``): 0 success, 1 the trace could not
be read or an output not written, 2 bad arguments (including a path that holds no
trace), 130 interrupted; ``trace`` exits with its command's status.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType
from typing import List, NamedTuple, Optional, Sequence

from .activation.startup import add_version_argument
from .exit_status import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


class Subcommand(NamedTuple):
    """One subcommand: its module in commands/ holds HELP, configure(parser), run(args)
    and, optionally, EXAMPLES (shown at the end of its help)."""

    name: str
    module_name: str

    @property
    def module(self) -> ModuleType:
        # Imported when used: `pinsight-python trace` imports none of the readers'
        # modules, nor attach's injector (issue 36: trace's fixed cost).
        return importlib.import_module(f".commands.{self.module_name}", __package__)


SUBCOMMANDS: List[Subcommand] = [
    Subcommand("trace", "trace"),
    Subcommand("startup-file", "startup_file"),
    Subcommand("attach", "attach"),
    Subcommand("detach", "detach"),
    Subcommand("report", "report"),
    Subcommand("flamegraph", "flamegraph"),
    Subcommand("export", "export"),
    Subcommand("unbatch", "unbatch"),
]

_MAIN_EPILOG = """\
examples:
  pinsight-python trace -- python sim.py               # trace a run, keep the trace
  pinsight-python report pinsight-trace-*               # what ran, per process and thread
  pinsight-python flamegraph -o sim.svg pinsight-trace-*
  pinsight-python COMMAND --help                        # each command's options

docs: README.md, docs/activation.md (trace), docs/analysis.md (report, flamegraph, export)
"""


def _epilog(examples: Sequence[str], parser: argparse.ArgumentParser) -> Optional[str]:
    if not examples:
        return parser.epilog
    lines = "\n".join(f"  {example}" for example in examples)
    return (parser.epilog + "\n" if parser.epilog else "") + f"examples:\n{lines}\n"


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole parser; with ``only``, the name of a subcommand, the top level and
    that subcommand alone (what a run of it needs)."""
    parser = argparse.ArgumentParser(
        prog="pinsight-python",
        description="Trace Python calls and native calls into LTTng, and analyse the traces.",
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS:
        if only is not None and command.name != only:
            continue
        module = command.module
        help_text: str = module.HELP
        sub = commands.add_parser(
            command.name,
            help=help_text,
            description=help_text[:1].upper() + help_text[1:] + ".",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.epilog = _epilog(getattr(module, "EXAMPLES", ()), sub)
        sub.set_defaults(run=module.run, subparser=sub)
    return parser


def _chosen(argv: Sequence[str]) -> Optional[str]:
    """The subcommand named first, if it is one: the top level takes no option but
    --help and --version, which need the whole parser."""
    names = {command.name for command in SUBCOMMANDS}
    return argv[0] if argv and argv[0] in names else None


def _unrecognized(sub: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The subcommand's own error for arguments it does not take, with the option
    meant where one is close (``--evnts``: ``--events``)."""
    from difflib import get_close_matches

    options = [o for action in sub._actions for o in action.option_strings
               if o.startswith("--")]
    said = []
    for extra in extras:
        close = (get_close_matches(extra.split("=", 1)[0], options, n=1)
                 if extra.startswith("-") else [])
        said.append(f"{extra} (did you mean {close[0]}?)" if close else extra)
    return "unrecognized arguments: " + " ".join(said)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reading end is closed."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_chosen(arguments))
    args, extras = parser.parse_known_args(arguments)
    if extras:  # said by the subcommand, with its usage, not the top level's
        args.subparser.error(_unrecognized(args.subparser, extras))
    prog = f"pinsight-python {args.command}"
    # Run as the program (its arguments from sys.argv): it exits when this returns.
    args.is_program = argv is None
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        return _failed(prog, error)


def _failed(prog: str, error: Exception) -> int:
    """The exit status for a failure of the trace reader or of an output; anything
    else is a bug, raised as it is."""
    from .reading.analysis import TraceNotFoundError, TraceReadError

    if isinstance(error, TraceNotFoundError):
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(error, (TraceReadError, OSError)):
        raise error
    if isinstance(error, BrokenPipeError) or _stdout_closed():
        # The reader of our stdout went away (`| head`): not an error. The C++
        # reader, which writes there itself, reports it as a failed read.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    print(f"{prog}: error: {error}", file=sys.stderr)
    return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
