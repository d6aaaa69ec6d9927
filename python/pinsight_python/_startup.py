"""Activation without changing the program: the .pth shim, activate.py, ``python -m``.

Three ways in, one set of rules (docs/activation.md):

* ``pinsight_python.pth`` (site-packages) runs :func:`run` at interpreter start, but
  only after its own one-line test of ``os.environ`` found a reason to: importing this
  module imports the compiled core, which a start-up that asks for nothing must not pay.
* ``activate.py`` (the PYTHONSTARTUP file) runs :func:`run_startup_file`.
* ``python -m pinsight_python`` runs :func:`python_m_main`.

The environment they read, and that ``python -m pinsight_python`` and
``pinsight-python trace`` write so that child interpreters trace too:

    PINSIGHT_PYTHON=1             activate; 0: never activate automatically
    PINSIGHT_TRACE_PYTHON=MODE    TRACING, MONITORING or STANDBY: activate in that mode
                                  (OFF: no activation; PInsight's variable)
    PYTHONSTARTUP=.../activate.py activate, in scripts, -m and -c runs too
    PINSIGHT_PYTHON_EVENTS        function,c_call (default both)
    PINSIGHT_PYTHON_BACKEND       auto, sys.monitoring or setprofile
    PINSIGHT_TRACE_CONFIG_FILE    the configuration file (PInsight's variable)
"""

from __future__ import annotations

import os
import sys
from types import CodeType
from typing import (
    Callable,
    Dict,
    List,
    Mapping,
    MutableMapping,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
)

ENV_SWITCH = "PINSIGHT_PYTHON"
ENV_MODE = "PINSIGHT_TRACE_PYTHON"
ENV_EVENTS = "PINSIGHT_PYTHON_EVENTS"
ENV_BACKEND = "PINSIGHT_PYTHON_BACKEND"
ENV_CONFIG = "PINSIGHT_TRACE_CONFIG_FILE"

EVENT_NAMES = ("function", "c_call")  # the default
ALL_EVENT_NAMES = (*EVENT_NAMES, "import", "alloc")
MODES = ("OFF", "STANDBY", "MONITORING", "TRACING")
BACKENDS = ("auto", "sys.monitoring", "setprofile")
# activate.py says this of itself, so that a copy under another name still counts.
STARTUP_MARKER = "pinsight-python startup file"

_SWITCH_ON = ("1",)
_SWITCH_OFF = ("0",)
_ran = False  # the .pth may run twice: CPython 3.13.0's site processes a venv's twice


def startup_file() -> str:
    """Absolute path of activate.py, the file to name in PYTHONSTARTUP."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "activate.py")


# ---------------------------------------------------------------------------
# Settings: parsing and validation shared by every entry point.


class SettingsError(ValueError):
    """An option or variable has a value we cannot use; the message says which."""


def parse_events(text: str, source: str) -> List[str]:
    events = [e.strip() for e in text.split(",") if e.strip()]
    if not events:
        raise SettingsError(
            f"{source}: no event named (expected a list of function, c_call, import, alloc)"
        )
    for event in events:
        if event not in ALL_EVENT_NAMES:
            raise SettingsError(
                f"{source}: unknown event {event!r}"
                " (expected a list of function, c_call, import, alloc)"
            )
    return events


def parse_mode(text: str, source: str) -> str:
    mode = text.strip().upper()
    if mode not in MODES:
        raise SettingsError(
            f"{source}: unknown trace mode {text!r} (expected OFF, STANDBY, MONITORING or TRACING)"
        )
    return mode


def parse_backend(text: str, source: str) -> str:
    if text not in BACKENDS:
        raise SettingsError(
            f"{source}: unknown backend {text!r} (expected auto, sys.monitoring or setprofile)"
        )
    return text


def check_config(path: str, source: str) -> str:
    """The configuration file as an absolute path: children may run elsewhere."""
    if not os.path.isfile(path):
        raise SettingsError(f"{source}: no such configuration file: {path}")
    if not os.access(path, os.R_OK):
        raise SettingsError(f"{source}: cannot read the configuration file {path}")
    return os.path.abspath(path)


def export_settings(
    env: MutableMapping[str, str],
    *,
    events: Optional[Sequence[str]] = None,
    mode: Optional[str] = None,
    config: Optional[str] = None,
    backend: Optional[str] = None,
) -> None:
    """Write the variables that make a Python child (fresh interpreter) trace the same way."""
    env[ENV_SWITCH] = "1"
    if events is not None:
        env[ENV_EVENTS] = ",".join(events)
    if mode is not None:
        env[ENV_MODE] = mode
    if config is not None:
        env[ENV_CONFIG] = config
    if backend is not None:
        env[ENV_BACKEND] = backend


# ---------------------------------------------------------------------------
# The shim and the startup file.


def _switch(environ: Mapping[str, str]) -> Optional[bool]:
    """PINSIGHT_PYTHON: True (1), False (0) or None (unset or empty)."""
    value = environ.get(ENV_SWITCH, "").strip()
    if not value:
        return None
    if value in _SWITCH_ON:
        return True
    if value in _SWITCH_OFF:
        return False
    raise SettingsError(f"{ENV_SWITCH}: expected 1 or 0, got {value!r}")


def _names_startup_file(value: str) -> bool:
    """Whether PYTHONSTARTUP's value is our activate.py, or a copy of it."""
    if not value:
        return False
    try:
        if os.path.samefile(value, startup_file()):
            return True
        with open(value, encoding="utf-8", errors="replace") as f:
            return STARTUP_MARKER in f.read(4096)
    except OSError:
        return False


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks this interpreter to trace (raises SettingsError)."""
    switch = _switch(environ)
    if switch is not None:
        return switch
    mode = environ.get(ENV_MODE, "").strip()
    if mode and mode.upper() != "OFF":
        return True
    # -E (and -I) make CPython ignore PYTHONSTARTUP: so do we.
    if sys.flags.ignore_environment:
        return False
    return _names_startup_file(environ.get("PYTHONSTARTUP", ""))


def python_target(argv: Sequence[str]) -> Tuple[str, str]:
    """What an interpreter command line runs: ("script"|"module"|"command"|"stdin", value).

    argv is the full command line, interpreter first (sys.orig_argv).
    """
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("script", args[i + 1]) if i + 1 < len(args) else ("stdin", "")
        if arg == "--check-hash-based-pycs":
            i += 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        if arg == "-" or not arg.startswith("-"):
            return ("stdin", "-") if arg == "-" else ("script", arg)
        # A cluster of one-letter options: -c and -m end the options, -W and -X take a value.
        for j in range(1, len(arg)):
            letter = arg[j]
            if letter in "cm":
                value = arg[j + 1 :] or (args[i + 1] if i + 1 < len(args) else "")
                return ("command" if letter == "c" else "module", value)
            if letter in "WX":
                if j + 1 == len(arg):
                    i += 1  # the value is the next argument
                break
        i += 1
    return ("stdin", "")


def _command_line() -> List[str]:
    orig = getattr(sys, "orig_argv", None)  # 3.10+
    if orig:
        return list(orig)
    try:  # 3.8/3.9: sys.argv has lost "-m module" at this point
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read()
        return [a.decode(errors="surrogateescape") for a in raw.split(b"\0")[:-1]]
    except OSError:
        return [sys.executable, *sys.argv]


def _is_own_tool(argv: Sequence[str]) -> bool:
    """pinsight-python's own commands: ``python -m pinsight_python`` activates with
    its own options; the CLI (trace, report...) must not trace itself."""
    kind, value = python_target(argv)
    if kind == "module":
        return value == "pinsight_python" or value.startswith("pinsight_python.")
    if kind == "script":
        return os.path.basename(value) == "pinsight-python"
    return False


def activate_from_environment(environ: Mapping[str, str]) -> None:
    """activate() with the events and backend the environment names; the core reads
    the mode and the configuration file from it itself."""
    import pinsight_python

    events_text = environ.get(ENV_EVENTS, "").strip()
    events = parse_events(events_text, ENV_EVENTS) if events_text else list(EVENT_NAMES)
    backend = environ.get(ENV_BACKEND, "").strip() or "auto"
    pinsight_python.activate(events, backend=parse_backend(backend, ENV_BACKEND))


def _report(error: BaseException, how: str) -> None:
    # One line, never a traceback: the program runs on, untraced.
    message = " ".join(str(error).split()) or type(error).__name__
    sys.stderr.write(f"pinsight-python: {how}: {message}; the program runs untraced\n")


def run() -> None:
    """Called by pinsight_python.pth, once the environment seems to ask for tracing."""
    global _ran
    if _ran:
        return
    _ran = True
    try:
        if not requested(os.environ) or _is_own_tool(_command_line()):
            return
        # Activating here, at start-up, rather than leaving it to activate.py covers
        # scripts, -m and -c, which never run PYTHONSTARTUP; in an interactive session
        # activate.py then finds tracing active and does nothing.
        activate_from_environment(os.environ)
    except Exception as e:  # a start-up hook must never stop the interpreter
        _report(e, "cannot activate tracing at start-up")


def run_startup_file() -> None:
    """Called by activate.py (PYTHONSTARTUP, interactive sessions)."""
    try:
        if _switch(os.environ) is False:
            return
        import pinsight_python

        if pinsight_python.status()["active"]:
            return  # the .pth shim was first
        activate_from_environment(os.environ)
    except Exception as e:
        _report(e, "cannot activate tracing from the startup file")


# ---------------------------------------------------------------------------
# python -m pinsight_python [options] (script.py | -m module | -c command) [args...]

PROG = "python -m pinsight_python"
_VALUE_OPTIONS = ("--config", "--events", "--mode", "--backend")


def _usage() -> str:
    return (
        f"usage: {PROG} [--config FILE] [--events function,c_call] [--mode MODE]\n"
        f"       {' ' * len(PROG)} [--backend NAME]\n"
        f"       {' ' * len(PROG)} (script.py | -m module | -c command) [args ...]\n"
    )


_HELP = """
Run a Python program with pinsight-python tracing active from its first line, as
`python script.py args...` (or `python -m module args...`) would run it: same sys.argv,
__main__, sys.path[0], output, exit code and exceptions. Python child processes
(subprocess, multiprocessing) trace too, through the environment.

options:
  --config FILE      PInsight trace configuration (default: PINSIGHT_TRACE_CONFIG_FILE,
                     else ./pinsight_trace_config.txt if present, else trace everything)
  --events LIST      function, c_call, import, alloc (default: function,c_call)
  --mode MODE        TRACING, MONITORING, STANDBY or OFF (default: PINSIGHT_TRACE_PYTHON,
                     else the configuration's trace_mode)
  --backend NAME     auto, sys.monitoring or setprofile (default: auto)
  -h, --help         show this help and exit

Events reach LTTng only inside a tracing session: `pinsight-python trace -- python ...`
makes one, or see docs/activation.md for `lttng create`.
"""


def _usage_error(message: str) -> NoReturn:
    sys.stderr.write(_usage())
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(2)


class _Invocation:
    def __init__(self) -> None:
        self.options: Dict[str, str] = {}
        self.kind = ""  # script | module | command
        self.target = ""
        self.args: List[str] = []


def _parse(argv: Sequence[str]) -> _Invocation:
    inv = _Invocation()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(_usage() + _HELP)
            raise SystemExit(0)
        if arg == "--":
            if i + 1 >= len(argv):
                _usage_error("no script after '--'")
            inv.kind, inv.target, inv.args = "script", argv[i + 1], list(argv[i + 2 :])
            return inv
        if arg in ("-m", "-c") or (arg[:2] in ("-m", "-c") and len(arg) > 2):
            value = arg[2:]
            rest = i + 1
            if not value:
                if rest >= len(argv):
                    what = "module" if arg == "-m" else "command"
                    _usage_error(f"argument {arg}: expected a {what}")
                value, rest = argv[rest], rest + 1
            inv.kind = "module" if arg.startswith("-m") else "command"
            inv.target, inv.args = value, list(argv[rest:])
            return inv
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name not in _VALUE_OPTIONS:
                _usage_error(f"unknown option {arg!r}")
            if not eq:
                if i + 1 >= len(argv):
                    _usage_error(f"argument {name}: expected a value")
                i += 1
                value = argv[i]
            if name in inv.options:
                _usage_error(f"argument {name} given twice")
            inv.options[name] = value
            i += 1
            continue
        if arg == "-":
            _usage_error("reading the program from standard input is not supported")
        if arg.startswith("-"):
            _usage_error(f"unknown option {arg!r}")
        inv.kind, inv.target, inv.args = "script", arg, list(argv[i + 1 :])
        return inv
    _usage_error("no program given: name a script, -m module or -c command")


def _program_name() -> str:
    # CPython names itself by its argv[0] in "can't open file" messages.
    orig = getattr(sys, "orig_argv", None)
    return orig[0] if orig else (sys.executable or "python")


def _fresh_main_namespace() -> Dict[str, object]:
    """Empty the real __main__ module's namespace, as a fresh interpreter has it.

    runpy ran our __main__.py in that namespace; left as it is, our names would
    show through to the program.
    """
    import builtins

    namespace = sys.modules["__main__"].__dict__
    namespace.clear()
    namespace.update(
        __name__="__main__",
        __doc__=None,
        __package__=None,
        __loader__=None,
        __spec__=None,
        __annotations__={},
        __builtins__=builtins,
    )
    return namespace


def _load_script(path: str) -> Tuple[CodeType, object]:
    """(code, loader) for a script, as CPython's main compiles it: source or .pyc."""
    import importlib.machinery
    import importlib.util
    import io
    import marshal

    with io.open_code(path) as f:
        data = f.read()
    if path.endswith(".pyc") or data[:4] == importlib.util.MAGIC_NUMBER:
        loader: object = importlib.machinery.SourcelessFileLoader("__main__", path)
        code = marshal.loads(data[16:])
        if not isinstance(code, CodeType):
            raise ValueError(f"{path}: not a compiled Python file")
        return code, loader
    # dont_inherit: this module's `from __future__ import annotations` is not the script's.
    code = compile(data, path, "exec", dont_inherit=True)
    return code, importlib.machinery.SourceFileLoader("__main__", path)


def _hide_own_frames_on_report(exc: BaseException, user_tb: object) -> None:
    """Make the interpreter's report of `exc` start at the program's own frames.

    The exception still propagates to the top, so exit status, KeyboardInterrupt's
    SIGINT and the program's own sys.excepthook behave as without us; only the
    frames of this runner are cut from the traceback that gets printed.
    """
    previous = sys.excepthook

    def excepthook(etype: type, value: BaseException, tb: object) -> None:
        sys.excepthook = previous
        if value is exc:
            cut = tb
            while cut is not None and cut is not user_tb:
                cut = cut.tb_next  # type: ignore[attr-defined]
            tb = cut
            value.__traceback__ = tb  # type: ignore[assignment]
        previous(etype, value, tb)  # type: ignore[arg-type]

    sys.excepthook = excepthook


class _Options:
    """The validated options of ``python -m pinsight_python``."""

    def __init__(self, inv: _Invocation) -> None:
        opts = inv.options
        try:
            self.events_given = "--events" in opts
            self.events = (
                parse_events(opts["--events"], "--events")
                if self.events_given
                else list(EVENT_NAMES)
            )
            self.mode = parse_mode(opts["--mode"], "--mode") if "--mode" in opts else None
            self.backend = (
                parse_backend(opts["--backend"], "--backend") if "--backend" in opts else None
            )
            self.config = check_config(opts["--config"], "--config") if "--config" in opts else None
        except SettingsError as e:
            _usage_error(str(e))


def _start_tracing(options: _Options) -> None:
    import pinsight_python

    # Children (subprocess, multiprocessing spawn/forkserver) are fresh interpreters:
    # the .pth shim activates them from these variables.
    export_settings(
        os.environ,
        events=options.events if options.events_given else None,
        mode=options.mode,
        config=options.config,
        backend=options.backend,
    )
    try:
        pinsight_python.activate(
            options.events,
            config=options.config,
            mode=options.mode,
            backend=options.backend or "auto",
        )
    except (pinsight_python.ConfigError, pinsight_python.ActivationError) as e:
        sys.stderr.write(f"{PROG}: error: cannot start tracing: {e}\n")
        raise SystemExit(2) from None


def python_m_main(argv: Sequence[str]) -> None:
    """Run the program named by argv (sys.argv[1:] of ``python -m pinsight_python``)."""
    import runpy

    inv = _parse(argv)
    options = _Options(inv)
    if inv.kind == "script":
        # CPython's __file__ and code filename: absolute, but not normalised ("./").
        path = inv.target if os.path.isabs(inv.target) else os.path.join(os.getcwd(), inv.target)
        runs_directory = os.path.isdir(path) or _is_zipfile(path)
        if not runs_directory:
            try:
                code, loader = _load_script(path)
            except OSError as e:
                # CPython's own message and status for a script it cannot open.
                sys.stderr.write(
                    f"{_program_name()}: can't open file {path!r}: [Errno {e.errno}] {e.strerror}\n"
                )
                raise SystemExit(2) from None
            except (SyntaxError, ValueError) as e:
                # Reported as CPython reports it: the error alone, no traceback.
                _hide_own_frames_on_report(e, None)
                raise
        # sys.argv first: activation records it (process_info).
        sys.argv[:] = [inv.target, *inv.args]
        _start_tracing(options)
        if runs_directory:
            # A directory or zip file with __main__.py: CPython puts it first on
            # sys.path and runs its __main__ module.
            if not getattr(sys.flags, "safe_path", False):
                sys.path[0] = path
            _fresh_main_namespace()
            _run_guarded(lambda: runpy._run_module_as_main("__main__", alter_argv=False))  # type: ignore[attr-defined]
            return
        if not getattr(sys.flags, "safe_path", False):
            # As CPython: the script's own directory, symbolic links resolved, instead
            # of the working directory `python -m` put there.
            sys.path[0] = os.path.dirname(os.path.realpath(path))
        namespace = _fresh_main_namespace()
        namespace.update(__file__=path, __cached__=None, __loader__=loader)
        _run_guarded(lambda: exec(code, namespace))
    elif inv.kind == "module":
        # runpy's own entry point for `python -m`, so that the program sees what it
        # would (sys.argv[0] = the module's file, __spec__) and tracebacks start the same.
        sys.argv[:] = ["-m", *inv.args]
        _start_tracing(options)
        _fresh_main_namespace()
        _run_guarded(lambda: runpy._run_module_as_main(inv.target, alter_argv=True))  # type: ignore[attr-defined]
    else:
        import importlib.machinery

        try:
            command = compile(inv.target, "<string>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            _hide_own_frames_on_report(e, None)
            raise
        sys.argv[:] = ["-c", *inv.args]
        _start_tracing(options)
        if not getattr(sys.flags, "safe_path", False):
            sys.path[0] = ""  # as CPython does for -c
        namespace = _fresh_main_namespace()
        namespace["__loader__"] = importlib.machinery.BuiltinImporter
        if sys.version_info >= (3, 13):
            import linecache

            # As 3.13's main does for -c, so that tracebacks show the command's lines.
            lines = [line + "\n" for line in inv.target.splitlines()]
            linecache.cache["<string>"] = (len(inv.target), None, lines, "<string>")
        _run_guarded(lambda: exec(command, namespace))


def _is_zipfile(path: str) -> bool:
    import zipfile

    try:
        return os.path.isfile(path) and zipfile.is_zipfile(path)
    except OSError:
        return False


def _run_guarded(body: Callable[[], object]) -> None:
    try:
        body()
    except SystemExit:
        raise
    except BaseException as e:
        # The program's own frames start right below this one (for -m, with runpy's,
        # which CPython's report shows too).
        tb = e.__traceback__
        _hide_own_frames_on_report(e, tb.tb_next.tb_next if tb and tb.tb_next else None)
        raise
