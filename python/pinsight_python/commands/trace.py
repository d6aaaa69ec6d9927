"""``pinsight-python trace``: run a command traced, in an LTTng session of its own.

``trace`` checks every setting before anything starts, makes sure an LTTng session
daemon runs, creates a uniquely named session (the provider's events, the vpid/vtid
contexts, a channel large enough for call-heavy programs), runs the command
with tracing switched on through the environment (so Python children trace too),
stays in charge of it until it ends (signals, below), stops and destroys the session,
keeps the trace, prints where it is and a short summary on stderr, and exits with the
command's exit status. With ``--relayd HOST[:CTRL[:DATA]]`` the session streams the
trace to an lttng-relayd instead (no summary then: the trace is on the relay host).

Signals sent to ``trace`` (docs/activation.md): SIGUSR1 and SIGUSR2 are forwarded to
every process of the command's tree that handles them (every traced process handles
SIGUSR1: it reloads the configuration); SIGTERM, SIGINT, SIGHUP and SIGQUIT are relayed
to the command, unless the terminal sent them (it signals the whole foreground process
group, the command included). ``trace`` itself never dies of them: the session is
always destroyed and the trace kept.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ..activation import settings as _settings
from ..reading.analysis import UNRECORDED_FILE
from ..recording import lttng
from ..recording.native_files import beside_extension
from ..recording.run import keeper as _run
from . import recording
from .exit_status import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_USAGE, killed_by

HELP = "run a command with Python tracing in a new LTTng session"
PROG = "pinsight-python trace"

SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel (the terminal) sent (Linux)
# Relayed to the command: what job schedulers and users send to end a job.
RELAYED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Forwarded to each process of the command's tree that handles them.
FORWARDED_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
# In the command's environment: marks the processes of this run, also those
# re-parented away from the command's tree (daemons, orphans).
ENV_RUN = "PINSIGHT_PYTHON_TRACE_RUN"

_EPILOG = """\
The command runs with PINSIGHT_PYTHON=1 (and PINSIGHT_TRACE_PYTHON, PINSIGHT_PYTHON_EVENTS,
PINSIGHT_TRACE_CONFIG_FILE, PINSIGHT_PYTHON_BACKEND, PINSIGHT_PYTHON_MODULES,
PINSIGHT_PYTHON_EXCLUDE, PINSIGHT_PYTHON_PAYLOAD as the options say) in its environment:
every Python interpreter it starts, itself included, activates tracing at start-up.
Every setting is checked before the command starts; configuration warnings are printed
here, once.

Signals: SIGUSR1 sent to trace reloads the configuration in every traced process of the
command (kill -USR1 PID, PID being trace's); SIGUSR2 is forwarded the same way, to the
processes that handle it. SIGTERM, SIGINT, SIGHUP and SIGQUIT are relayed to every
process of the command (mpirun and its ranks included); what is left of it when the
command ends is ended too (the same signal, SIGKILL 2 s later), and trace exits 128+N.
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
"""

def _error(message: str) -> None:
    recording.error(PROG, message)


def _note(message: str) -> None:
    recording.note(PROG, message)


# ---------------------------------------------------------------------------- parsers


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
        metavar=lttng.RELAYD_SPEC_HELP,
        help="stream the trace to the LTTng relay daemon on HOST (control and data ports: "
        f"default {lttng.RELAYD_CTRL_PORT} and {lttng.RELAYD_DATA_PORT}; an IPv6 address in "
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
    parser.add_argument(
        "--domains", metavar="LIST", default=None,
        help="PInsight's native domains to record beside Python: any of "
        f"{', '.join(lttng.NATIVE_DOMAINS)}, all or none (default: all when the command "
        "preloads libpinsight.so, through LD_PRELOAD or OMP_TOOL_LIBRARIES; else none)",
    )
    _settings.add_arguments(parser)
    parser.add_argument(
        # Not "command": cli.py's subparsers store the subcommand's name there.
        "command_argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS ...]",
        help="the command to run, after '--'",
    )


# ---------------------------------------------------------------------------- checks


@dataclass
class _Plan:
    """The validated request: what to run, where the trace goes, the child's environment.

    With a relay daemon (``relayd_url``), ``output`` is None: the trace goes there.
    """

    command: List[str]
    output: Optional[Path]
    env: Dict[str, str]
    relayd_url: Optional[str]
    config: Optional[str]  # the configuration the command's processes read, if any
    warnings: List[str]
    subbuf_size: str = lttng.SUBBUF_SIZE
    num_subbuf: int = lttng.NUM_SUBBUF
    domains: Sequence[str] = ()  # PInsight's native domains recorded too


class _Refused(Exception):
    """Every reason not to run the command, one a line; the exit status to use."""

    def __init__(self, messages: List[str], status: int = EXIT_USAGE) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages
        self.status = status


def parse_relayd_option(value: str, option: str = "--relayd") -> str:
    """``HOST[:CTRL_PORT[:DATA_PORT]]`` -> the session's URL; SettingsError if malformed."""
    try:
        return lttng.relayd_url(*lttng.parse_relayd(value))
    except ValueError as e:
        raise _settings.SettingsError(
            f"{option} {value!r}: {e}; expected {lttng.RELAYD_SPEC_HELP}, e.g. collector, "
            "10.0.0.5:5342:5343 or [fd00::5]"
        ) from None


def check_configuration(path: str) -> List[str]:
    """The configuration's warnings; _Refused with its errors (file:line: message)."""
    from .. import _pinsight_python as core

    try:
        return list(core.check_config(path))
    except core.ConfigError as e:
        raise _Refused(str(e).splitlines()) from None


def _configuration_in_force(
    chosen: _settings.Settings, args: argparse.Namespace
) -> Optional[str]:
    """The file the command's processes will read, as the core chooses it (None: none,
    or the one named is refused already)."""
    if args.config is not None or os.environ.get(_settings.ENV_CONFIG, "").strip():
        return chosen.config
    found = _settings.activation_config("", {})  # the working directory's, as activate()'s
    return os.path.abspath(found) if found else None


def _plan(args: argparse.Namespace) -> _Plan:
    """Checks everything; raises _Refused with every error found."""
    errors: List[str] = []
    command = _command(args, errors)
    chosen = _chosen_settings(args, errors)
    url, output = _destination(args, errors)
    config, warnings = _checked_configuration(chosen, args, errors)
    subbuf_size, num_subbuf = _channel_size(args, errors, warnings)
    preload = _alloc_preload(args, chosen, errors)
    domains = _native_domains(args.domains, os.environ, errors)
    if errors:
        raise _Refused(errors)
    if "cuda" in domains:
        config = _device_activity(chosen, config, warnings)
    _check_runnable(command[0])

    if url is None and output is None:
        output = recording.default_output()
    env = dict(os.environ)
    if preload is not None:
        _preload(env, preload, warnings)
    _guard_descriptors(env, errors)
    if errors:
        raise _Refused(errors)
    chosen.export(env)
    env[_settings.ENV_CONFIG_REPORTED] = "1"
    return _Plan(command, output, env, url, config, warnings, subbuf_size, num_subbuf, domains)


_DEVICE_ACTIVITY = re.compile(r"^\s*device_activity\s*=", re.MULTILINE)


def _device_activity(
    chosen: _settings.Settings, config: Optional[str], warnings: List[str]
) -> Optional[str]:
    """With the CUDA domain, the kernels' device activity is recorded: PInsight's
    device_activity is off unless a configuration turns it on. Without a
    configuration, trace gives the command one that does (removed when trace ends);
    a configuration that does not say is left as it is, with a warning."""
    if config is None:
        folder = tempfile.mkdtemp(prefix="pinsight-python-cuda-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = os.path.join(folder, "pinsight_trace_config.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("# pinsight-python trace --domains cuda: the kernels' device activity\n"
                    "[CUDA.default]\ndevice_activity = on\n")
        chosen.config = path
        return path
    try:
        with open(config, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return config
    if not _DEVICE_ACTIVITY.search(text):
        warnings.append(f"{config}: no device_activity setting, and PInsight records no "
                        "kernel activity without one: add [CUDA.default] device_activity = on "
                        "to time the kernels on the device")
    return config


def _native_domains(
    option: Optional[str], environ: Mapping[str, str], errors: List[str]
) -> Sequence[str]:
    """--domains, else all of PInsight's when the command preloads libpinsight.so."""
    if option is None:
        preloaded = f"{environ.get('LD_PRELOAD', '')} {environ.get('OMP_TOOL_LIBRARIES', '')}"
        return tuple(lttng.NATIVE_DOMAINS) if "libpinsight" in preloaded else ()
    names = [n.strip().lower() for n in option.split(",") if n.strip()]
    if names in (["all"], ["none"]):
        return tuple(lttng.NATIVE_DOMAINS) if names == ["all"] else ()
    unknown = [n for n in names if n not in lttng.NATIVE_DOMAINS]
    if unknown or not names:
        given = unknown[0] if unknown else option
        errors.append(f"--domains: unknown domain {given!r} (expected a list of "
                      f"{', '.join(lttng.NATIVE_DOMAINS)}, or all, or none)"
                      + _settings.did_you_mean(given, [*lttng.NATIVE_DOMAINS, "all", "none"]))
        return ()
    return tuple(dict.fromkeys(names))


def _command(args: argparse.Namespace, errors: List[str]) -> List[str]:
    command = list(args.command_argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        errors.append("no command given (usage: pinsight-python trace [OPTIONS] -- COMMAND)")
    return command


def _chosen_settings(args: argparse.Namespace, errors: List[str]) -> _settings.Settings:
    """The variables the command inherits first, the options over them."""
    inherited = _settings.from_environment(os.environ, errors)
    chosen = _settings.from_arguments(args, errors)
    for name in ("events", "mode", "backend", "config", "modules"):
        if getattr(chosen, name) is None:
            setattr(chosen, name, getattr(inherited, name))
    chosen.exclude = inherited.exclude + [m for m in chosen.exclude if m not in inherited.exclude]
    return chosen


def _destination(
    args: argparse.Namespace, errors: List[str]
) -> Tuple[Optional[str], Optional[Path]]:
    """(the relay daemon's URL, the output directory): at most one of them."""
    url = None
    if args.relayd is not None:
        try:
            url = parse_relayd_option(args.relayd)
        except _settings.SettingsError as e:
            errors.append(str(e))
        if args.output:
            errors.append(
                "-o and --relayd exclude each other: with --relayd, the relay daemon writes "
                "the trace under its own output directory"
            )
    output: Optional[Path] = None
    if args.output:
        try:
            output = recording.check_new_output(args.output)
        except _settings.SettingsError as e:
            output = Path(args.output).absolute()
            errors.append(str(e))
    return url, output


def _checked_configuration(
    chosen: _settings.Settings, args: argparse.Namespace, errors: List[str]
) -> Tuple[Optional[str], List[str]]:
    """(the configuration in force, its warnings); its errors go to ``errors``."""
    config = _configuration_in_force(chosen, args)
    if config is None:
        return None, []
    try:
        if config != chosen.config:
            _settings.check_config_path(config, f"./{_settings.DEFAULT_CONFIG_FILE}")
        return config, check_configuration(config)
    except _settings.SettingsError as e:
        errors.append(str(e))
    except _Refused as e:
        errors.extend(e.messages)
    return config, []


def _alloc_preload(
    args: argparse.Namespace, chosen: _settings.Settings, errors: List[str]
) -> Optional[Path]:
    """With --alloc: the alloc event added, and the malloc interposer to preload."""
    if not args.alloc:
        return None
    chosen.events = list(chosen.events or _settings.EVENT_NAMES)
    if "alloc" not in chosen.events:
        chosen.events.append("alloc")
    preload = alloc_preload_library()
    if not preload.is_file():
        errors.append(f"--alloc: {preload} is missing: reinstall pinsight-python")
    return preload


def _preload(env: Dict[str, str], preload: Path, warnings: List[str]) -> None:
    runtime = sanitizer_runtime(env.get("LD_PRELOAD", ""))
    if runtime is not None:
        # ASan and its kin must be first in the library list and own malloc: preloading
        # ours in front would stop the program, behind it would never be called.
        warnings.append(f"--alloc: LD_PRELOAD loads the sanitizer runtime {runtime}, which "
                        "owns malloc: native allocations are not sampled, Python's are")
    else:
        env["LD_PRELOAD"] = " ".join(p for p in (str(preload), env.get("LD_PRELOAD", "")) if p)


_SIZE = re.compile(r"(\d+)([kKmMgG]?)")


def _size_bytes(text: str) -> int:
    """"4M" -> 4194304; 0 when malformed."""
    m = _SIZE.fullmatch(text)
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(m.group(1)) * scale[m.group(2).lower()] if m else 0


def _size_text(nbytes: int) -> str:
    """4194304 -> "4M", as LTTng reads sizes (powers of two)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{suffix}"
    return str(nbytes)


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):,.0f} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _channel_size(
    args: argparse.Namespace, errors: List[str], warnings: List[str]
) -> Tuple[str, int]:
    """--subbuf-size and --num-subbuf, checked as LTTng wants them, then fitted to
    --buffer-budget for the CPUs LTTng makes buffers for (a warning when they shrink)."""
    size = str(args.subbuf_size)
    nbytes = _size_bytes(size)
    if nbytes < lttng.MIN_SUBBUF_BYTES or nbytes & (nbytes - 1):
        errors.append(f"--subbuf-size {size!r}: expected a power of two of at least 4k, "
                      "such as 512k, 4M or 8M")
    count = lttng.default_num_subbuf()
    if args.num_subbuf is not None:
        try:
            count = int(args.num_subbuf)
        except ValueError:
            count = 0
        if count < 2 or count & (count - 1):
            errors.append(f"--num-subbuf {args.num_subbuf!r}: expected a power of two of at "
                          "least 2, such as 8, 16 or 32")
    budget = _size_bytes(str(args.buffer_budget))
    if budget <= 0:
        errors.append(f"--buffer-budget {args.buffer_budget!r}: expected a size with k, M or "
                      "G, such as 512M or 2G")
    if errors:
        return size, count
    cpus = lttng.possible_cpus()
    fitted_bytes, fitted_count = lttng.fit_channel(nbytes, count, cpus, budget)
    if (fitted_bytes, fitted_count) != (nbytes, count):
        total = fitted_bytes * fitted_count * cpus
        over = " (the smallest channel LTTng takes, still over it)" if total > budget else ""
        warnings.append(
            f"--buffer-budget {args.buffer_budget}: {cpus} possible CPUs get {fitted_count} x "
            f"{_mib(fitted_bytes)} sub-buffers each instead of {count} x {_mib(nbytes)}, "
            f"{_mib(total)} in all{over}; LTTng may discard events at high rates (every view "
            "counts them): raise --buffer-budget where the node has the memory")
    return _size_text(fitted_bytes), fitted_count


def sanitizer_runtime(ld_preload: str) -> Optional[str]:
    """The sanitizer runtime (libasan.so, libclang_rt.tsan-x86_64.so, ...) LD_PRELOAD loads."""
    for entry in ld_preload.replace(":", " ").split():
        name = Path(entry).name
        if name.startswith(("libasan.", "libtsan.", "libmsan.", "libhwasan.", "liblsan.")) or (
            name.startswith("libclang_rt.") and "san" in name.split(".")[1]
        ):
            return entry
    return None


def fd_guard_library() -> Path:
    """The descriptor guard `trace` preloads, installed beside the extension."""
    return beside_extension("libpinsight_fd_guard.so")


def _guard_descriptors(env: Dict[str, str], errors: List[str]) -> None:
    """LTTng-UST aborts a process whose descriptors of its were closed under it (a
    forked child closing every descriptor, subprocess's close_fds after a preexec_fn):
    the guard keeps them open; all are close-on-exec, so no exec'd program gets one.
    Last in LD_PRELOAD: a sanitizer runtime or the malloc interposer stays first."""
    guard = fd_guard_library()
    if not guard.is_file():
        errors.append(f"{guard} is missing: reinstall pinsight-python")
        return
    preloaded = env.get("LD_PRELOAD", "").split()
    if str(guard) not in preloaded:
        env["LD_PRELOAD"] = " ".join([*preloaded, str(guard)])


def alloc_preload_library() -> Path:
    """The malloc interposer `trace --alloc` preloads, installed beside the extension."""
    return beside_extension("libpinsight_alloc_preload.so")


def _check_runnable(program: str) -> None:
    # Checked before a session exists, so that a typo costs no LTTng session.
    if "/" in program:
        if not os.path.exists(program):
            raise _Refused([f"{program}: no such file"], EXIT_NOT_FOUND)
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise _Refused([f"{program}: not an executable file"], EXIT_NOT_EXECUTABLE)
    elif shutil.which(program) is None:
        raise _Refused([f"{program}: command not found"], EXIT_NOT_FOUND)


# ---------------------------------------------------------------------------- the command's tree


def _parent_pids() -> Dict[int, int]:
    """pid -> parent pid, for every process we can see."""
    parents: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def _handles(pid: int, signo: int) -> bool:
    """Whether the process has a handler for the signal (SigCgt), i.e. receiving it
    does what the program asked for rather than kill it."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signo - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


def command_tree(root: int, marker: bytes) -> List[int]:
    """The processes of the run: the command's descendants (the command included) and
    those carrying the run's marker in their environment (re-parented ones)."""
    parents = _parent_pids()
    children: Dict[int, List[int]] = collections.defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    tree: Set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in tree or pid not in parents:
            continue
        tree.add(pid)
        todo.extend(children.get(pid, ()))
    me = os.getpid()
    tree.update(pid for pid in parents if pid not in tree and pid != me and _carries(pid, marker))
    return sorted(tree)


# ---------------------------------------------------------------------------- running


class _Supervisor:
    """Runs the command and answers the signals sent to us until it ends."""

    def __init__(
        self, plan: _Plan, marker: bytes, child_mask: Set[int], ignored: Sequence[int]
    ) -> None:
        self.plan = plan
        self.marker = marker
        self.child_mask = child_mask
        self.ignored = ignored  # what we were started with SIG_IGN for
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.stop_signal: Optional[int] = None  # relayed before the command existed
        self.stopped_by: Optional[int] = None  # a stop signal relayed to the command
        self.returncode: Optional[int] = None  # Popen's (negative: killed by a signal)

    def forward(self, signo: int) -> None:
        """SIGUSR1/SIGUSR2: to every process of the run that handles it."""
        name = signal.Signals(signo).name
        if self.proc is None:
            _note(f"{name} received before the command started: its processes read the "
                  "configuration as they start")
            return
        targets = [pid for pid in command_tree(self.proc.pid, self.marker)
                   if _handles(pid, signo)]
        sent = []
        for pid in targets:
            try:
                os.kill(pid, signo)
                sent.append(pid)
            except OSError:
                pass  # ended meanwhile
        what = "reload the configuration" if signo == signal.SIGUSR1 else "handle it"
        _note(f"{name} forwarded to {len(sent)} process(es) of the command that {what}"
              + (f": {', '.join(map(str, sent))}" if sent else ""))
        if signo == signal.SIGUSR1 and self.plan.config is not None:
            # The processes keep their diagnostics to themselves: said here, once.
            try:
                for line in check_configuration(self.plan.config):
                    _note(f"warning: {line}")
            except _Refused as e:
                for line in e.messages:
                    _note(f"error: {line}")
                _note("the configuration has errors: the one in force stays in force")

    def relay(self, signo: int, from_terminal: bool) -> None:
        """SIGTERM/SIGINT/SIGHUP/SIGQUIT: to the command, unless the terminal sent it to
        the whole foreground group (the command has it already)."""
        if self.proc is None:
            self.stop_signal = self.stop_signal or signo
            return
        if from_terminal:
            return
        # The whole run, not only the command: mpirun's ranks, a shell's children.
        self.stopped_by = self.stopped_by or signo
        for pid in command_tree(self.proc.pid, self.marker):
            try:
                os.kill(pid, signo)
            except ProcessLookupError:
                pass

    def dispatch(self, info: signal.struct_siginfo) -> None:
        signo = info.si_signo
        if signo in FORWARDED_SIGNALS:
            self.forward(signo)
        elif signo in RELAYED_SIGNALS:
            self.relay(signo, info.si_code == SI_KERNEL)

    def drain(self, answer: bool = True) -> None:
        """Answer (or, once the command has ended, drop) the signals that arrived
        while we were busy."""
        watched = {*RELAYED_SIGNALS, *FORWARDED_SIGNALS}
        while True:
            pending = signal.sigpending() & watched
            if not pending:
                return
            info = signal.sigtimedwait(pending, 0)
            if info is None:
                return
            if answer:
                self.dispatch(info)

    def start(self) -> None:
        self.drain()
        if self.stop_signal is not None:
            return
        mask, ignored = self.child_mask, self.ignored

        def as_we_were_started() -> None:
            # The signal mask and ignored signals we were given, not ours (a job
            # script's background command ignores SIGINT and SIGQUIT).
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for signo in ignored:
                signal.signal(signo, signal.SIG_IGN)

        # We have no threads: the fork-then-exec path preexec_fn takes is safe.
        self.proc = subprocess.Popen(
            self.plan.command, env=self.plan.env, preexec_fn=as_we_were_started  # noqa: PLW1509
        )

    def run(self) -> int:
        """Starts the command, answers signals until it ends; trace's exit status."""
        try:
            self.start()
        except OSError as e:
            _error(f"{self.plan.command[0]}: {e.strerror}")
            return EXIT_NOT_EXECUTABLE
        if self.proc is None:
            assert self.stop_signal is not None
            name = signal.Signals(self.stop_signal).name
            _note(f"{name} received before the command started: it was not started")
            return killed_by(self.stop_signal)
        self.returncode = self.wait()
        status = _exit_status(self.returncode)
        if self.stopped_by is not None:
            # What the signal did not end yet (ranks mpirun left behind, re-parented
            # children) goes too.
            _run.end_processes(self.marker, self.stopped_by)
            # A command that caught or ignored the signal and finished normally
            # keeps its status 0; a failure after it is the signal's doing (mpirun
            # exits 1 when its ranks are ended), as a shell reports it.
            if status != 0:
                status = killed_by(self.stopped_by)
        return status

    def wait(self) -> int:
        """The command's wait status as Popen gives it (negative: killed by a signal)."""
        assert self.proc is not None
        watched = {*RELAYED_SIGNALS, *FORWARDED_SIGNALS, signal.SIGCHLD}
        while True:
            status = self.proc.poll()
            if status is not None:
                return status
            # SIGCHLD only wakes us up; the timeout covers a child reaped elsewhere.
            info = signal.sigtimedwait(watched, 0.5)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.dispatch(info)


def _exit_status(returncode: int) -> int:
    if returncode >= 0:
        return returncode
    signo = -returncode
    try:
        name = f" ({signal.Signals(signo).name})"
    except ValueError:
        name = ""
    _note(f"the command was killed by signal {signo}{name}")
    return killed_by(signo)


def run(args: argparse.Namespace) -> int:
    # Until the command starts, the signals we answer are only noted (a handler
    # that records them), so that LTTng's own programs, the session daemon among
    # them, start with the mask we were given.
    noted: List[int] = []
    answered = (*RELAYED_SIGNALS, *FORWARDED_SIGNALS)
    previous: Dict[signal.Signals, Any] = {
        signo: signal.signal(signo, lambda n, _f: noted.append(n)) for signo in answered
    }
    try:
        return _run_trace(args, noted, previous)
    finally:
        _restore_handlers(previous)


def _restore_handlers(previous: Dict[signal.Signals, Any]) -> None:
    """Puts back the handlers Python can put back. None is a handler installed outside
    Python (libpinsight.so, preloaded into trace too, sets a C handler for SIGUSR1):
    it cannot be reinstalled from here, and trace ends just after."""
    for signo, handler in previous.items():
        if handler is not None:
            signal.signal(signo, handler)


def _run_trace(
    args: argparse.Namespace, noted: List[int], handlers: Dict[signal.Signals, Any]
) -> int:
    try:
        plan = _plan(args)
    except _Refused as e:
        _error("\n".join(e.messages))
        return e.status
    for line in plan.warnings:
        _note(f"warning: {line}")

    # The session records no process but those of this run (recording/run/keeper.py: they ask the
    # run's keeper to track them as they start).
    events = [f"{lttng.PROVIDER}:*", *(f"{lttng.NATIVE_DOMAINS[d]}:*" for d in plan.domains)]
    session = lttng.Session(plan.output, set_url=plan.relayd_url, track_nobody=True,
                            subbuf_size=plan.subbuf_size, num_subbuf=plan.num_subbuf,
                            events=events)
    recorder = recording.Recording(PROG, session)
    marker = f"{ENV_RUN}={session.name}"
    plan.env[ENV_RUN] = session.name
    try:
        recorder.start(sweep_abandoned=True)
        keeper = _RunKeeper(session.name, marker)
    except recording.SETUP_ERRORS as e:
        return recorder.abandon(e)
    plan.env[_run.ENV_SOCKET] = str(keeper.socket)

    # From here until the session is destroyed, the signals we answer are blocked
    # and taken with sigtimedwait (which tells who sent them): none can end us.
    old_mask = signal.pthread_sigmask(
        signal.SIG_BLOCK, {*RELAYED_SIGNALS, *FORWARDED_SIGNALS, signal.SIGCHLD}
    )
    ignored = [signo for signo, handler in handlers.items() if handler == signal.SIG_IGN]
    supervisor = _Supervisor(plan, marker.encode(), old_mask, ignored)
    for signo in noted:
        supervisor.relay(signo, False) if signo in RELAYED_SIGNALS else supervisor.forward(signo)
    try:
        status = supervisor.run()
    finally:
        # Stopping waits until LTTng has written every buffered event; after a
        # failure above, the session still must not outlive us.
        keeper.stop()
        recorder.destroy()
    unrecorded = keeper.finish(plan.output)
    # What came after the command's end has no one to go to.
    supervisor.drain(answer=False)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    _restore_handlers(handlers)

    ended = _how_it_ended(supervisor.returncode, supervisor.stopped_by)
    if plan.output is None:
        _tell_streamed(plan, session.name, ended)
        return status
    recorder.tell_written(plan.output, ended)
    if unrecorded:
        _note(f"{len(unrecorded)} process(es) of the command recorded no events "
              f"(listed in {plan.output / UNRECORDED_FILE}): " + "; ".join(unrecorded[:5]))
    if not args.no_summary:
        recorder.print_summary(plan.output)
    return status


def _how_it_ended(returncode: Optional[int], stopped_by: Optional[int]) -> str:
    """What the command did, when it did not simply succeed, for the line that says
    where the trace is ("" after a success without a relayed signal)."""
    relayed = f"{signal.Signals(stopped_by).name} was relayed to it" if stopped_by else ""
    if returncode is None:
        return ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"; the command was ended by {name}"
    if relayed:
        return (f"; {relayed} and it exited with status {returncode}" if returncode
                else f"; {relayed}, and it finished normally (status 0)")
    if returncode:
        return f"; the command exited with status {returncode}"
    return ""


def _tell_streamed(plan: _Plan, session: str, ended: str) -> None:
    # The trace is on the relay host; where its daemon writes is not known here.
    _note(
        f"trace streamed to the relay daemon at {plan.relayd_url} "
        f"(LTTng session {session}, now destroyed); on the relay host it is in "
        f"RELAYD_OUTPUT/{socket.gethostname()}/{session}-YYYYmmdd-HHMMSS, "
        f"RELAYD_OUTPUT being lttng-relayd's --output (default: ~/lttng-traces){ended}"
    )


_KEEPER_MAIN = ("import sys; from pinsight_python.recording.run.keeper import main; "
                "sys.exit(main(sys.argv[1:]))")


class _RunKeeper:
    """The run's keeper process (recording/run/keeper.py): tracks the run's processes into the
    session, and ends the run and its session if trace dies without doing so."""

    def __init__(self, session: str, marker: str, timeout: float = 10.0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pinsight-python-run-"))
        self.socket = self.dir / _run.SOCKET_NAME
        # Untraced, and not a process of the run.
        env = {k: v for k, v in os.environ.items()
               if k not in (ENV_RUN, _run.ENV_SOCKET) and not k.startswith("PINSIGHT_")}
        env.pop("PYTHONSTARTUP", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _KEEPER_MAIN, session, str(self.dir), str(os.getpid()),
             marker],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # signals to trace's process group are not its
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise lttng.LttngError(f"the run's keeper did not start within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def finish(self, output: Optional[Path]) -> List[str]:
        """The processes that recorded no events ("PID ARGV"), also written beside the
        trace for report; removes the run's directory."""
        unrecorded = _run.read_unrecorded(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        if unrecorded and output is not None and output.is_dir():
            (output / UNRECORDED_FILE).write_text("".join(f"{ln}\n" for ln in unrecorded))
        return unrecorded
