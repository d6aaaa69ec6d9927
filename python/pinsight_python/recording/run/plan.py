"""The plan of a ``pinsight-python trace`` run: every option, variable and file it
depends on, checked before anything starts, into one frozen :class:`Plan`.

:func:`make` reads the parsed options and the environment the command would inherit,
reports every error at once (:class:`Refused`, with the exit status to use), and
returns what to run, where the trace goes, the channel's size, the native domains
recorded beside Python, the configuration in force and the command's environment
(the settings' variables, the preloaded libraries). Nothing in it changes afterwards:
the run adds its own two variables (its marker, the keeper's socket) to a copy.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
from pathlib import Path
from types import MappingProxyType
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ...activation import arguments
from ...activation import settings as _settings
from ...exit_status import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_USAGE
from .. import lttng, relayd
from ..native_files import beside_extension
from . import session as run_session

PROG = "pinsight-python trace"


class Plan(NamedTuple):
    """The validated request: what to run, where the trace goes, the child's environment.

    With a relay daemon (``relayd_url``), ``output`` is None: the trace goes there.
    A NamedTuple, not a frozen dataclass: dataclasses costs trace's start inspect's
    import (issue 36: trace's fixed cost).
    """

    command: Tuple[str, ...]
    output: Optional[Path]
    env: Mapping[str, str]  # read-only
    relayd_url: Optional[str]
    config: Optional[str]  # the configuration the command's processes read, if any
    warnings: Tuple[str, ...]
    subbuf_size: str = lttng.SUBBUF_SIZE
    num_subbuf: int = lttng.NUM_SUBBUF
    domains: Sequence[str] = ()  # PInsight's native domains recorded too
    summary: bool = True  # read the trace back for a summary (not --no-summary)
    trace_format: str = lttng.DEFAULT_TRACE_FORMAT  # --trace-format
    # --flight-recorder: the bytes the ring may take on this node (None: no flight
    # recorder), and --stall's seconds (0: no stall watch).
    flight_bytes: Optional[int] = None
    stall: float = 0.0


class Refused(Exception):
    """Every reason not to run the command, one a line; the exit status to use."""

    def __init__(self, messages: List[str], status: int = EXIT_USAGE) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages
        self.status = status


def parse_relayd_option(value: str, option: str = "--relayd") -> str:
    """``HOST[:CTRL_PORT[:DATA_PORT]]`` -> the session's URL; SettingsError if malformed."""
    try:
        return relayd.relayd_url(*relayd.parse_relayd(value))
    except ValueError as e:
        raise _settings.SettingsError(
            f"{option} {value!r}: {e}; expected {relayd.RELAYD_SPEC_HELP}, e.g. collector, "
            "10.0.0.5:5342:5343 or [fd00::5]"
        ) from None


def check_configuration(path: str) -> List[str]:
    """The configuration's warnings; Refused with its errors (file:line: message)."""
    from ... import _pinsight_python as core

    try:
        return list(core.check_config(path))
    except core.ConfigError as e:
        raise Refused(str(e).splitlines()) from None


def _configuration_in_force(
    chosen: _settings.Settings, args: argparse.Namespace
) -> Optional[str]:
    """The file the command's processes will read, as the core chooses it (None: none,
    or the one named is refused already)."""
    if args.config is not None or os.environ.get(_settings.ENV_CONFIG, "").strip():
        named: Optional[str] = chosen.config
        return named
    found = _settings.default_config(os.environ)  # the working directory's, as activate()'s
    return os.path.abspath(found) if found else None


def make(args: argparse.Namespace) -> Plan:
    """Checks everything; raises Refused with every error found."""
    errors: List[str] = []
    command = _command(args, errors)
    chosen = _chosen_settings(args, errors)
    url, output = _destination(args, errors)
    config, warnings = _checked_configuration(chosen, args, errors)
    flight_bytes, stall = _flight_recorder(args, chosen, output, errors)
    if flight_bytes is None:
        subbuf_size, num_subbuf = _channel_size(args, errors, warnings)
    else:
        subbuf_size, num_subbuf = _flight_channel(args, flight_bytes, errors, warnings)
    preload = _alloc_preload(args, chosen, errors)
    domains = _native_domains(args.domains, os.environ, errors)
    trace_format = _trace_format(getattr(args, "trace_format", lttng.DEFAULT_TRACE_FORMAT), errors)
    if errors:
        raise Refused(errors)
    if "cuda" in domains:
        config = _device_activity(chosen, config, warnings)
    _check_runnable(command[0])

    if url is None and output is None:
        output = run_session.default_output()
    env = dict(os.environ)
    if preload is not None:
        _preload(env, preload, warnings)
    _guard_descriptors(env, errors)
    if errors:
        raise Refused(errors)
    chosen.report_config = False  # trace reports it, once for the run
    if output is not None:
        chosen.trace_dir = str(output)
    chosen.export(env)
    if flight_bytes is None:  # a flight recorder's around trace is not this run's
        env.pop(_settings.ENV_FLIGHT_RECORDER, None)
    return Plan(tuple(command), output, MappingProxyType(env), url, config, tuple(warnings),
                subbuf_size, num_subbuf, domains, summary=not args.no_summary,
                trace_format=trace_format, flight_bytes=flight_bytes, stall=stall)


def _trace_format(asked: str, errors: List[str]) -> str:
    """--trace-format, if this LTTng writes it (CTF 2: LTTng 2.15 and later)."""
    if asked != lttng.DEFAULT_TRACE_FORMAT:
        try:
            formats = lttng.trace_formats()
        except lttng.LttngError as e:
            errors.append(f"--trace-format {asked}: {e}")
            return asked
        if asked not in formats:
            from ...activation.lttng_versions import ctl_release

            path, minor = lttng.ctl_library()
            errors.append(f"--trace-format {asked}: needs LTTng 2.15 or later; this LTTng "
                          f"({path}, {ctl_release(minor)}) writes {' and '.join(formats)} only")
    return asked


def _device_activity(
    chosen: _settings.Settings, config: Optional[str], warnings: List[str]
) -> Optional[str]:
    """With the CUDA domain, the kernels' device activity is recorded: PInsight's
    device_activity is off unless a configuration turns it on. Without a
    configuration, trace gives the command one that does (removed when trace ends);
    a configuration that does not say is left as it is, with a warning."""
    if config is None:
        import tempfile  # here: only the CUDA domain needs it, trace's start does not

        folder = tempfile.mkdtemp(prefix="pinsight-python-cuda-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = os.path.join(folder, "pinsight_trace_config.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("# pinsight-python trace --domains cuda: the kernels' device activity\n"
                    "[CUDA.default]\ndevice_activity = on\n")
        chosen.config = path
        return path
    from ... import _pinsight_python as core

    # As libpinsight.so will read it: the core's parser notes the keys it leaves to it.
    if not any("device_activity" in keys for keys in core.native_keys(config).values()):
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
    return arguments.from_arguments(args, errors).over(inherited)


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
            output = run_session.check_new_output(args.output)
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
    except Refused as e:
        errors.extend(e.messages)
    return config, []


def _alloc_preload(
    args: argparse.Namespace, chosen: _settings.Settings, errors: List[str]
) -> Optional[Path]:
    """With --alloc: the alloc event added, and the malloc interposer to preload."""
    if not args.alloc:
        return None
    chosen.events = list(chosen.events or _settings.SETTING["events"].default)
    if _settings.Event.ALLOC not in chosen.events:
        chosen.events.append(_settings.Event.ALLOC)
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


def _size_text(nbytes: int) -> str:
    """4194304 -> "4M", as LTTng reads sizes (powers of two)."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{suffix}"
    return str(nbytes)


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):,.0f} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _channel_size(
    args: argparse.Namespace, errors: List[str], warnings: List[str],
    reader_subbuf: bool = False,
) -> Tuple[str, int]:
    """--subbuf-size and --num-subbuf, checked as LTTng wants them, then fitted to
    --buffer-budget for the CPUs LTTng makes buffers for (a warning when they shrink).
    `reader_subbuf`: an overwrite channel, which LTTng gives one sub-buffer more per
    CPU (the reader's)."""
    size = str(args.subbuf_size)
    nbytes = lttng.size_bytes(size)
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
    budget = lttng.size_bytes(str(args.buffer_budget))
    if budget <= 0:
        errors.append(f"--buffer-budget {args.buffer_budget!r}: expected a size with k, M or "
                      "G, such as 512M or 2G")
    if errors:
        return size, count
    cpus = lttng.possible_cpus()
    fitted_bytes, fitted_count = lttng.fit_channel(nbytes, count, cpus, budget, reader_subbuf)
    if (fitted_bytes, fitted_count) != (nbytes, count):
        total = fitted_bytes * (fitted_count + reader_subbuf) * cpus
        over = " (the smallest channel LTTng takes, still over it)" if total > budget else ""
        warnings.append(
            f"--buffer-budget {args.buffer_budget}: {cpus} possible CPUs get {fitted_count} x "
            f"{_mib(fitted_bytes)} sub-buffers each instead of {count} x {_mib(nbytes)}, "
            f"{_mib(total)} in all{over}; LTTng may discard events at high rates (every view "
            "counts them): raise --buffer-budget where the node has the memory")
    return _size_text(fitted_bytes), fitted_count


def _flight_recorder(
    args: argparse.Namespace, chosen: _settings.Settings, output: Optional[Path],
    errors: List[str]
) -> Tuple[Optional[int], float]:
    """--flight-recorder's bytes (None without it) and --stall's seconds, checked.
    The flight recorder records the batched payload: the one that costs least per
    event, and whose records tell how long each open frame of a dump has run."""
    stall = _stall_seconds(args.stall, errors)
    if args.flight_recorder is None:
        if args.stall is not None:
            errors.append("--stall watches for stalls in a flight-recorder run: add "
                          "--flight-recorder")
        return None, 0.0
    size = lttng.size_bytes(str(args.flight_recorder))
    cpus = lttng.possible_cpus()
    least = lttng.flight_minimum_bytes(cpus)
    if size <= 0:
        errors.append(f"--flight-recorder {args.flight_recorder!r}: expected a size with k, M "
                      "or G, such as 256M or 1G")
    elif size < least:
        errors.append(f"--flight-recorder {args.flight_recorder}: LTTng needs at least "
                      f"{_mib(least)} on this node (2 sub-buffers of 4 KiB and the reader's "
                      f"one for each of its {cpus} possible CPUs, and its metadata)")
    if args.buffer_budget != lttng.BUFFER_BUDGET:
        errors.append("--buffer-budget and --flight-recorder SIZE both bound the channel's "
                      "memory: give SIZE alone")
    if chosen.payload not in (None, _settings.Payload.BATCHED):
        errors.append(f"payload {chosen.payload} (--compact, or {_settings.ENV_PAYLOAD}): the "
                      "flight recorder records the batched payload (the cheapest per event, "
                      "and the one that times each open frame)")
    chosen.payload = _settings.Payload.BATCHED
    chosen.flight_recorder = stall  # each traced process's part in the run
    if args.relayd is None:
        _check_writable(output or Path.cwd(), "--flight-recorder", errors)
    return size, stall


def _stall_seconds(text: Optional[str], errors: List[str]) -> float:
    """--stall's seconds (0 without it)."""
    if text is None:
        return 0.0
    try:
        stall = float(text)
    except ValueError:
        stall = -1.0
    if not lttng.MIN_STALL_SECONDS <= stall <= 1e9:  # NaN too
        errors.append(f"--stall {text!r}: expected seconds, at least "
                      f"{lttng.MIN_STALL_SECONDS:g} (shorter pauses are how programs wait), "
                      "such as 60 or 300")
    return stall


def _check_writable(output: Path, option: str, errors: List[str]) -> None:
    """The dumps go into `output`: a folder that cannot be written is said now,
    not at the first dump hours later."""
    existing = output
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        errors.append(f"{option}: the dumps go into {output}, and {existing} cannot be "
                      "written: choose another -o")


def _flight_channel(
    args: argparse.Namespace, size: int, errors: List[str], warnings: List[str]
) -> Tuple[str, int]:
    """The flight recorder's channel: as large as SIZE lets it be on this node's
    CPUs (--subbuf-size and --num-subbuf, when given, fitted into it)."""
    if errors:
        return str(args.subbuf_size), lttng.default_num_subbuf()
    cpus = lttng.possible_cpus()
    if args.subbuf_size == lttng.SUBBUF_SIZE and args.num_subbuf is None:
        subbuf, count = lttng.flight_channel(size, cpus)
        return _size_text(subbuf), count
    given = argparse.Namespace(**{**vars(args), "buffer_budget": _size_text(
        lttng.flight_channel_budget(size))})
    return _channel_size(given, errors, warnings, reader_subbuf=True)


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
            raise Refused([f"{program}: no such file"], EXIT_NOT_FOUND)
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise Refused([f"{program}: not an executable file"], EXIT_NOT_EXECUTABLE)
    elif shutil.which(program) is None:
        raise Refused([f"{program}: command not found"], EXIT_NOT_FOUND)
