"""The API: :func:`activate`, :func:`deactivate`, :func:`status`, :func:`set_mode`,
:func:`reload`, :func:`lexgions`, :func:`dump` and the errors they raise, over the compiled core
(``_pinsight_python``). The package's root shows them as ``pinsight_python.activate()``
and the rest; the start-up shim and attach's target side call :func:`activate_with`
with the settings they resolved.

Besides the calls themselves: who this process is for ``process_info`` (its MPI rank
and size from the launcher's variables, its command line), joining a
``pinsight-python trace`` run (activation/join.py), and the process's hooks (fork,
atexit). Imports what the traced process needs and no more: every traced process
imports this module.
"""

from __future__ import annotations

import _thread
import atexit
import os
import sys

from . import join as _join
from . import settings as _settings
from . import subinterpreter as _subinterpreter

TYPE_CHECKING = False  # typing only for the checker: every traced process imports us
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

_core: Any
_IN_SUBINTERPRETER = _subinterpreter.in_subinterpreter()
if _IN_SUBINTERPRETER:
    # The compiled core cannot load here (see _subinterpreter): the API, untraced.
    _core = _subinterpreter
else:
    from .. import _pinsight_python as _core

ConfigError = _core.ConfigError
ActivationError = _core.ActivationError

# Launchers' variables for the MPI rank and size: read, never MPI_Init. The first
# launcher whose rank variable is set gives the rank, and the size comes from its
# own variables only, so that two launchers' values are never mixed.
_MPI_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",)),  # Open MPI's mpirun/orted/prterun
    # PMIx exports no size: Open MPI's, else an srun step's.
    ("PMIX_RANK", ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")),
    ("PMI_RANK", ("PMI_SIZE",)),  # MPICH's and Intel MPI's Hydra, srun --mpi=pmi2
    ("MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",)),  # MVAPICH's mpirun_rsh
    # Only inside an srun step: a batch script's own shell has SLURM_PROCID=0 too.
    ("SLURM_PROCID", ("SLURM_STEP_NUM_TASKS",)),
)
# Activation imports no module the program could notice: not threading (whose
# first import decides threading.main_thread()), socket, re or warnings.
_lock = _thread.RLock()
_in_call = False  # True while the lock's owner runs one of the calls below
_deferred: List[Callable[[], None]] = []
_hooks_installed = False
# CPython 3.12+ warns when os.fork() runs while other OS threads exist.
_FORK_WARNING = (
    r"This process \(pid=\d+\) is multi-threaded, use of (fork|forkpty)\(\) may lead to deadlocks"
)


def _env_int(names: Iterable[str], environ: Mapping[str, str]) -> int:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return -1


def _mpi_rank_and_size(environ: Optional[Mapping[str, str]] = None) -> Tuple[int, int]:
    """(rank, size) from the launcher's environment (this process's, or `environ`:
    a flight recorder's dump names the rank that asked); -1 for what it does not
    tell."""
    environ = os.environ if environ is None else environ
    for rank_variable, size_variables in _MPI_LAUNCHERS:
        rank = _env_int((rank_variable,), environ)
        size = _env_int(size_variables, environ)
        if rank < 0 or (rank_variable == "SLURM_PROCID" and size < 0):
            continue
        return rank, size if size > rank else -1
    return -1, -1


def _install_process_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    # LTTng-UST hears of forks inside fork() itself (pthread_atfork, set up by
    # the core); the child needs its own control thread and silent inherited frames.
    os.register_at_fork(before=_filter_fork_warning, after_in_child=_after_fork_in_child)
    # Join the control thread before the interpreter finalizes. SIGUSR1 stays
    # ours: a reload request during finalization must not end the program.
    atexit.register(_core._stop_control_thread, False)
    # Registered after it, run before it: rate control's counts per code object
    # (lexgion_counts), while the session still stands.
    atexit.register(_core._emit_lexgion_counts)
    # Sampled blocks alive when the program ends are "never freed": the frees
    # of interpreter teardown are not the program's.
    atexit.register(_core._alloc_finish)
    # Registered last, run first: CUPTI's last kernel records while every LTTng
    # probe is still there (session.h, flush_device_activity).
    atexit.register(_core._flush_device_activity)
    # A flight-recorder run dumps at a non-zero exit: after an uncaught exception,
    # named after it (the interpreter printed it and set sys.last_exc).
    atexit.register(_note_exit_exception)


def _note_exit_exception() -> None:
    """For a flight recorder's dump at the exit: the uncaught exception, and where
    it was raised (its traceback's innermost frames), as one line."""
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if error is None:
        return
    try:
        message = " ".join(str(error).split())
    except Exception:
        message = ""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append(f"{code.co_name} ({code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno})")
        tb = tb.tb_next
    where = " <- ".join(reversed(frames[-4:]))
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    _core._note_exit_exception(f"{text} in {where}" if where else text)


# multiprocessing's helper processes, as their `-c` code starts, and what to call them.
_MULTIPROCESSING_ROLES = (
    ("from multiprocessing.spawn import", "spawn worker"),
    ("from multiprocessing.forkserver import", "forkserver"),
    ("from multiprocessing.resource_tracker import", "resource tracker"),
)


def _arguments_of(pid: int) -> List[str]:
    """A process's command line without its interpreter ([] when unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return []
    return [w.decode(errors="replace") for w in words[1:] if w]


def _command_line() -> str:
    """process_info's argv, as the user typed it, less the interpreter: `-m pytest -x`
    (sys.argv, while the .pth shim runs, has '-m' in place of the module's name);
    multiprocessing's helpers as their parent's: `spawn worker of sim.py --steps 10`;
    under `python -m pinsight_python`, the program it runs."""
    launched = getattr(sys.modules.get(f"{__package__}.startup"), "launched_program", None)
    if launched:
        return " ".join(launched)
    words = list(getattr(sys, "orig_argv", [])[1:]) or _arguments_of(os.getpid())
    if not words:
        return " ".join(sys.argv)
    if "-c" in words:
        code = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
        for start, role in _MULTIPROCESSING_ROLES:
            if code.startswith(start):
                parent = _arguments_of(os.getppid())
                if parent:
                    first = parent[0] if parent[0].startswith("-") else os.path.basename(parent[0])
                    first = f"python {first}" if first.startswith("-") else first
                    return " ".join([f"{role} of {first}", *parent[1:]])
                return role
    return " ".join(words)


def _after_fork_in_child() -> None:
    # Under `pinsight-python trace`, the child is recorded once the run tracks its pid
    # (and, in a flight-recorder run, connects its own recorder: _after_fork_child).
    _join.join_run(_core.recording)
    _core._after_fork_child()


def _join_run(socket: Optional[str] = None) -> bool:
    """Under `pinsight-python trace` (or `attach --join`, its keeper's `socket`): have
    this process recorded by the run's session. True when it could not, and said why."""
    if socket or os.environ.get(_join.ENV_SOCKET):
        _core.lttng_available()  # loads LTTng-UST: the process registers with the daemon
        return _join.join_run(_core.recording, socket)
    return False


def _start_recorder(socket: str) -> None:
    """`attach --join`: this process's side of the run's flight recorder."""
    _join.start_recorder(_core, socket)


def _tell_unregistered(off: bool) -> bool:
    """Outside `trace`: when no session records this process's events because its
    LTTng-UST and the session daemon are of different LTTng versions, says so, naming
    both (once: the general line at activation then stays unsaid). True when it did."""
    if off or os.environ.get(_join.ENV_SOCKET):
        return False
    if not _core.lttng_available()[0] or _core.recording():
        return False
    from .lttng_versions import registration_problem

    problem = registration_problem()
    if problem:
        _join.say(f"pinsight-python: tracing is active in process {os.getpid()}, but no LTTng "
                 f"session can record its events: {problem}")
    return bool(problem)


def _threads_not_ours() -> int:
    """OS threads other than LTTng-UST's listeners ("<name>-ust"), our control
    thread ("pinsight-ctl"), a flight recorder's ("pinsight-rec") and the batched
    payload's writer (named as the process is, known by its tid); -1 when /proc
    cannot tell."""
    count = 0
    writer = str(_core._block_writer_tid())
    try:
        for tid in os.listdir("/proc/self/task"):
            if tid == writer:
                continue
            with open(f"/proc/self/task/{tid}/comm", "rb") as f:
                name = f.read().rstrip(b"\n")
            if not (name.endswith(b"-ust") or name in (b"pinsight-ctl", b"pinsight-rec")):
                count += 1
    except OSError:
        return -1
    return count


def _main_thread_ident() -> int:
    threading = sys.modules.get("threading")
    if threading is not None:
        return threading.main_thread().ident or 0
    main_ident = getattr(_thread, "_get_main_thread_ident", None)  # 3.13+
    # Before 3.13, without threading imported, the caller is taken as the main
    # thread: the .pth shim and PYTHONSTARTUP run there.
    return int(main_ident()) if main_ident is not None else _thread.get_ident()


def _filter_fork_warning() -> None:
    if sys.version_info < (3, 12):
        return
    import re
    import warnings

    # Our threads are fork-safe (LTTng-UST hears of the fork, the control thread
    # is restarted in the child): they alone must not make a traced program print
    # the warning it would not print untraced. CPython warns after the after-fork
    # hooks, so the filter stays until the next fork decides again; with a thread
    # of the program's own, the warning shows as it would untraced.
    silence = _threads_not_ours() == 1
    entry = ("ignore", re.compile(_FORK_WARNING, re.I), DeprecationWarning, None, 0)
    present = entry in warnings.filters
    if silence and not present:
        warnings.filterwarnings("ignore", message=_FORK_WARNING, category=DeprecationWarning)
    elif present and not silence:
        warnings.filters.remove(entry)  # type: ignore[arg-type,unused-ignore]
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()


def activate(
    events: Iterable[Union[str, _settings.Event]] = _settings.EVENT_NAMES,
    *,
    config: Optional[Union[str, os.PathLike[str]]] = None,
    mode: Optional[Union[str, _settings.Mode]] = None,
    backend: Union[str, _settings.Backend] = "auto",
    modules: Optional[Iterable[str]] = None,
    exclude: Iterable[str] = (),
    payload: Optional[Union[str, _settings.Payload]] = None,
) -> None:
    """Start tracing this process.

    events: any of "function" (function_begin/end), "c_call" (c_call_begin/end),
        "import" (import_begin/end), "alloc" (alloc_sample/free_sample) and "gil"
        (gil_switch/gil_released: the GIL's hand-offs, releases and waits; refused
        on a free-threaded CPython); import and alloc are also on when the
        configuration names them.
    config: a PInsight trace configuration file; default PINSIGHT_TRACE_CONFIG_FILE,
        else ./pinsight_trace_config.txt if present, else trace everything.
    mode: OFF, STANDBY, MONITORING or TRACING; default PINSIGHT_TRACE_PYTHON, else
        the configuration's trace_mode.
    backend: "auto" (sys.monitoring on 3.12+, else setprofile), "sys.monitoring"
        or "setprofile".
    modules: trace only these modules and their submodules (replaces the
        configuration's module_filter, on reloads too).
    exclude: never trace these modules and their submodules (added to the
        configuration's module_exclude).
    payload: "full" (every event names its function; files once per code object
        and second, in code_info events) or "compact" (integers; names once per
        code object and callable per second, in code_info/callable_info events) or
        "batched" (compact's records packed per thread into event_block events);
        default PINSIGHT_PYTHON_PAYLOAD, else the configuration's [Python] payload,
        else full.

    Idempotent and thread-safe. Raises ConfigError (a ValueError) for a bad
    configuration and ActivationError (a RuntimeError) when tracing cannot start,
    e.g. when every sys.monitoring tool id is taken.
    """
    # Arguments, defaults and variables are resolved here, once, into typed options:
    # the core reads no environment and parses no name.
    try:
        options = _settings.activate_options(
            events, config, mode, backend, modules, exclude, payload, os.environ)
    except _settings.ArgumentError as e:
        raise ValueError(str(e)) from None
    except _settings.SettingsError as e:
        raise ConfigError(str(e)) from None
    activate_with(options)


def activate_with(options: _settings.ActivateOptions) -> None:
    """Start tracing with settings resolved already: activate()'s, and the start-up
    shim's and ``python -m pinsight_python``'s, which resolve them from the
    environment and the options (activation/startup.py)."""
    if _IN_SUBINTERPRETER:
        raise ActivationError(_subinterpreter.REASON)
    refusal = _settings.gil_refusal(e.value for e in options.events)
    if refusal:
        raise ActivationError(refusal)
    mpi_rank, mpi_size = _mpi_rank_and_size()

    def start() -> None:
        joining = not _core.status()["active"]
        if joining and (_join_run() or _tell_unregistered(options.mode is _settings.Mode.OFF)):
            _core._unrecorded_told()
        _install_process_hooks()
        _core.activate(
            main_thread_ident=_main_thread_ident(),
            mpi_rank=mpi_rank,
            mpi_size=mpi_size,
            hostname=os.uname().nodename,  # gethostname()
            argv=_command_line(),
            **options.core_arguments(),
        )
        if joining and options.flight_stall_s is not None:  # a flight-recorder run's
            _join.start_recorder(_core)

    _serialized(start)


def _serialized(action: Callable[[], None]) -> None:
    """Run `action` alone. A call made while this thread is already inside one
    (a Python signal handler run between two of its bytecodes: job scripts
    toggle tracing with signals) runs right after it, in order, instead of
    waiting for a lock its own thread holds, which would hang the program."""
    global _in_call
    with _lock:
        if _in_call:
            _deferred.append(action)
            return
        _in_call = True
        try:
            action()
        finally:
            # A signal may add one up to the moment _in_call is cleared: look again.
            while True:
                while _deferred:
                    _run_deferred(_deferred.pop(0))
                _in_call = False
                if not _deferred:
                    break
                _in_call = True


def _run_deferred(action: Callable[[], None]) -> None:
    # Its caller (a signal handler) has returned: an error cannot reach it.
    try:
        action()
    except Exception as e:  # reported: never raised into the call it ran after
        print(f"pinsight-python: a call made from a signal handler during another "
              f"activate/deactivate/set_mode/reload, run after it, failed: {e}", file=sys.stderr)


def deactivate() -> None:
    """Stop tracing. Frames still running keep their begin without an end."""
    _serialized(_core.deactivate)


def status() -> Dict[str, Any]:
    """Backend, mode, events, counts of events emitted and of code objects seen;
    "interpreter" is "main", or "sub" in a sub-interpreter (never traced; "reason")."""
    result = dict(_core.status())
    result.setdefault("interpreter", "main")
    return result


def lexgions() -> List[Dict[str, Any]]:
    """Per function: qualname, filename, lineno, module, executions, traced."""
    return list(_core.lexgions())


def set_mode(mode: Union[str, _settings.Mode]) -> None:
    """Switch the Python domain to OFF, STANDBY, MONITORING or TRACING."""
    if _IN_SUBINTERPRETER:
        _core.set_mode(mode)  # refused, as everything there
    try:
        index = _settings.core_index(_settings.mode_of(mode, "set_mode"))
    except _settings.SettingsError as e:
        raise ConfigError(str(e)) from None
    _serialized(lambda: _core.set_mode(index))


def reload() -> None:
    """Re-read the configuration file now, as SIGUSR1 does."""
    _serialized(_core.reload)


def dump(reason: str = "requested", *, timeout: float = 30.0) -> Optional[str]:
    """Under `pinsight-python trace --flight-recorder`: have the run write its
    flight recorder's buffers now, every process of the run (this one's open
    stacks and pending records first), as OUTPUT/dump-N-REASON. Returns the dump's
    folder once it is written (waiting at most `timeout` seconds, the GIL
    released: other threads run on), or None, with one line on stderr saying
    why, when no dump was taken (not in such a run, the disk is full...). Never
    raises for that: a program may call it wherever it suspects trouble."""
    if not isinstance(reason, str):
        raise TypeError(f"dump(reason): expected a str, got {type(reason).__name__}")
    where, problem = ("", _subinterpreter.REASON) if _IN_SUBINTERPRETER else _core._dump(
        reason, "", float(timeout))
    if problem:
        sys.stderr.write(f"pinsight-python: dump({reason!r}): no dump: {problem}\n")
        return None
    return where
