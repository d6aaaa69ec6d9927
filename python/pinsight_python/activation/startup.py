"""Activation without changing the program: the .pth shim, activate.py, ``python -m``.

Three ways in, one set of rules (docs/activation.md):

* ``pinsight_python.pth`` (site-packages) runs :func:`run` at interpreter start, but
  only after its own one-line test of ``os.environ`` found a reason to: importing this
  module imports the compiled core, which a start-up that asks for nothing must not pay.
* ``activate.py`` (the PYTHONSTARTUP file) runs :func:`run_startup_file`.
* ``python -m pinsight_python`` runs :func:`python_m_main`.

The environment they read, and that ``python -m pinsight_python`` and
``pinsight-python trace`` write so that child interpreters trace too, is named and
checked in :mod:`pinsight_python.activation.settings`: PINSIGHT_PYTHON=1 (0: never activate
automatically), PINSIGHT_TRACE_PYTHON=MODE (activate in that mode; OFF: no
activation), PYTHONSTARTUP naming activate.py, and the settings' variables.
"""

from __future__ import annotations

import os
import sys
from types import CodeType

from . import settings as _settings
from .settings import Settings

TYPE_CHECKING = False  # typing only for the checker: every traced process imports us
if TYPE_CHECKING:  # argparse is imported only by python -m pinsight_python
    import argparse
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

# activate.py says this of itself, so that a copy under another name still counts.
STARTUP_MARKER = "pinsight-python startup file"

_ran = False  # the .pth may run twice: CPython 3.13.0's site processes a venv's twice


def startup_file() -> str:
    """Absolute path of activate.py, the file to name in PYTHONSTARTUP."""
    # The package's root holds it: the path users put in PYTHONSTARTUP stays.
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(package, "activate.py")


# ---------------------------------------------------------------------------
# The shim and the startup file.


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
    switch = _settings.switch(environ)
    if switch is not None:
        return switch
    if _settings.mode_requests_tracing(environ):
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
    """Activate with the settings the environment gives, each variable parsed once
    here (SettingsError if bad)."""
    from . import api

    api.activate_with(_settings.resolve(_settings.from_environment(environ), environ))


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
        from .subinterpreter import in_subinterpreter

        if in_subinterpreter():
            return  # not traced, silently: status() says so there
        # Activating here, at start-up, rather than leaving it to activate.py covers
        # scripts, -m and -c, which never run PYTHONSTARTUP; in an interactive session
        # activate.py then finds tracing active and does nothing.
        activate_from_environment(os.environ)
    except Exception as e:  # a start-up hook must never stop the interpreter
        _report(e, "cannot activate tracing at start-up")


def run_startup_file() -> None:
    """Called by activate.py (PYTHONSTARTUP, interactive sessions)."""
    try:
        if _settings.switch(os.environ) is False:
            return
        from . import api

        if api.status()["active"]:
            return  # the .pth shim was first
        activate_from_environment(os.environ)
    except Exception as e:
        _report(e, "cannot activate tracing from the startup file")


# ---------------------------------------------------------------------------
# python -m pinsight_python [options] (script.py | -m module | -c command) [args...]

PROG = "python -m pinsight_python"

_DESCRIPTION = """\
Run a Python program with pinsight-python tracing active from its first line, as
`python script.py args...` (or `python -m module`, `python -c command`) would run it:
same sys.argv, __main__, sys.path[0], output, exit status and exceptions. Python child
processes (subprocess, multiprocessing) trace too, through the environment.
Options go before the program; everything after it is the program's."""

_EPILOG = """\
Events reach LTTng only inside a tracing session: `pinsight-python trace -- python ...`
makes one, or see docs/activation.md for `lttng create`.

examples:
  python -m pinsight_python sim.py --steps 100
  python -m pinsight_python --events function --exclude numpy -m mypkg.run
  python -m pinsight_python --config pinsight_trace_config.txt -c 'import sim; sim.main()'"""


def version_text() -> str:
    """``pinsight-python VERSION (CPython X.Y.Z)``: what ``--version`` prints."""
    from .. import __version__

    return f"pinsight-python {__version__} (CPython {sys.version.split()[0]})"


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """``--version``, printing :func:`version_text`."""
    import argparse

    class Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
            print(version_text())
            parser.exit()

    parser.add_argument("--version", action=Version, nargs=0,
                        help="show the version and exit")


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] (script.py | -m module | -c command) [args ...]",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import arguments  # the command line's: python -m pinsight_python alone

    add_version_argument(parser)
    arguments.add_arguments(parser)
    program = parser.add_argument_group("the program (one of)")
    target = program.add_mutually_exclusive_group(required=True)
    target.add_argument("script", nargs="?", metavar="script.py",
                        help="a script, a directory or a zip file with __main__.py")
    target.add_argument("-m", dest="module_target", metavar="module",
                        help="run a library module as a script")
    target.add_argument("-c", dest="command_target", metavar="command",
                        help="run a program passed as a string")
    program.add_argument("args", nargs="*", metavar="args", help="the program's arguments")
    return parser


def _split_program(parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Index in argv where the program starts (script, -m, -c, or after '--').

    argparse alone cannot stop there: the program's own options would be taken
    for ours.
    """
    takes_value = {
        option
        for action in parser._actions
        for option in action.option_strings
        if action.nargs != 0
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            return i
        if arg[:2] in ("-m", "-c"):
            return i
        name, eq, _ = arg.partition("=")
        i += 2 if name in takes_value and not eq else 1
    return len(argv)


class _Invocation:
    def __init__(self, kind: str, target: str, args: List[str], chosen: Settings) -> None:
        self.kind = kind  # script | module | command
        self.target = target
        self.args = args
        self.settings = chosen


def _parse(argv: Sequence[str]) -> _Invocation:
    parser = build_parser()
    boundary = _split_program(parser, argv)
    options, program = list(argv[:boundary]), list(argv[boundary:])
    if program[:1] == ["--"]:
        program = program[1:]
        if not program:
            parser.error("no script after '--'")
        head, rest = ["--", program[0]], program[1:]
    elif program and program[0] in ("-m", "-c"):
        head, rest = program[:2], program[2:]
    elif program and program[0][:2] in ("-m", "-c"):
        head, rest = program[:1], program[1:]
    else:
        if program[:1] == ["-"]:
            parser.error("reading the program from standard input is not supported")
        head, rest = program[:1], program[1:]
    args = parser.parse_args([*options, *head])
    errors: List[str] = []
    from . import arguments

    chosen = arguments.from_arguments(args, errors)
    if errors:
        parser.print_usage(sys.stderr)
        for error in errors:
            sys.stderr.write(f"{PROG}: error: {error}\n")
        raise SystemExit(2)
    if args.module_target is not None:
        return _Invocation("module", args.module_target, rest, chosen)
    if args.command_target is not None:
        return _Invocation("command", args.command_target, rest, chosen)
    return _Invocation("script", args.script, rest, chosen)


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
        __builtins__=builtins,
    )
    if sys.version_info < (3, 14):  # 3.14's modules make theirs lazily (PEP 649)
        namespace["__annotations__"] = {}
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


def _start_tracing(chosen: Settings) -> None:
    from . import api

    # Children (subprocess, multiprocessing spawn/forkserver) are fresh interpreters:
    # the .pth shim activates them from these variables.
    chosen.export(os.environ)
    try:
        # As activate() would with these arguments: the variables it reads fill in.
        api.activate_with(_settings.activation(chosen, os.environ))
    except (_settings.SettingsError, api.ConfigError, api.ActivationError) as e:
        sys.stderr.write(f"{PROG}: error: cannot start tracing: {e}\n")
        raise SystemExit(2) from None


# The program `python -m pinsight_python` runs, as its own command line would name it
# (process_info's argv): the launcher and its options are not the program's.
launched_program: Optional[List[str]] = None


def python_m_main(argv: Sequence[str]) -> None:
    """Run the program named by argv (sys.argv[1:] of ``python -m pinsight_python``)."""
    global launched_program
    inv = _parse(argv)
    launched_program = {"script": [inv.target], "module": ["-m", inv.target]}.get(
        inv.kind, ["-c", inv.target]) + list(inv.args)
    if inv.kind == "script":
        _run_script(inv)
    elif inv.kind == "module":
        _run_module(inv)
    else:
        _run_command(inv)


def _run_script(inv: _Invocation) -> None:
    """``script.py``, or a directory or zip file with ``__main__.py``."""
    import runpy

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
    _start_tracing(inv.settings)
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
    namespace.update(__file__=path, __loader__=loader)
    if sys.version_info < (3, 15):  # 3.15's __main__ has no __cached__
        namespace["__cached__"] = None
    _run_guarded(lambda: exec(code, namespace))


def _run_module(inv: _Invocation) -> None:
    import runpy

    # runpy's own entry point for `python -m`, so that the program sees what it
    # would (sys.argv[0] = the module's file, __spec__) and tracebacks start the same.
    sys.argv[:] = ["-m", *inv.args]
    _start_tracing(inv.settings)
    _fresh_main_namespace()
    _run_guarded(lambda: runpy._run_module_as_main(inv.target, alter_argv=True))  # type: ignore[attr-defined]


def _run_command(inv: _Invocation) -> None:
    import importlib.machinery

    try:
        command = compile(inv.target, "<string>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        _hide_own_frames_on_report(e, None)
        raise
    sys.argv[:] = ["-c", *inv.args]
    _start_tracing(inv.settings)
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
