"""The tracing settings, one set of rules for every entry point.

Modes, events, backends, module filters and the configuration file are accepted or
refused here, the same way for ``pinsight_python.activate()``, the start-up shim
(``activation.startup``), ``python -m pinsight_python`` and ``pinsight-python trace``. The
environment variables that carry them to child interpreters are named and read here
too, and nowhere else (the ``.pth`` line aside: it must decide without importing us).

One list of each: the enums below (:class:`Mode`, :class:`Payload`, :class:`Event`,
:class:`Backend`). The parsers, the options' help, the error messages and the CLI's
choices come from them; what activate() hands the core is an :class:`ActivateOptions`
of them, resolved once, the mode and payload as their place in the core's own lists
(``_pinsight_python.MODES``, ``PAYLOADS``, which tests/unit/test_settings.py holds
equal to these enums).

Importing this module costs nothing beyond the standard library: the start-up
shim reads it before it knows whether tracing is wanted.
"""

from __future__ import annotations

import enum
import os
import stat
import sys

# Every traced process imports this module at its start: typing (about 5 ms with what
# it imports) is for the type checker only, as argparse is.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import (
        Any,
        Callable,
        Dict,
        Iterable,
        List,
        Mapping,
        MutableMapping,
        Optional,
        Sequence,
        Tuple,
        Union,
    )
__all__ = [
    "ALL_EVENT_NAMES",
    "BACKENDS",
    "DEFAULT_CONFIG_FILE",
    "ENV_BACKEND",
    "ENV_BLOCK_WRITER",
    "ENV_CLOCK_PLUGIN",
    "ENV_CONFIG",
    "ENV_CYCLE_CLOCK",
    "ENV_EVENTS",
    "ENV_EXCLUDE",
    "ENV_MODE",
    "ENV_MODULES",
    "ENV_PAYLOAD",
    "ENV_SWITCH",
    "ENV_TRACE_DIR",
    "EVENT_NAMES",
    "FROZEN_IMPORTLIB",
    "MODES",
    "PAYLOADS",
    "ActivateOptions",
    "Backend",
    "Event",
    "Mode",
    "Payload",
    "Settings",
    "SettingsError",
    "activate_options",
    "activation_config",
    "activation_mode",
    "activation_payload",
    "block_writer",
    "check_config_path",
    "core_index",
    "cycle_clock",
    "did_you_mean",
    "free_threaded",
    "from_environment",
    "gil_refusal",
    "lttng_clock_plugin",
    "parse_backend",
    "parse_events",
    "parse_mode",
    "parse_modules",
    "parse_payload",
    "switch",
]

ENV_SWITCH = "PINSIGHT_PYTHON"
ENV_MODE = "PINSIGHT_TRACE_PYTHON"  # PInsight's variable
ENV_EVENTS = "PINSIGHT_PYTHON_EVENTS"
ENV_BACKEND = "PINSIGHT_PYTHON_BACKEND"
ENV_CONFIG = "PINSIGHT_TRACE_CONFIG_FILE"  # PInsight's variable
ENV_MODULES = "PINSIGHT_PYTHON_MODULES"
ENV_EXCLUDE = "PINSIGHT_PYTHON_EXCLUDE"
ENV_PAYLOAD = "PINSIGHT_PYTHON_PAYLOAD"
# Set by a supervisor (pinsight-python trace) that reports the configuration's
# warnings and reload errors itself, once for the whole run: traced processes then
# keep theirs quiet.
ENV_CONFIG_REPORTED = "PINSIGHT_PYTHON_CONFIG_REPORTED"
# LTTng-UST's own: a plugin's clock times the events (lttng-ust(3)).
ENV_CLOCK_PLUGIN = "LTTNG_UST_CLOCK_PLUGIN"
# 0: the batched payload times its records with clock_gettime, not the CPU's cycle
# counter (docs/architecture.md, "The batched payload's clock").
ENV_CYCLE_CLOCK = "PINSIGHT_PYTHON_CYCLE_CLOCK"
# inline: each traced thread encodes and writes its own batched blocks, with no
# writer thread (nodes whose every core computes); thread, the default: a writer
# thread does (docs/architecture.md, "The writer thread").
ENV_BLOCK_WRITER = "PINSIGHT_PYTHON_BLOCK_WRITER"
# Set by pinsight-python trace: its output folder, the first argument of an
# INTROSPECT window end's script (docs/configuration.md, "Introspection").
ENV_TRACE_DIR = "PINSIGHT_PYTHON_TRACE_DIR"



class Mode(enum.Enum):
    """The Python domain's trace modes, in the core's order (src/config/config.h)."""

    OFF = "OFF"
    STANDBY = "STANDBY"
    MONITORING = "MONITORING"
    TRACING = "TRACING"


class Payload(enum.Enum):
    """README, "Payloads: full, compact and batched"; in the core's order."""

    FULL = "full"
    COMPACT = "compact"
    BATCHED = "batched"


class Event(enum.Enum):
    """What activate(events=...) turns on. import: import_begin/import_end; alloc:
    alloc_sample/free_sample (docs/imports_and_allocs.md); gil: gil_switch/gil_released
    (docs/analysis.md, "The GIL")."""

    FUNCTION = "function"
    C_CALL = "c_call"
    IMPORT = "import"
    ALLOC = "alloc"
    GIL = "gil"


class Backend(enum.Enum):
    AUTO = "auto"
    SYS_MONITORING = "sys.monitoring"
    SETPROFILE = "setprofile"


def core_index(member: enum.Enum) -> int:
    """The member's place in its enum: what the core takes for a mode or payload."""
    return list(type(member)).index(member)


MODES = tuple(m.value for m in Mode)
BACKENDS = tuple(b.value for b in Backend)
PAYLOADS = tuple(p.value for p in Payload)
ALL_EVENT_NAMES = tuple(e.value for e in Event)
EVENT_NAMES = (Event.FUNCTION.value, Event.C_CALL.value)  # the default
# The modules (globals' __name__) of importlib's frozen bootstrap, whose frames fill
# every import: what --ignore-frozen leaves out. 3.11+ names them after importlib's
# own submodules; 3.8-3.10 as the frozen modules.
FROZEN_IMPORTLIB = (
    "importlib._bootstrap",
    "importlib._bootstrap_external",
    "_frozen_importlib",
    "_frozen_importlib_external",
)


class SettingsError(ValueError):
    """An option or variable has a value we cannot use; the message says which."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of `choices`, or nothing."""
    by_folded = {c.casefold(): c for c in choices}
    import difflib  # here: every traced process imports this module

    close = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=0.6)
    return f"; did you mean {by_folded[close[0]]!r}?" if close else ""


def _expected(choices: Sequence[str]) -> str:
    return ", ".join(choices[:-1]) + " or " + choices[-1]


def _one_of(value: str, choices: Sequence[str], source: str, what: str, given: str,
            expected: str) -> str:
    if value not in choices:
        raise SettingsError(f"{source}: unknown {what} {given!r} (expected {expected})"
                            + did_you_mean(value, choices))
    return value


def parse_events(text: str, source: str) -> List[str]:
    events = [e.strip() for e in text.split(",") if e.strip()]
    expected = "a list of " + ", ".join(ALL_EVENT_NAMES)
    if not events:
        raise SettingsError(f"{source}: no event named (expected {expected})")
    for event in events:
        _one_of(event, ALL_EVENT_NAMES, source, "event", event, expected)
    return events


def free_threaded() -> bool:
    """This CPython was built without the GIL (PEP 703, Py_GIL_DISABLED): its ABI
    flags carry "t". Not sysconfig, which imports threading (activation must not:
    tests/core/test_neighbours.py)."""
    return "t" in getattr(sys, "abiflags", "")


def gil_refusal(events: Iterable[str]) -> str:
    """Why these events cannot be traced on this CPython (gil on a free-threaded
    build), or "". The core says the same (src/common/compat.h)."""
    if "gil" in events and free_threaded():
        return ("gil events: this CPython is free-threaded (built with Py_GIL_DISABLED): "
                "there is no GIL to wait for; trace without gil")
    return ""


def parse_mode(text: str, source: str) -> str:
    return _one_of(text.strip().upper(), MODES, source, "trace mode", text, _expected(MODES))


def mode_of(given: Union[str, Mode], source: str) -> Mode:
    """A mode as the API takes it (a Mode, or its name in any case) as the enum."""
    return given if isinstance(given, Mode) else Mode(parse_mode(given, source))


def parse_backend(text: str, source: str) -> str:
    return _one_of(text, BACKENDS, source, "backend", text, _expected(BACKENDS))


def parse_payload(text: str, source: str) -> str:
    return _one_of(text.strip().lower(), PAYLOADS, source, "payload", text, _expected(PAYLOADS))


def _module_name_ok(name: str) -> bool:
    # The configuration parser's rule for module_filter/module_exclude entries.
    if not name or name[0] == "." or name[-1] == "." or ".." in name:
        return False
    return all(c.isalnum() or c in "_." or ord(c) >= 0x80 for c in name)


def parse_modules(text: str, source: str) -> List[str]:
    """``numpy,mypkg.solver`` -> the names; each matches the module and its submodules."""
    names: List[str] = []
    for name in (n.strip() for n in text.split(",")):
        if not _module_name_ok(name):
            raise SettingsError(
                f"{source}: expected module names such as numpy or numpy.linalg, got {name!r} "
                "(a name matches the module and its submodules; no wildcards)"
            )
        if name not in names:
            names.append(name)
    return names


def check_config_path(path: str, source: str) -> str:
    """The configuration file as an absolute path (children may run elsewhere).

    Only a regular file is accepted: opening a FIFO would block until someone
    writes to it, and a device never ends.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise SettingsError(f"{source}: no such configuration file: {path}") from None
    except OSError as e:
        raise SettingsError(f"{source}: cannot read the configuration file {path}: "
                            f"{e.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else (
            "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file")
        raise SettingsError(
            f"{source}: {path} is {kind}: a trace configuration must be a regular file"
        )
    if not os.access(path, os.R_OK):
        raise SettingsError(f"{source}: cannot read the configuration file {path}: "
                            "permission denied")
    return os.path.abspath(path)


class Settings:
    """What to trace, as options or variables give it; None: not given (the default,
    or the configuration's own value, applies). A plain class, not a dataclass:
    every traced process imports this module, and dataclasses costs it inspect's
    import (about 10 ms)."""

    __slots__ = ("backend", "config", "events", "exclude", "mode", "modules", "payload")

    def __init__(
        self,
        events: Optional[List[str]] = None,
        mode: Optional[str] = None,
        backend: Optional[str] = None,
        config: Optional[str] = None,
        modules: Optional[List[str]] = None,
        exclude: Optional[List[str]] = None,
        payload: Optional[str] = None,
    ) -> None:
        self.events = events
        self.mode = mode
        self.backend = backend
        self.config = config
        self.modules = modules
        self.exclude: List[str] = exclude if exclude is not None else []
        self.payload = payload

    def _fields(self) -> Tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Settings({given})"

    def export(self, env: MutableMapping[str, str]) -> None:
        """Write the variables that make a Python child (a fresh interpreter) trace the
        same way; the switch, PINSIGHT_PYTHON=1, included."""
        env[ENV_SWITCH] = "1"
        if self.events is not None:
            env[ENV_EVENTS] = ",".join(self.events)
        if self.mode is not None:
            env[ENV_MODE] = self.mode
        if self.config is not None:
            env[ENV_CONFIG] = self.config
        if self.backend is not None:
            env[ENV_BACKEND] = self.backend
        if self.modules is not None:
            env[ENV_MODULES] = ",".join(self.modules)
        if self.exclude:
            env[ENV_EXCLUDE] = ",".join(self.exclude)
        if self.payload is not None:
            env[ENV_PAYLOAD] = self.payload


DEFAULT_CONFIG_FILE = "pinsight_trace_config.txt"  # PInsight's, in the working directory


def activation_config(given: str, environ: Mapping[str, str]) -> str:
    """The configuration file activate() reads: `given`, else PINSIGHT_TRACE_CONFIG_FILE,
    else ./pinsight_trace_config.txt if present; "" for the built-in default (trace
    everything). The core parses whatever this names and reports its errors."""
    if given:
        return given
    named = environ.get(ENV_CONFIG, "").strip()
    if named:
        return named
    return DEFAULT_CONFIG_FILE if os.path.exists(DEFAULT_CONFIG_FILE) else ""


def activation_mode(given: Union[str, Mode, None], environ: Mapping[str, str]) -> Optional[Mode]:
    """activate()'s mode: `given`, else PINSIGHT_TRACE_PYTHON; None for the configuration's."""
    if given:
        return mode_of(given, "activate(mode=...)")
    text = _variable(environ, ENV_MODE)
    return Mode(text) if text else None


def activation_payload(
    given: Union[str, Payload, None], environ: Mapping[str, str]
) -> Optional[Payload]:
    """activate()'s payload: `given`, else PINSIGHT_PYTHON_PAYLOAD; None for the configuration's."""
    if isinstance(given, Payload):
        return given
    if given:
        return Payload(parse_payload(given, "activate(payload=...)"))
    text = _variable(environ, ENV_PAYLOAD)
    return Payload(text) if text else None


def switch(environ: Mapping[str, str]) -> Optional[bool]:
    """PINSIGHT_PYTHON: True (1), False (0) or None (unset or empty)."""
    value = environ.get(ENV_SWITCH, "").strip()
    if not value:
        return None
    if value in ("1", "0"):
        return value == "1"
    raise SettingsError(f"{ENV_SWITCH}: expected 1 or 0, got {value!r}")


def mode_requests_tracing(environ: Mapping[str, str]) -> bool:
    """PINSIGHT_TRACE_PYTHON names a mode other than OFF, or a bad one (which
    activation then reports)."""
    try:
        text = _variable(environ, ENV_MODE)
    except SettingsError:
        return True
    return bool(text) and text != Mode.OFF.value


class ActivateOptions:
    """activate()'s arguments and the variables, resolved once: what the core is handed
    (its ActivateOptions, src/session/session.h). None: the configuration's value.
    Immutable; a plain class rather than a frozen dataclass or a NamedTuple for the
    import cost (see Settings)."""

    __slots__ = ("backend", "block_writer", "clock_plugin", "config_path", "cycle_clock", "events",
                 "mode", "module_exclude", "module_filter", "payload", "report_config")

    events: Tuple[Event, ...]
    config_path: str  # "" for the built-in default (trace everything)
    mode: Optional[Mode]
    backend: Backend
    payload: Optional[Payload]
    module_filter: Optional[Tuple[str, ...]]  # None: the configuration's module_filter
    module_exclude: Tuple[str, ...]
    # False under a supervisor that reports the configuration's warnings and reload
    # errors once for the whole run (pinsight-python trace).
    report_config: bool
    clock_plugin: bool  # LTTNG_UST_CLOCK_PLUGIN set: the core refuses batched
    cycle_clock: bool  # PINSIGHT_PYTHON_CYCLE_CLOCK: batched records timed by the CPU's counter
    block_writer: bool  # PINSIGHT_PYTHON_BLOCK_WRITER: batched blocks written by a thread of ours

    def __init__(self, **fields: object) -> None:
        missing = set(self.__slots__) - set(fields)
        unknown = set(fields) - set(self.__slots__)
        if missing or unknown:
            raise TypeError(f"ActivateOptions: missing {sorted(missing)}, "
                            f"unknown {sorted(unknown)}")
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ActivateOptions is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActivateOptions) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"ActivateOptions({given})"

    def core_arguments(self) -> Dict[str, object]:
        """The core's activate() keywords that these options decide."""
        return {
            "function_events": Event.FUNCTION in self.events,
            "c_call_events": Event.C_CALL in self.events,
            "import_events": Event.IMPORT in self.events,
            "alloc_events": Event.ALLOC in self.events,
            "gil_events": Event.GIL in self.events,
            "config_path": self.config_path,
            "mode": -1 if self.mode is None else core_index(self.mode),
            "backend": self.backend.value,
            "payload": -1 if self.payload is None else core_index(self.payload),
            "module_filter": None if self.module_filter is None else list(self.module_filter),
            "module_exclude": list(self.module_exclude),
            "report_config": self.report_config,
            "clock_plugin": self.clock_plugin,
            "cycle_clock": self.cycle_clock,
            "block_writer": self.block_writer,
        }


class ArgumentError(SettingsError):
    """A bad argument of activate() itself (events, backend, modules, exclude)."""


def activate_options(
    events: Iterable[Union[str, Event]],
    config: str,
    mode: Union[str, Mode, None],
    backend: Union[str, Backend],
    modules: Optional[Iterable[str]],
    exclude: Iterable[str],
    payload: Union[str, Payload, None],
    environ: Mapping[str, str],
) -> ActivateOptions:
    """activate()'s arguments, checked, with the defaults and variables they leave to
    them: ArgumentError for a bad argument, SettingsError for a bad mode, payload or
    variable."""
    try:
        names = [name for e in events for name in parse_events(
            e.value if isinstance(e, Event) else e, "activate(events=...)")]
        chosen_backend = backend if isinstance(backend, Backend) else Backend(
            parse_backend(backend, "activate(backend=...)"))
        module_filter = (
            None if modules is None
            else tuple(parse_modules(",".join(modules), "activate(modules=...)")))
        exclude = list(exclude)
        module_exclude = (
            tuple(parse_modules(",".join(exclude), "activate(exclude=...)")) if exclude else ())
    except SettingsError as e:
        raise ArgumentError(str(e)) from None
    return ActivateOptions(
        events=tuple(Event(name) for name in names),
        config_path=activation_config(config, environ),
        mode=activation_mode(mode, environ),
        backend=chosen_backend,
        payload=activation_payload(payload, environ),
        module_filter=module_filter,
        module_exclude=module_exclude,
        report_config=not environ.get(ENV_CONFIG_REPORTED),
        clock_plugin=lttng_clock_plugin(environ),
        cycle_clock=cycle_clock(environ),
        block_writer=block_writer(environ),
    )


# Each variable: the Settings field it sets and the check its text goes through,
# in the order errors are reported.
_VARIABLES: Tuple[Tuple[str, str, Callable[[str, str], object]], ...] = (
    (ENV_EVENTS, "events", parse_events),
    (ENV_MODE, "mode", parse_mode),
    (ENV_BACKEND, "backend", parse_backend),
    (ENV_CONFIG, "config", check_config_path),
    (ENV_MODULES, "modules", parse_modules),
    (ENV_EXCLUDE, "exclude", parse_modules),
    (ENV_PAYLOAD, "payload", parse_payload),
)


def lttng_clock_plugin(environ: Mapping[str, str]) -> bool:
    """Whether LTTng-UST times events with a plugin's clock (set at all, as
    LTTng-UST reads it): the batched payload's records, timed with
    CLOCK_MONOTONIC, would not line up with them, so the core refuses batched."""
    return ENV_CLOCK_PLUGIN in environ


def _two_way(environ: Mapping[str, str], name: str, first: str, second: str, off: str) -> bool:
    """A variable of two values (unset: on); False when it is `off`."""
    text = environ.get(name, "").strip()
    if text not in ("", first, second):
        raise SettingsError(f"{name}={text!r}: expected {first} or {second}")
    return text != off


def cycle_clock(environ: Mapping[str, str]) -> bool:
    """Whether the batched payload may time its records with the CPU's cycle counter
    (where the counter is invariant; 1, the default) or must call clock_gettime (0)."""
    return _two_way(environ, ENV_CYCLE_CLOCK, "0", "1", off="0")


def block_writer(environ: Mapping[str, str]) -> bool:
    """Whether the batched payload's blocks are encoded and written by a writer
    thread (thread, the default) or by each traced thread itself (inline)."""
    return _two_way(environ, ENV_BLOCK_WRITER, "thread", "inline", off="inline")


def _variable(environ: Mapping[str, str], name: str) -> object:
    """The variable's value, checked as _VARIABLES says; None when unset or blank."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    return next(check for var, _, check in _VARIABLES if var == name)(text, name)


def from_environment(environ: Mapping[str, str], errors: Optional[List[str]] = None) -> Settings:
    """The settings the variables give. Each bad value raises SettingsError, or, with
    `errors`, is appended there and left unset (to report every error at once)."""
    settings = Settings()
    for name, field_name, _check in _VARIABLES:
        try:
            value = _variable(environ, name)
            if value is not None:
                setattr(settings, field_name, value)
        except SettingsError as e:
            if errors is None:
                raise
            errors.append(str(e))
    return settings


# ---------------------------------------------------------------------------
# The options that set them: `pinsight-python trace` and `python -m pinsight_python`.

CONFIG_HELP = (
    "PInsight trace configuration file (default: PINSIGHT_TRACE_CONFIG_FILE, else "
    "./pinsight_trace_config.txt if present, else trace everything)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings' options, the same for every command that starts tracing."""
    group = parser.add_argument_group("what to trace")
    group.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    group.add_argument("--events", metavar="LIST",
                       help=f"any of {', '.join(ALL_EVENT_NAMES)} "
                       f"(default: {','.join(EVENT_NAMES)})")
    group.add_argument("--mode", metavar="MODE",
                       help=f"{_expected(MODES[::-1])} (default: PINSIGHT_TRACE_PYTHON "
                       "if set, else the configuration's trace_mode, TRACING without one)")
    group.add_argument("--backend", metavar="NAME",
                       help=f"{_expected(BACKENDS)} (default: {Backend.AUTO.value})")
    group.add_argument("--module", metavar="LIST", action="append",
                       help="trace only these modules and their submodules (comma-separated; "
                       "replaces the configuration's module_filter)")
    group.add_argument("--exclude", metavar="LIST", action="append",
                       help="never trace these modules and their submodules (comma-separated; "
                       "added to the configuration's module_exclude)")
    add_payload_arguments(group)
    group.add_argument("--ignore-frozen", action="store_true",
                       help="leave out importlib's frozen bootstrap frames (<frozen "
                       "importlib._bootstrap>), which fill every import")


def add_payload_arguments(group: argparse._ActionsContainer) -> None:
    """--compact and --batch (trace, python -m pinsight_python, attach). `group`:
    an argument group or parser; attach's is mutually exclusive."""
    group.add_argument("--compact", action="store_true",
                       help="compact payload: integer events, names once per function and "
                       "second (about 40%% of the bytes; the first second of a late-started "
                       "trace is named by id; default: the configuration's [Python] payload, "
                       "else full)")
    group.add_argument("--batch", action="store_true",
                       help="batched payload: compact's records packed per thread into one "
                       "event per block of a few KiB, flushed at least every 100 ms (the "
                       "cheapest per call; Trace Compass needs `pinsight-python unbatch`)")


def payload_option(args: argparse.Namespace) -> Optional[str]:
    """The payload add_payload_arguments()' options chose, None for neither."""
    if getattr(args, "compact", False):
        return "compact"
    return "batched" if getattr(args, "batch", False) else None


def from_arguments(args: argparse.Namespace, errors: List[str]) -> Settings:
    """The settings add_arguments()' options give; each bad value is appended to
    `errors` (all of them, to report them at once) and left unset."""
    settings = Settings()

    def attempt(option: str, parse: Callable[[str, str], object]) -> Any:
        text = getattr(args, option.lstrip("-").replace("-", "_"))
        if text is None:
            return None
        if isinstance(text, list):
            text = ",".join(text)
        try:
            return parse(text, option)
        except SettingsError as e:
            errors.append(str(e))
            return None

    settings.events = attempt("--events", parse_events)
    settings.mode = attempt("--mode", parse_mode)
    settings.backend = attempt("--backend", parse_backend)
    settings.config = attempt("--config", check_config_path)
    settings.modules = attempt("--module", parse_modules)
    exclude: List[str] = attempt("--exclude", parse_modules) or []
    if args.ignore_frozen:
        exclude += [m for m in FROZEN_IMPORTLIB if m not in exclude]
    settings.exclude = exclude
    if getattr(args, "compact", False) and getattr(args, "batch", False):
        errors.append("--compact and --batch: choose one payload")
    else:
        settings.payload = payload_option(args)
    return settings
