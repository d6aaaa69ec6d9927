"""``pinsight-python trace``: run a command traced, in an LTTng session of its own.

This module is the command line only: its options, and one call to the run,
:func:`pinsight_python.recording.run.trace.run` (the plan, the session, the keeper,
the supervisor: ``recording/run/``).
"""

from __future__ import annotations

import argparse
import os

from ..activation import arguments
from ..recording import lttng, relayd
from ..recording.run import plan as run_plan
from ..recording.run import trace as trace_run
from .recording_options import add_trace_format_argument

HELP = "run a command with Python tracing in a new LTTng session"
PROG = run_plan.PROG

_EPILOG = """\
The command runs with PINSIGHT_PYTHON=1 (and PINSIGHT_TRACE_PYTHON, PINSIGHT_PYTHON_EVENTS,
PINSIGHT_TRACE_CONFIG_FILE, PINSIGHT_PYTHON_BACKEND, PINSIGHT_PYTHON_MODULES,
PINSIGHT_PYTHON_EXCLUDE, PINSIGHT_PYTHON_PAYLOAD as the options say) in its environment:
every Python interpreter it starts, itself included, activates tracing at start-up.
Every setting is checked before the command starts; configuration warnings are printed
here, once.

Signals: SIGUSR1 sent to trace reloads the configuration in every traced process of the
command (kill -USR1 PID, PID being trace's); SIGUSR2 is forwarded the same way, to the
processes that handle it (under --flight-recorder, it takes a dump instead). SIGTERM,
SIGINT, SIGHUP and SIGQUIT are relayed to every process of the command (mpirun and its
ranks included); what is left of it when the command ends is ended too (the same
signal, SIGKILL 2 s later), and trace exits 128+N.
Ctrl-C in the terminal reaches the command directly. A shell that starts trace in the
background of a script (cmd &) makes it ignore SIGINT and SIGQUIT: send SIGTERM there.
The session is destroyed and the trace kept whatever ends the command; if trace itself
is killed (SIGKILL), its keeper process ends the command and destroys the session.

Isolation: the session records only the processes of this command (each registers as
it starts tracing), never another run's or another program's of the same user.

Exit status: the command's (128+N if signal N killed it, or was relayed to it by trace
and the command then failed; 0 if it caught or ignored the signal and succeeded),
127 command not found, 126 not executable, 2 bad arguments, settings or configuration,
1 LTTng could not be set up.

With --relayd, the session streams the trace to an LTTng relay daemon (lttng-relayd,
ports 5342/5343 by default) instead of writing it here; the relay daemon writes it under
its output directory as HOSTNAME/SESSION-YYYYmmdd-HHMMSS. Only this host's processes are
recorded: on a cluster, each node needs its own session (docs/cluster.md).

examples:
  pinsight-python trace -- python sim.py --steps 100
  pinsight-python trace -o sim-trace --exclude numpy --ignore-frozen -- python sim.py
  pinsight-python trace --config pinsight_trace_config.txt -- mpirun -n 4 python sim.py
  pinsight-python trace -- python sim.py & sleep 60; kill -USR1 $!   # reload the config
  pinsight-python trace --relayd collector -- python sim.py
  pinsight-python trace --trace-format ctf-2 -- python sim.py   # LTTng 2.15+
  pinsight-python trace --flight-recorder=512M --stall 300 -o fr -- mpirun -n 4 python sim.py
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [options] -- COMMAND [ARGS ...]"
    parser.epilog = _EPILOG
    parser.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="where LTTng writes the trace; must not exist or be empty "
        "(default: ./pinsight-trace-YYYYmmdd-HHMMSS)",
    )
    parser.add_argument(
        "--relayd",
        metavar=relayd.RELAYD_SPEC_HELP,
        help="stream the trace to the LTTng relay daemon on HOST (control and data ports: "
        f"default {relayd.RELAYD_CTRL_PORT} and {relayd.RELAYD_DATA_PORT}; an IPv6 address in "
        "brackets) instead of writing it locally; not with -o",
    )
    parser.add_argument(
        "--alloc",
        action="store_true",
        help="sample allocations (adds alloc to the events) including malloc from native "
        "code: preloads pinsight-python's malloc interposer (LD_PRELOAD)",
    )
    parser.add_argument(
        "--no-summary", action="store_true",
        help="do not read the trace back for a summary (reading costs about 1 s per "
        "million events on 2 cores; the trace is complete without it)",
    )
    parser.add_argument(
        "--subbuf-size", metavar="SIZE", default=lttng.SUBBUF_SIZE,
        help="size of each sub-buffer of the channel, per CPU: a power of two with k, M or G "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--num-subbuf", metavar="N", type=str, default=None,
        help="sub-buffers per CPU, a power of two >= 2: raise it (or --subbuf-size) if LTTng "
        f"discards events (default: {lttng.default_num_subbuf()} on this machine of "
        f"{os.cpu_count() or 1} CPUs: {lttng.NUM_SUBBUF} from 8 CPUs on, twice as many below)",
    )
    parser.add_argument(
        "--buffer-budget", metavar="SIZE", default=lttng.BUFFER_BUDGET,
        help="memory the channel may take on this node, every CPU's sub-buffers together "
        f"(LTTng makes them for each of the {lttng.possible_cpus()} possible CPUs here): "
        "fewer and then smaller sub-buffers where the channel asked for does not fit, with "
        "a warning (default: %(default)s)",
    )
    add_trace_format_argument(parser)
    parser.add_argument(
        "--flight-recorder", metavar="SIZE", nargs="?", const=lttng.FLIGHT_RECORDER_SIZE,
        default=None,
        help="keep the last events in memory, at most SIZE on this node (default "
        f"{lttng.FLIGHT_RECORDER_SIZE}), and write nothing until a dump: "
        "OUTPUT/dump-N-REASON, when a process of the command ends badly (uncaught exception, "
        "fatal signal, non-zero exit), stalls (--stall), calls pinsight_python.dump(), or "
        "trace gets SIGUSR2 (docs/flight_recorder.md)",
    )
    parser.add_argument(
        "--stall", metavar="SECONDS", default=None,
        help="with --flight-recorder: a dump when a traced process makes no Python call or "
        "return for SECONDS (>= 1) while it runs: a deadlock, an MPI call that never "
        "returns; one dump per stall",
    )
    parser.add_argument(
        "--domains", metavar="LIST", default=None,
        help="PInsight's native domains to record beside Python: any of "
        f"{', '.join(lttng.NATIVE_DOMAINS)}, all or none (default: all when the command "
        "preloads libpinsight.so, through LD_PRELOAD or OMP_TOOL_LIBRARIES; else none)",
    )
    arguments.add_arguments(parser)
    parser.add_argument(
        # Not "command": cli.py's subparsers store the subcommand's name there.
        "command_argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS ...]",
        help="the command to run, after '--'",
    )


def run(args: argparse.Namespace) -> int:
    # The program itself (cli.main with no arguments) exits right after: the signals
    # trace answers stay noted until then (a SIGUSR1 as it ends would kill it).
    return trace_run.run(args, restore_handlers=not getattr(args, "is_program", False))
