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
import difflib
import os
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from .activation.startup import add_version_argument
from .commands import attach, detach, export, flamegraph, report, startup_file, trace, unbatch
from .exit_status import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from .reading.analysis import TraceNotFoundError, TraceReadError

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    examples: Sequence[str] = ()  # shown at the end of the subcommand's help


SUBCOMMANDS: List[Subcommand] = [
    # trace, startup-file and attach carry their examples in their own epilog.
    Subcommand("trace", trace.HELP, trace.configure, trace.run),
    Subcommand("startup-file", startup_file.HELP, startup_file.configure, startup_file.run),
    Subcommand("attach", attach.HELP, attach.configure, attach.run),
    Subcommand("detach", detach.HELP, detach.configure, detach.run, detach.EXAMPLES),
    Subcommand("report", report.HELP, report.configure, report.run, report.EXAMPLES),
    Subcommand("flamegraph", flamegraph.HELP, flamegraph.configure, flamegraph.run,
               flamegraph.EXAMPLES),
    Subcommand("export", export.HELP, export.configure, export.run, export.EXAMPLES),
    Subcommand("unbatch", unbatch.HELP, unbatch.configure, unbatch.run, unbatch.EXAMPLES),
]

_MAIN_EPILOG = """\
examples:
  pinsight-python trace -- python sim.py               # trace a run, keep the trace
  pinsight-python report pinsight-trace-*               # what ran, per process and thread
  pinsight-python flamegraph -o sim.svg pinsight-trace-*
  pinsight-python COMMAND --help                        # each command's options

docs: README.md, docs/activation.md (trace), docs/analysis.md (report, flamegraph, export)
"""


def _epilog(command: Subcommand, parser: argparse.ArgumentParser) -> Optional[str]:
    if not command.examples:
        return parser.epilog
    lines = "\n".join(f"  {example}" for example in command.examples)
    return (parser.epilog + "\n" if parser.epilog else "") + f"examples:\n{lines}\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinsight-python",
        description="Trace Python calls and native calls into LTTng, and analyse the traces.",
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS:
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.help[:1].upper() + command.help[1:] + ".",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.configure(sub)
        sub.epilog = _epilog(command, sub)
        sub.set_defaults(run=command.run, subparser=sub)
    return parser


def _unrecognized(sub: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The subcommand's own error for arguments it does not take, with the option
    meant where one is close (``--evnts``: ``--events``)."""
    options = [o for action in sub._actions for o in action.option_strings
               if o.startswith("--")]
    said = []
    for extra in extras:
        close = (difflib.get_close_matches(extra.split("=", 1)[0], options, n=1)
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
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # said by the subcommand, with its usage, not the top level's
        args.subparser.error(_unrecognized(args.subparser, extras))
    prog = f"pinsight-python {args.command}"
    try:
        return int(args.run(args))
    except TraceNotFoundError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (TraceReadError, OSError) as error:
        if isinstance(error, BrokenPipeError) or _stdout_closed():
            # The reader of our stdout went away (`| head`): not an error. The C++
            # reader, which writes there itself, reports it as a failed read.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_OK
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
