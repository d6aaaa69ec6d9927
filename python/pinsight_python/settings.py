"""The tracing settings, one set of rules for every entry point.

Modes, events, backends, module filters and the configuration file are accepted or
refused here, the same way for ``pinsight_python.activate()``, the start-up shim
(``_startup``), ``python -m pinsight_python`` and ``pinsight-python trace``. The
environment variables that carry them to child interpreters are named here too.

Importing this module costs nothing beyond the standard library: the start-up
shim reads it before it knows whether tracing is wanted.
"""

from __future__ import annotations

import difflib
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Callable,
    Iterable,
    List,
    Mapping,
    MutableMapping,
    Optional,
    Sequence,
    Tuple,
    cast,
)

if TYPE_CHECKING:  # argparse is not imported at start-up
    import argparse

__all__ = [
    "ALL_EVENT_NAMES",
    "BACKENDS",
    "DEFAULT_CONFIG_FILE",
    "ENV_BACKEND",
    "ENV_CLOCK_PLUGIN",
    "ENV_CONFIG",
    "ENV_CYCLE_CLOCK",
    "ENV_EVENTS",
    "ENV_EXCLUDE",
    "ENV_MODE",
    "ENV_MODULES",
    "ENV_PAYLOAD",
    "ENV_SWITCH",
    "EVENT_NAMES",
    "FROZEN_IMPORTLIB",
    "MODES",
    "PAYLOADS",
    "Settings",
    "SettingsError",
    "activation_config",
    "activation_mode",
    "activation_payload",
    "check_config_path",
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

EVENT_NAMES = ("function", "c_call")  # the default
# import: import_begin/import_end; alloc: alloc_sample/free_sample (docs/imports_and_allocs.md).
# gil: gil_switch/gil_released (docs/analysis.md, "The GIL").
ALL_EVENT_NAMES = (*EVENT_NAMES, "import", "alloc", "gil")
MODES = ("OFF", "STANDBY", "MONITORING", "TRACING")
BACKENDS = ("auto", "sys.monitoring", "setprofile")
PAYLOADS = ("full", "compact", "batched")  # README, "Payloads: full, compact and batched"
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
    expected = "a list of function, c_call, import, alloc, gil"
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


@dataclass
class Settings:
    """What to trace, as options or variables give it; None: not given (the default,
    or the configuration's own value, applies)."""

    events: Optional[List[str]] = None
    mode: Optional[str] = None
    backend: Optional[str] = None
    config: Optional[str] = None
    modules: Optional[List[str]] = None
    exclude: List[str] = field(default_factory=list)
    payload: Optional[str] = None

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


def activation_mode(given: str, environ: Mapping[str, str]) -> str:
    """activate()'s mode: `given`, else PINSIGHT_TRACE_PYTHON; "" for the configuration's."""
    if given:
        return given
    text = environ.get(ENV_MODE, "").strip()
    return parse_mode(text, ENV_MODE) if text else ""


def activation_payload(given: str, environ: Mapping[str, str]) -> str:
    """activate()'s payload: `given`, else PINSIGHT_PYTHON_PAYLOAD; "" for the configuration's."""
    if given:
        return given
    text = environ.get(ENV_PAYLOAD, "").strip()
    return parse_payload(text, ENV_PAYLOAD) if text else ""


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


def cycle_clock(environ: Mapping[str, str]) -> bool:
    """Whether the batched payload may time its records with the CPU's cycle counter
    (where the counter is invariant; 1, the default) or must call clock_gettime (0)."""
    text = environ.get(ENV_CYCLE_CLOCK, "").strip()
    if text not in ("", "0", "1"):
        raise SettingsError(f"{ENV_CYCLE_CLOCK}={text!r}: expected 0 or 1")
    return text != "0"


def from_environment(environ: Mapping[str, str], errors: Optional[List[str]] = None) -> Settings:
    """The settings the variables give. Each bad value raises SettingsError, or, with
    `errors`, is appended there and left unset (to report every error at once)."""
    settings = Settings()
    for name, field_name, check in _VARIABLES:
        text = environ.get(name, "").strip()
        if not text:
            continue
        try:
            setattr(settings, field_name, check(text, name))
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
                       help="any of function, c_call, import, alloc, gil "
                       "(default: function,c_call)")
    group.add_argument("--mode", metavar="MODE",
                       help="TRACING, MONITORING, STANDBY or OFF (default: PINSIGHT_TRACE_PYTHON "
                       "if set, else the configuration's trace_mode, TRACING without one)")
    group.add_argument("--backend", metavar="NAME",
                       help="auto, sys.monitoring or setprofile (default: auto)")
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

    def attempt(option: str, parse: Callable[[str, str], object]) -> object:
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

    settings.events = cast(Optional[List[str]], attempt("--events", parse_events))
    settings.mode = cast(Optional[str], attempt("--mode", parse_mode))
    settings.backend = cast(Optional[str], attempt("--backend", parse_backend))
    settings.config = cast(Optional[str], attempt("--config", check_config_path))
    settings.modules = cast(Optional[List[str]], attempt("--module", parse_modules))
    exclude = cast(Optional[List[str]], attempt("--exclude", parse_modules)) or []
    if args.ignore_frozen:
        exclude += [m for m in FROZEN_IMPORTLIB if m not in exclude]
    settings.exclude = exclude
    if getattr(args, "compact", False) and getattr(args, "batch", False):
        errors.append("--compact and --batch: choose one payload")
    else:
        settings.payload = payload_option(args)
    return settings
