"""The tracing settings: one table, one set of rules for every entry point.

Each setting is declared once, as a row of :data:`SETTINGS` (a :class:`Setting`): its
name (activate()'s keyword and the :class:`Settings` field), its environment variable,
its command-line option and help, the parser its text goes through (which says what
is allowed), its default and the core's keyword. The rest is made from the table: the
variables that make child interpreters trace the same way (:meth:`Settings.export`),
the options of ``pinsight-python trace``, ``python -m pinsight_python`` and ``attach``
(``activation/arguments.py``), what activate() resolves
(:func:`activate_options`) and the core's arguments
(:meth:`ActivateOptions.core_arguments`). docs/architecture.md, "How to add a setting",
shows a row and its use; tests/unit/test_settings.py fails for a row that does not
reach every one of them.

A value is parsed from its text once per process, by its row's parser, into its one
Python form: a member of the enums below (:class:`Mode`, :class:`Payload`,
:class:`Event`, :class:`Backend`), a list of them or of module names, a path, a flag.
The core takes it in one form too: a mode or payload as its place in the core's own
list (``_pinsight_python.MODES``, ``PAYLOADS``; ``EVENTS`` and ``BACKENDS`` name the
others), which tests/unit/test_settings.py holds equal to these enums.

Importing this module costs nothing beyond the standard library: the start-up shim
reads it before it knows whether tracing is wanted.
"""

from __future__ import annotations

import enum
import os
import stat
import sys

# Every traced process imports this module at its start: typing (about 5 ms with what
# it imports) is for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
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
    "ENV_CONFIG_REPORTED",
    "ENV_CYCLE_CLOCK",
    "ENV_EVENTS",
    "ENV_EXCLUDE",
    "ENV_FLIGHT_RECORDER",
    "ENV_MODE",
    "ENV_MODULES",
    "ENV_PAYLOAD",
    "ENV_SWITCH",
    "ENV_TRACE_DIR",
    "EVENT_NAMES",
    "FROZEN_IMPORTLIB",
    "MODES",
    "PAYLOADS",
    "SETTING",
    "SETTINGS",
    "ActivateOptions",
    "Backend",
    "Event",
    "Flags",
    "Mode",
    "Option",
    "Payload",
    "Setting",
    "Settings",
    "SettingsError",
    "activate_options",
    "activation",
    "block_writer",
    "check_config_path",
    "core_index",
    "cycle_clock",
    "default_config",
    "did_you_mean",
    "free_threaded",
    "from_environment",
    "gil_refusal",
    "parse_backend",
    "parse_events",
    "parse_mode",
    "parse_modules",
    "parse_payload",
    "resolve",
    "switch",
]

# The switch: whether a process traces at all, not how (read by the .pth line too).
ENV_SWITCH = "PINSIGHT_PYTHON"
# The settings' variables, each named in its row of SETTINGS below.
ENV_MODE = "PINSIGHT_TRACE_PYTHON"  # PInsight's variable
ENV_EVENTS = "PINSIGHT_PYTHON_EVENTS"
ENV_BACKEND = "PINSIGHT_PYTHON_BACKEND"
ENV_CONFIG = "PINSIGHT_TRACE_CONFIG_FILE"  # PInsight's variable
ENV_MODULES = "PINSIGHT_PYTHON_MODULES"
ENV_EXCLUDE = "PINSIGHT_PYTHON_EXCLUDE"
ENV_PAYLOAD = "PINSIGHT_PYTHON_PAYLOAD"
ENV_CONFIG_REPORTED = "PINSIGHT_PYTHON_CONFIG_REPORTED"
ENV_CLOCK_PLUGIN = "LTTNG_UST_CLOCK_PLUGIN"  # LTTng-UST's own (lttng-ust(3))
ENV_CYCLE_CLOCK = "PINSIGHT_PYTHON_CYCLE_CLOCK"
ENV_BLOCK_WRITER = "PINSIGHT_PYTHON_BLOCK_WRITER"
ENV_TRACE_DIR = "PINSIGHT_PYTHON_TRACE_DIR"
ENV_FLIGHT_RECORDER = "PINSIGHT_PYTHON_FLIGHT_RECORDER"


# The enums below are str's too (as 3.11's enum.StrEnum, which 3.8 lacks): a member
# equals its name, which is its text in variables, options and attach's request, and
# prints as it (a base enum of their own would cost every traced process its making).
def _name(member: enum.Enum) -> str:
    return str(member.value)


class Mode(str, enum.Enum):
    """The Python domain's trace modes, in the core's order (src/common/settings.h)."""

    OFF = "OFF"
    STANDBY = "STANDBY"
    MONITORING = "MONITORING"
    TRACING = "TRACING"
    __str__ = _name


class Payload(str, enum.Enum):
    """README, "Payloads: full, compact and batched"; in the core's order."""

    FULL = "full"
    COMPACT = "compact"
    BATCHED = "batched"
    __str__ = _name


class Event(str, enum.Enum):
    """What activate(events=...) turns on. import: import_begin/import_end; alloc:
    alloc_sample/free_sample (docs/imports_and_allocs.md); gil: gil_switch/gil_released
    (docs/analysis.md, "The GIL"). In the core's order."""

    FUNCTION = "function"
    C_CALL = "c_call"
    IMPORT = "import"
    ALLOC = "alloc"
    GIL = "gil"
    __str__ = _name


class Backend(str, enum.Enum):
    """The event source, in the core's order."""

    AUTO = "auto"
    SYS_MONITORING = "sys.monitoring"
    SETPROFILE = "setprofile"
    __str__ = _name


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
DEFAULT_CONFIG_FILE = "pinsight_trace_config.txt"  # PInsight's, in the working directory


class SettingsError(ValueError):
    """An option or variable has a value we cannot use; the message says which."""


class ArgumentError(SettingsError):
    """A bad argument of activate() itself (events, backend, modules, exclude)."""


# ---------------------------------------------------------------------------
# The parsers: (text, where it came from) -> the value, or SettingsError naming both.


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


def parse_events(text: str, source: str) -> List[Event]:
    events = [e.strip() for e in text.split(",") if e.strip()]
    expected = "a list of " + ", ".join(ALL_EVENT_NAMES)
    if not events:
        raise SettingsError(f"{source}: no event named (expected {expected})")
    return [Event(_one_of(e, ALL_EVENT_NAMES, source, "event", e, expected)) for e in events]


def parse_mode(text: str, source: str) -> Mode:
    return Mode(_one_of(text.strip().upper(), MODES, source, "trace mode", text, _expected(MODES)))


def parse_backend(text: str, source: str) -> Backend:
    return Backend(_one_of(text, BACKENDS, source, "backend", text, _expected(BACKENDS)))


def parse_payload(text: str, source: str) -> Payload:
    return Payload(_one_of(text.strip().lower(), PAYLOADS, source, "payload", text,
                           _expected(PAYLOADS)))


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


def _two_way(first: str, second: str, off: str) -> Callable[[str, str], bool]:
    """A variable of two values: False when it is `off`."""

    def parse(text: str, source: str) -> bool:
        if text not in (first, second):
            raise SettingsError(f"{source}={text!r}: expected {first} or {second}")
        return text != off

    return parse


def _reported(text: str, source: str) -> bool:
    return False  # set at all: a supervisor reports the configuration


def _set(text: str, source: str) -> bool:
    return True


def _path(text: str, source: str) -> str:
    return text


def _seconds(text: str, source: str) -> float:
    """A duration in seconds, 0 or more."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 1e9:  # NaN too
        raise SettingsError(f"{source}={text!r}: expected seconds (0 or more)")
    return seconds


# ---------------------------------------------------------------------------
# activate()'s arguments, as it takes them: a member, a name, a list of either.


def _api_choice(
    parse: Callable[[str, str], Any], blank_unset: bool = True
) -> Callable[[Any, str], Any]:
    """A member as it is, a name parsed; "" is not given (blank_unset: a setting the
    variable or the configuration gives then)."""

    def accept(given: Any, source: str) -> Any:
        if isinstance(given, enum.Enum):
            return given
        return None if blank_unset and not given else parse(given, source)

    return accept


def _api_events(given: Any, source: str) -> List[Event]:
    if isinstance(given, str) and not isinstance(given, Event):
        given = [e for e in given.split(",") if e.strip()]
    return [e for item in given
            for e in ([item] if isinstance(item, Event) else parse_events(item, source))]


def _api_path(given: Any, source: str) -> Optional[str]:
    # As given (the core reports what it cannot read, file and line); "": not given.
    return os.fspath(given) or None


def _api_modules(given: Any, source: str) -> List[str]:
    return parse_modules(",".join(given), source)


def _api_exclude(given: Any, source: str) -> Optional[List[str]]:
    names = list(given)
    return parse_modules(",".join(names), source) if names else None  # none: nothing added


# ---------------------------------------------------------------------------
# Defaults that depend on the process.


def default_config(environ: Mapping[str, str]) -> str:
    """./pinsight_trace_config.txt if present (PInsight's), else "": the built-in
    default configuration (trace everything)."""
    return DEFAULT_CONFIG_FILE if os.path.exists(DEFAULT_CONFIG_FILE) else ""


def _lttng_home(environ: Mapping[str, str]) -> str:
    # Where LTTng writes traces by default: $LTTNG_HOME, else $HOME, /lttng-traces.
    home = environ.get("LTTNG_HOME") or environ.get("HOME")
    return home + "/lttng-traces" if home is not None else ""


# ---------------------------------------------------------------------------
# The table.


class Option:
    """A setting's command-line option taking text, which the setting's parser reads.
    `append`: it may be given several times (joined with commas); `target_help`:
    the help of attach, where the setting's default is the target's."""

    __slots__ = ("append", "flag", "help", "metavar", "target_help")

    def __init__(self, flag: str, metavar: str, help: str, *, append: bool = False,
                 target_help: Optional[str] = None) -> None:
        self.flag, self.metavar, self.help = flag, metavar, help
        self.append, self.target_help = append, target_help


class Flags:
    """A setting's options with no text: one flag per value (payload's --compact and
    --batch), at most one of them given."""

    __slots__ = ("flags",)

    def __init__(self, *flags: Tuple[str, object, str]) -> None:
        self.flags = flags  # (flag, value, help)


class Setting:
    """One setting and every name it goes by.

    name: activate()'s keyword and the field of :class:`Settings`. variable: the
    environment variable child interpreters inherit it by. parse: text -> value
    (SettingsError naming the source). text: value -> the variable's text, None for a
    variable not ours to write. default: the value when nothing gives one (a callable
    takes the environment). core: the core's keyword (several for events, one flag
    each), the field of :class:`ActivateOptions`; to_core: value -> what the core takes.
    option: on the command line. api: activate()'s argument -> value (None: not an
    argument of activate()). inherits: activate() reads the variable when its argument
    is not given (the configuration's settings do; events, backend and modules do
    not). adds: the options add to the variable's list rather than replace it.
    present: the variable counts when set at all, even empty.
    """

    __slots__ = ("adds", "api", "core", "default", "inherits", "name", "option", "parse",
                 "present", "text", "to_core", "variable")

    def __init__(
        self,
        name: str,
        variable: str,
        parse: Callable[[str, str], Any],
        *,
        default: Any,
        core: Union[str, Tuple[str, ...]],
        to_core: Callable[[Any], Any] = lambda value: value,
        text: Optional[Callable[[Any], str]] = str,
        option: Union[Option, Flags, None] = None,
        api: Optional[Callable[[Any, str], Any]] = None,
        inherits: bool = True,
        adds: bool = False,
        present: bool = False,
    ) -> None:
        self.name, self.variable, self.parse, self.default = name, variable, parse, default
        self.core, self.to_core, self.text, self.option = core, to_core, text, option
        self.api, self.inherits, self.adds, self.present = api, inherits, adds, present

    @property
    def field(self) -> str:
        """Its field of ActivateOptions: the core's keyword, or its name for several."""
        return self.core if isinstance(self.core, str) else self.name

    @property
    def keywords(self) -> Tuple[str, ...]:
        return (self.core,) if isinstance(self.core, str) else self.core

    def read(self, environ: Mapping[str, str]) -> Any:
        """The variable's value, parsed; None when unset (or blank)."""
        if self.present:
            return self.parse(environ[self.variable], self.variable) if (
                self.variable in environ) else None
        text = environ.get(self.variable, "").strip()
        return self.parse(text, self.variable) if text else None

    def default_in(self, environ: Mapping[str, str]) -> Any:
        return self.default(environ) if callable(self.default) else self.default

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, {self.variable!r})"


def _joined(values: Iterable[str]) -> str:
    return ",".join(values)


def _index_or_none(member: Optional[enum.Enum]) -> int:
    return -1 if member is None else core_index(member)


def _list_or_none(names: Optional[Sequence[str]]) -> Optional[List[str]]:
    return None if names is None else list(names)


# In the order their errors are reported, and their options listed. A row here is a
# setting everywhere: see docs/architecture.md, "How to add a setting".
SETTINGS: Tuple[Setting, ...] = (
    Setting(
        "events", ENV_EVENTS, parse_events, text=_joined, api=_api_events, inherits=False,
        default=(Event.FUNCTION, Event.C_CALL),
        core=tuple(f"{e.value}_events" for e in Event),
        to_core=lambda events: tuple(e in events for e in Event),
        option=Option("--events", "LIST", f"any of {', '.join(ALL_EVENT_NAMES)} "
                      f"(default: {','.join(EVENT_NAMES)})"),
    ),
    Setting(
        "mode", ENV_MODE, parse_mode, api=_api_choice(parse_mode),
        default=None, core="mode", to_core=_index_or_none,  # None: the configuration's
        option=Option(
            "--mode", "MODE",
            f"{_expected(MODES[::-1])} (default: PINSIGHT_TRACE_PYTHON if set, else the "
            "configuration's trace_mode, TRACING without one)",
            target_help=f"{_expected(MODES[::-1])} (default: the target's "
            "PINSIGHT_TRACE_PYTHON, else the configuration's trace_mode, TRACING without one)"),
    ),
    Setting(
        "backend", ENV_BACKEND, parse_backend, inherits=False,
        api=_api_choice(parse_backend, blank_unset=False),
        default=Backend.AUTO, core="backend", to_core=lambda backend: backend.value,
        option=Option("--backend", "NAME",
                      f"{_expected(BACKENDS)} (default: {Backend.AUTO.value})"),
    ),
    Setting(
        "config", ENV_CONFIG, check_config_path, api=_api_path,
        default=default_config, core="config_path",  # "": the built-in default
        option=Option(
            "--config", "FILE",
            "PInsight trace configuration file (default: PINSIGHT_TRACE_CONFIG_FILE, else "
            "./pinsight_trace_config.txt if present, else trace everything)",
            target_help="PInsight trace configuration file"),
    ),
    Setting(
        "modules", ENV_MODULES, parse_modules, text=_joined, api=_api_modules, inherits=False,
        default=None, core="module_filter", to_core=_list_or_none,  # None: the configuration's
        option=Option("--module", "LIST",
                      "trace only these modules and their submodules (comma-separated; "
                      "replaces the configuration's module_filter)", append=True),
    ),
    Setting(
        "exclude", ENV_EXCLUDE, parse_modules, text=_joined, api=_api_exclude, inherits=False,
        adds=True, default=(), core="module_exclude", to_core=list,
        option=Option("--exclude", "LIST",
                      "never trace these modules and their submodules (comma-separated; "
                      "added to the configuration's module_exclude)", append=True),
    ),
    Setting(
        "payload", ENV_PAYLOAD, parse_payload, api=_api_choice(parse_payload),
        default=None, core="payload", to_core=_index_or_none,  # None: the configuration's
        option=Flags(
            ("--compact", Payload.COMPACT,
             "compact payload: integer events, names once per function and second (about "
             "40%% of the bytes; the first second of a late-started trace is named by id; "
             "default: the configuration's [Python] payload, else full)"),
            ("--batch", Payload.BATCHED,
             "batched payload: compact's records packed per thread into one event per block "
             "of a few KiB, flushed at least every 100 ms (the cheapest per call; Trace "
             "Compass needs `pinsight-python unbatch`)"),
        ),
    ),
    # Set by a supervisor (pinsight-python trace) that reports the configuration's
    # warnings and reload errors itself, once for the whole run: traced processes then
    # keep theirs quiet.
    Setting("report_config", ENV_CONFIG_REPORTED, _reported, default=True,
            text=lambda report: "" if report else "1", core="report_config"),
    # A plugin's clock times LTTng-UST's events (set at all, as LTTng-UST reads it): the
    # batched payload's records, timed with CLOCK_MONOTONIC, would not line up with them,
    # so the core refuses batched.
    Setting("clock_plugin", ENV_CLOCK_PLUGIN, _set, text=None, present=True,
            default=False, core="clock_plugin"),
    # 0: the batched payload times its records with clock_gettime, not the CPU's cycle
    # counter (docs/architecture.md, "The batched payload's clock").
    Setting("cycle_clock", ENV_CYCLE_CLOCK, _two_way("0", "1", off="0"),
            text=lambda counter: "1" if counter else "0", default=True, core="cycle_clock"),
    # inline: each traced thread encodes and writes its own batched blocks, with no
    # writer thread (nodes whose every core computes); thread, the default: a writer
    # thread does (docs/architecture.md, "The writer thread").
    Setting("block_writer", ENV_BLOCK_WRITER, _two_way("thread", "inline", off="inline"),
            text=lambda thread: "thread" if thread else "inline", default=True,
            core="block_writer"),
    # Where the trace goes, the first argument of an INTROSPECT window end's script
    # (docs/configuration.md, "Introspection"): trace's output folder, else LTTng's.
    Setting("trace_dir", ENV_TRACE_DIR, _path, default=_lttng_home, core="trace_dir"),
    # A flight-recorder run's (pinsight-python trace --flight-recorder sets it from
    # --stall): its stall watch's seconds, 0 for none; unset, no flight recorder. Each
    # traced process of the run keeps a connection to the run's keeper and takes part
    # in its dumps (docs/flight_recorder.md).
    Setting("flight_recorder", ENV_FLIGHT_RECORDER, _seconds, text=lambda s: f"{s:g}",
            default=None, core="flight_stall_s",
            to_core=lambda stall: -1.0 if stall is None else float(stall)),
)
SETTING: Dict[str, Setting] = {s.name: s for s in SETTINGS}


class Settings:
    """What to trace, as options or variables give it, one field per row of SETTINGS;
    None: not given (the default, or the configuration's own value, applies). A plain
    class, not a dataclass: every traced process imports this module, and dataclasses
    costs it inspect's import (about 10 ms)."""

    __slots__ = tuple(s.name for s in SETTINGS)

    def __init__(self, **given: Any) -> None:
        unknown = set(given) - set(SETTING)
        if unknown:
            raise TypeError(f"Settings: unknown {sorted(unknown)}")
        for s in SETTINGS:
            setattr(self, s.name, given.get(s.name))

    if TYPE_CHECKING:  # the fields (a row each), for the checker
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def _fields(self) -> Tuple[object, ...]:
        return tuple(getattr(self, s.name) for s in SETTINGS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        given = ", ".join(f"{s.name}={getattr(self, s.name)!r}" for s in SETTINGS)
        return f"Settings({given})"

    def over(self, inherited: Settings) -> Settings:
        """These settings, the inherited ones where these give none (added to them,
        for a setting whose options add to its variable's list)."""
        merged = Settings()
        for s in SETTINGS:
            mine, theirs = getattr(self, s.name), getattr(inherited, s.name)
            if s.adds and mine is not None and theirs is not None:
                mine = list(theirs) + [v for v in mine if v not in theirs]
            setattr(merged, s.name, theirs if mine is None else mine)
        return merged

    def export(self, env: MutableMapping[str, str]) -> None:
        """Write the variables that make a Python child (a fresh interpreter) trace the
        same way; the switch, PINSIGHT_PYTHON=1, included."""
        env[ENV_SWITCH] = "1"
        for s in SETTINGS:
            value = getattr(self, s.name)
            if value is not None and s.text is not None:
                env[s.variable] = s.text(value)


class ActivateOptions:
    """Every setting resolved (given, inherited, else its default): what the core is
    handed (its ActivateOptions, src/activation/activation.h). A field per row of SETTINGS,
    named as the core's keyword (events: its own name, one flag each for the core);
    None for a mode, payload or module filter: the configuration's. Sequences are
    tuples. Immutable; a plain class rather than a frozen dataclass or a NamedTuple
    for the import cost (see Settings)."""

    __slots__ = tuple(s.field for s in SETTINGS)

    if TYPE_CHECKING:  # the fields, for the checker
        def __getattr__(self, name: str) -> Any: ...

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
        """The core's activate() keywords, one (or one per event) for each setting."""
        arguments: Dict[str, object] = {}
        for s in SETTINGS:
            value = s.to_core(getattr(self, s.field))
            if isinstance(s.core, str):
                arguments[s.core] = value
            else:
                arguments.update(zip(s.core, value))
        return arguments


# ---------------------------------------------------------------------------
# Where settings come from: the environment, activate()'s arguments, the options.


def from_environment(
    environ: Mapping[str, str],
    errors: Optional[List[str]] = None,
    rows: Iterable[Setting] = SETTINGS,
) -> Settings:
    """The settings the variables give (those of `rows`), each parsed once. Each bad
    value raises SettingsError, or, with `errors`, is appended there and left unset
    (to report every error at once)."""
    settings = Settings()
    for s in rows:
        try:
            setattr(settings, s.name, s.read(environ))
        except SettingsError as e:
            if errors is None:
                raise
            errors.append(str(e))
    return settings


def resolve(chosen: Settings, environ: Mapping[str, str]) -> ActivateOptions:
    """`chosen`, each setting it leaves unset at its default: the options the core
    takes (`environ` for the defaults that depend on the process)."""
    fields = {}
    for s in SETTINGS:
        value = getattr(chosen, s.name)
        if value is None:
            value = s.default_in(environ)
        fields[s.field] = tuple(value) if isinstance(value, list) else value
    return ActivateOptions(**fields)


def activation(given: Settings, environ: Mapping[str, str]) -> ActivateOptions:
    """activate()'s rules: `given`, else the variables activate() reads (those of the
    settings that `inherits`), else the defaults. SettingsError for a bad variable."""
    left = [s for s in SETTINGS if s.inherits and getattr(given, s.name) is None]
    return resolve(given.over(from_environment(environ, rows=left)), environ)


def activate_options(
    events: Iterable[Union[str, Event]],
    config: Union[str, os.PathLike[str], None],
    mode: Union[str, Mode, None],
    backend: Union[str, Backend],
    modules: Optional[Iterable[str]],
    exclude: Iterable[str],
    payload: Union[str, Payload, None],
    environ: Mapping[str, str],
) -> ActivateOptions:
    """activate()'s arguments, checked, with the defaults and variables they leave to
    them: ArgumentError for a bad argument, SettingsError for a bad mode, payload or
    variable (a setting that a variable or the configuration also gives)."""
    arguments = {"events": events, "config": config, "mode": mode, "backend": backend,
                 "modules": modules, "exclude": exclude, "payload": payload}
    given = Settings()
    for name, value in arguments.items():
        s = SETTING[name]
        if value is None or s.api is None:
            continue
        try:
            setattr(given, name, s.api(value, f"activate({name}=...)"))
        except SettingsError as e:
            raise (e if s.inherits else ArgumentError(str(e))) from None
    return activation(given, environ)


def mode_of(given: Union[str, Mode], source: str) -> Mode:
    """A mode as the API takes it (a Mode, or its name in any case) as the enum."""
    return given if isinstance(given, Mode) else parse_mode(given, source)


def _variable_or_default(name: str, environ: Mapping[str, str]) -> Any:
    setting = SETTING[name]
    value = setting.read(environ)
    return setting.default_in(environ) if value is None else value


def cycle_clock(environ: Mapping[str, str]) -> bool:
    """Whether the batched payload may time its records with the CPU's cycle counter
    (where the counter is invariant; 1, the default) or must call clock_gettime (0)."""
    return bool(_variable_or_default("cycle_clock", environ))


def block_writer(environ: Mapping[str, str]) -> bool:
    """Whether the batched payload's blocks are encoded and written by a writer
    thread (thread, the default) or by each traced thread itself (inline)."""
    return bool(_variable_or_default("block_writer", environ))


# ---------------------------------------------------------------------------
# The start-up shim's questions, and what activation refuses before the core.


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
    activation then reports, parsing it once): the .pth line's own test."""
    return environ.get(ENV_MODE, "").strip().upper() not in ("", Mode.OFF.value)


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
