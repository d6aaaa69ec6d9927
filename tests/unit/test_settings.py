"""Settings and names, at unit level: the activation settings (settings.py), the
session and relay-daemon arguments (lttng.py) and the verified CPython versions.
Nothing here starts a process or needs LTTng.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import pinsight_python
from pinsight_python.activation import arguments, settings
from pinsight_python.recording import lttng, relayd
from tests.tracing import OWN_VARIABLES


def test_events_list_accepts_gil() -> None:
    assert settings.parse_events("function,gil", "test") == ["function", "gil"]


def test_gil_refused_on_free_threaded_build(monkeypatch: pytest.MonkeyPatch) -> None:
    # No free-threaded CPython on this machine: the refusal path is checked as a unit.
    monkeypatch.setattr(settings, "free_threaded", lambda: True)
    with pytest.raises(pinsight_python.ActivationError, match="free-threaded"):
        pinsight_python.activate(events=["function", "gil"])
    assert not pinsight_python.status()["active"]


def test_core_refuses_gil_events_on_free_threaded_build(monkeypatch: pytest.MonkeyPatch) -> None:
    # The core's own check (src/common/compat.h), which its activate() runs before
    # anything else when gil is asked for: the same words as the Python layer's.
    from pinsight_python import _pinsight_python_testing as testing

    assert testing._gil_events_refusal(False) == ""
    assert settings.gil_refusal(["function", "gil"]) == ""
    monkeypatch.setattr(settings, "free_threaded", lambda: True)
    assert testing._gil_events_refusal(True) == settings.gil_refusal(["function", "gil"])
    assert settings.gil_refusal(["function", "c_call"]) == ""  # only gil is refused
    assert "free-threaded" in testing._gil_events_refusal(True)


def test_session_arguments() -> None:
    with pytest.raises(ValueError, match="go together"):
        lttng.Session(ctrl_url="tcp://127.0.0.1:5342")
    with pytest.raises(ValueError, match="not both"):
        lttng.Session(set_url="net://h", ctrl_url="tcp://h:1", data_url="tcp://h:2")
    with pytest.raises(ValueError, match="output directory or a URL"):
        lttng.Session()
    local = lttng.Session(Path("/tmp/x"))
    assert not local.network and local.trace_dir() == Path("/tmp/x")
    assert not lttng.Session(set_url="file:///tmp/y").network
    assert lttng.Session(set_url="file:///tmp/y").trace_dir() == Path("/tmp/y")
    remote = lttng.Session(set_url="net://collector")
    assert remote.network
    with pytest.raises(lttng.LttngError, match="relayd_output not given"):
        remote.trace_dir()


@pytest.mark.parametrize(
    ("spec", "expected", "url"),
    [
        ("collector", ("collector", 5342, 5343), "net://collector:5342:5343"),
        ("10.0.0.5:6342", ("10.0.0.5", 6342, 5343), "net://10.0.0.5:6342:5343"),
        ("node-1.example:6342:6343", ("node-1.example", 6342, 6343),
         "net://node-1.example:6342:6343"),
        ("net://collector:7000:7001", ("collector", 7000, 7001), "net://collector:7000:7001"),
        ("[fd00::5]", ("[fd00::5]", 5342, 5343), "net6://[fd00::5]:5342:5343"),
        ("[::1]:6000:6001", ("[::1]", 6000, 6001), "net6://[::1]:6000:6001"),
    ],
)
def test_parse_relayd(spec: str, expected: Tuple[str, int, int], url: str) -> None:
    assert relayd.parse_relayd(spec) == expected
    assert relayd.relayd_url(*expected) == url


def test_find_relayd_traces_both_layouts(tmp_path: Path) -> None:
    for d in ("node1/job-20260101-120000", "node2/job-20260101-115959",
              "node2/job-2-20260101-120000", "node2/jobx-20260101-120000",
              "job/node3-20260101-120001"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "node1" / "job-20260101-120001").write_text("a file, not a trace")
    found = relayd.find_relayd_traces(tmp_path, "job")
    assert found == [tmp_path / "node2/job-20260101-115959", tmp_path / "node1/job-20260101-120000",
                     tmp_path / "job/node3-20260101-120001"]
    assert relayd.find_relayd_traces(tmp_path, "job", "node3") == [
        tmp_path / "job/node3-20260101-120001"]
    assert relayd.find_relayd_traces(tmp_path / "missing", "job") == []


# ---------------------------------------------------------------------------- settings.py


def test_own_variables_are_every_variable_settings_reads() -> None:
    # The tests scrub these from their children's environment (tests/tracing.py):
    # a variable settings.py reads but the list lacked would let the shell steer a test.
    read = {s.variable for s in settings.SETTINGS} | {settings.ENV_SWITCH}
    assert read <= set(OWN_VARIABLES)


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (settings.parse_mode, " tracing ", "TRACING"),
        (settings.parse_backend, "setprofile", "setprofile"),
        (settings.parse_payload, "Compact", "compact"),
        (settings.parse_events, "function, c_call,", ["function", "c_call"]),
        (settings.parse_modules, "numpy, mypkg.solver,numpy", ["numpy", "mypkg.solver"]),
    ],
)
def test_values_are_normalised(parse: Any, text: str, value: Any) -> None:
    assert parse(text, "VAR") == value


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (settings.parse_mode, "tracng", "VAR: unknown trace mode 'tracng' (expected "
         "OFF, STANDBY, MONITORING or TRACING); did you mean 'TRACING'?"),
        (settings.parse_backend, "monitoring", "did you mean 'sys.monitoring'?"),
        (settings.parse_payload, "zip", "VAR: unknown payload 'zip'"),
        (settings.parse_events, " , ", "VAR: no event named"),
        (settings.parse_events, "function,cal", "unknown event 'cal'"),
        (settings.parse_modules, "numpy.*", "no wildcards"),
        (settings.parse_modules, ".x", "got '.x'"),
    ],
)
def test_bad_values_say_what_was_expected(parse: Any, text: str, message: str) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse(text, "VAR")
    assert message in str(caught.value)


def test_cycle_clock_is_on_unless_0() -> None:
    assert settings.cycle_clock({}) is True
    assert settings.cycle_clock({settings.ENV_CYCLE_CLOCK: "1"}) is True
    assert settings.cycle_clock({settings.ENV_CYCLE_CLOCK: " 0 "}) is False
    with pytest.raises(settings.SettingsError,
                       match="PINSIGHT_PYTHON_CYCLE_CLOCK='no': expected 0 or 1"):
        settings.cycle_clock({settings.ENV_CYCLE_CLOCK: "no"})


def test_block_writer_is_a_thread_unless_inline() -> None:
    assert settings.block_writer({}) is True
    assert settings.block_writer({settings.ENV_BLOCK_WRITER: "thread"}) is True
    assert settings.block_writer({settings.ENV_BLOCK_WRITER: " inline "}) is False
    with pytest.raises(settings.SettingsError,
                       match="PINSIGHT_PYTHON_BLOCK_WRITER='none': expected thread or inline"):
        settings.block_writer({settings.ENV_BLOCK_WRITER: "none"})
    # activate() refuses it with the same words, before anything is traced.
    with pytest.raises(settings.SettingsError, match="PINSIGHT_PYTHON_BLOCK_WRITER"):
        settings.activate_options(("function",), "", None, "auto", None, (), None,
                                  {settings.ENV_BLOCK_WRITER: "none"})


def test_from_environment_reports_every_error_and_keeps_the_good_values(tmp_path: Path) -> None:
    config = tmp_path / "pinsight_trace_config.txt"
    config.write_text("")
    environ = {
        settings.ENV_EVENTS: "function,gil",
        settings.ENV_MODE: "sometimes",
        settings.ENV_CONFIG: str(tmp_path),  # a directory
        settings.ENV_EXCLUDE: "tests",
        settings.ENV_PAYLOAD: "batched",
    }
    errors: List[str] = []
    got = settings.from_environment(environ, errors)
    assert (got.events, got.mode, got.config, got.exclude, got.payload) == (
        ["function", "gil"], None, None, ["tests"], "batched")
    assert [e.split(":")[0] for e in errors] == [settings.ENV_MODE, settings.ENV_CONFIG]
    with pytest.raises(settings.SettingsError, match="unknown trace mode"):
        settings.from_environment(environ)
    ok = settings.from_environment({settings.ENV_CONFIG: str(config)})
    assert ok.config == os.path.abspath(config)


def test_settings_export_round_trips_through_the_environment() -> None:
    given = settings.Settings(events=["function"], mode="MONITORING", backend="setprofile",
                              modules=["numpy"], exclude=["numpy.linalg"], payload="compact")
    env: Dict[str, str] = {}
    given.export(env)
    assert env[settings.ENV_SWITCH] == "1"
    assert settings.from_environment(env) == given


@pytest.mark.parametrize("cpus, budget, fitted", [
    (2, 1 << 30, (4 << 20, 16)),  # fits: unchanged
    (2, 64 << 20, (4 << 20, 8)),  # fewer sub-buffers first
    (128, 1 << 30, (4 << 20, 2)),  # 4 GiB asked for on 128 CPUs
    (512, 1 << 30, (1 << 20, 2)),  # then smaller ones
    (4096, 1 << 20, (4096, 2)),  # the smallest channel, still over the budget
])
def test_the_channel_fits_the_buffer_budget(
    cpus: int, budget: int, fitted: Tuple[int, int]
) -> None:
    """Issue 36, point 5: per-CPU buffers times the CPUs stay within the budget."""
    assert lttng.fit_channel(4 << 20, 16, cpus, budget) == fitted


def test_possible_cpus_are_those_lttng_makes_buffers_for() -> None:
    with open("/sys/devices/system/cpu/possible", encoding="ascii") as f:
        text = f.read().strip()  # "0-3", or "0,2-5"
    expected = sum(int(p.partition("-")[2] or p) - int(p.partition("-")[0]) + 1
                   for p in text.split(","))
    assert lttng.possible_cpus() == expected >= 1


# ---------------------------------------------------------------------------- one list of each


def test_the_modes_and_payloads_are_the_cores() -> None:
    # One list: the core's (src/config/config.h, which its parser and its error
    # messages read) and Python's enums, whose order numbers what activate() and
    # set_mode() hand the core.
    from pinsight_python import _pinsight_python as core

    assert settings.MODES == core.MODES
    assert settings.PAYLOADS == core.PAYLOADS
    assert [settings.core_index(m) for m in settings.Mode] == list(range(len(core.MODES)))


def test_activate_options_are_resolved_once_into_enums(tmp_path: Path) -> None:
    environ = {settings.ENV_MODE: " standby ", settings.ENV_PAYLOAD: "Batched",
               settings.ENV_CONFIG_REPORTED: "1", settings.ENV_CLOCK_PLUGIN: ""}
    options = settings.activate_options(
        ["function,gil"], "", None, "setprofile", None, ["numpy"], None, environ)
    assert options.events == (settings.Event.FUNCTION, settings.Event.GIL)
    assert (options.mode, options.payload) == (settings.Mode.STANDBY, settings.Payload.BATCHED)
    assert options.backend is settings.Backend.SETPROFILE
    assert (options.module_filter, options.module_exclude) == (None, ("numpy",))
    assert (options.report_config, options.clock_plugin) == (False, True)
    core = options.core_arguments()
    assert (core["mode"], core["payload"], core["backend"]) == (1, 2, "setprofile")
    assert (core["function_events"], core["c_call_events"], core["gil_events"]) == (
        True, False, True)
    # An explicit value wins over the variable; none and no variable: the configuration's.
    explicit = settings.activate_options(
        ["c_call"], "", "monitoring", "auto", ["a.b"], (), settings.Payload.FULL, environ)
    assert (explicit.mode, explicit.payload) == (settings.Mode.MONITORING, settings.Payload.FULL)
    assert explicit.module_filter == ("a.b",)
    default = settings.activate_options(["function"], "", None, "auto", None, (), None, {})
    assert (default.mode, default.payload, default.report_config) == (None, None, True)
    assert default.core_arguments()["mode"] == default.core_arguments()["payload"] == -1


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: pinsight_python.activate(mode="FAST"), pinsight_python.ConfigError,
         "activate(mode=...): unknown trace mode 'FAST' (expected OFF, STANDBY, MONITORING or "
         "TRACING)"),
        (lambda: pinsight_python.activate(payload="tiny"), pinsight_python.ConfigError,
         "activate(payload=...): unknown payload 'tiny' (expected full, compact or batched)"),
        (lambda: pinsight_python.activate(events=["functoin"]), ValueError,
         "activate(events=...): unknown event 'functoin' (expected a list of function, c_call, "
         "import, alloc, gil); did you mean 'function'?"),
        (lambda: pinsight_python.set_mode("tracng"), pinsight_python.ConfigError,
         "set_mode: unknown trace mode 'tracng' (expected OFF, STANDBY, MONITORING or TRACING); "
         "did you mean 'TRACING'?"),
    ],
)
def test_api_names_are_checked_in_python(call: Any, error: type, message: str) -> None:
    # Checked before the core is called: nothing starts.
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value).startswith(message)
    assert not pinsight_python.status()["active"]


def test_core_takes_only_a_place_in_its_lists() -> None:
    # What crosses into the core is a number, range-checked there; no name is parsed.
    from pinsight_python import _pinsight_python as core

    with pytest.raises(core.ConfigError, match=r"set_mode: trace mode: no 7 among 4 \(OFF, "):
        core.set_mode(7)
    with pytest.raises(core.ConfigError, match="set_mode: no trace mode given"):
        core.set_mode(-1)
    assert not pinsight_python.status()["active"]


@pytest.mark.parametrize(("value", "expected"), [("", None), (" 1 ", True), ("0", False)])
def test_the_switch_is_read_by_settings(value: str, expected: Any) -> None:
    assert settings.switch({settings.ENV_SWITCH: value}) is expected


def test_a_bad_switch_says_what_it_expects() -> None:
    with pytest.raises(settings.SettingsError, match="PINSIGHT_PYTHON: expected 1 or 0, got 'yes'"):
        settings.switch({settings.ENV_SWITCH: "yes"})
    assert settings.mode_requests_tracing({settings.ENV_MODE: "tracng"})  # reported on activation
    assert not settings.mode_requests_tracing({settings.ENV_MODE: " off "})


# ---------------------------------------------------------------------------- one table


def test_the_cores_names_are_the_tables() -> None:
    # One enum per setting in the core (src/common/settings.h), with its names, and
    # one keyword per setting (src/activation/activation.h, kSettingFields): the table's.
    from pinsight_python import _pinsight_python as core

    assert (core.EVENTS, core.BACKENDS) == (settings.ALL_EVENT_NAMES, settings.BACKENDS)
    keywords = [k for s in settings.SETTINGS for k in s.keywords]
    assert sorted(keywords) == sorted(core.SETTINGS) and len(set(keywords)) == len(keywords)
    assert settings.SETTING["events"].keywords == tuple(f"{e}_events" for e in core.EVENTS)


# A value of each setting other than its default, as its variable's text; the value
# it parses to; and, for an option, its command line. A row added to the table
# without its line here fails below, before it is wired through.
SAMPLES: Dict[str, Tuple[str, Any, List[str]]] = {
    "events": ("c_call,gil", ["c_call", "gil"], ["--events", "c_call,gil"]),
    "mode": ("standby", "STANDBY", ["--mode", "standby"]),
    "backend": ("setprofile", "setprofile", ["--backend", "setprofile"]),
    "config": ("CONFIG", "CONFIG", ["--config", "CONFIG"]),
    "modules": ("a,b.c", ["a", "b.c"], ["--module", "a", "--module", "b.c"]),
    "exclude": ("numpy", ["numpy"], ["--exclude", "numpy"]),
    "payload": ("batched", "batched", ["--batch"]),
    "report_config": ("1", False, []),
    "clock_plugin": ("", True, []),
    "cycle_clock": ("0", False, []),
    "block_writer": ("inline", False, []),
    "trace_dir": ("/traces/run", "/traces/run", []),
    "flight_recorder": ("30", 30.0, []),
}


def test_every_setting_is_wired_through(tmp_path: Path) -> None:
    """Each row of the table reaches every place a setting goes: its variable is read
    and exported, its option (if any) parsed, activate() resolves it, and it reaches
    the core under its keyword with a value other than its default's."""
    import argparse

    config = tmp_path / "pinsight_trace_config.txt"
    config.write_text("")
    assert set(SAMPLES) == set(settings.SETTING), "a setting without a sample here"
    for name, sample in SAMPLES.items():
        s = settings.SETTING[name]
        text, argv = sample[0].replace("CONFIG", str(config)), [
            a.replace("CONFIG", str(config)) for a in sample[2]]
        value = str(config) if sample[1] == "CONFIG" else sample[1]
        # The variable, parsed once, into its one form; exported back, read again.
        got = settings.from_environment({s.variable: text})
        assert getattr(got, name) == value, name
        env: Dict[str, str] = {}
        got.export(env)
        if s.text is not None:
            assert getattr(settings.from_environment(env), name) == value, name
        # The options of trace and python -m (attach's are some of them).
        parser = argparse.ArgumentParser()
        arguments.add_arguments(parser)
        errors: List[str] = []
        from_options = arguments.from_arguments(parser.parse_args(argv), errors)
        assert errors == [] and getattr(from_options, name) == (value if argv else None), name
        assert (s.option is None) == (argv == []), name
        # activate()'s resolution, and the core's arguments: not the default's.
        options = settings.resolve(got, {})
        default = settings.resolve(settings.Settings(), {})
        assert getattr(options, s.field) != getattr(default, s.field), name
        core, core_default = options.core_arguments(), default.core_arguments()
        assert [core[k] for k in s.keywords] != [core_default[k] for k in s.keywords], name
    # activate()'s own arguments are the table's settings that have one; the docs
    # name every variable of ours.
    import inspect

    documented = (Path(__file__).parents[2] / "docs" / "activation.md").read_text()
    assert [s.variable for s in settings.SETTINGS
            if s.text is not None and f"| `{s.variable}" not in documented] == []

    api = set(inspect.signature(pinsight_python.activate).parameters)
    assert api == {s.name for s in settings.SETTINGS if s.api is not None}


def test_activate_reads_the_variables_of_the_settings_it_inherits() -> None:
    # The configuration's settings (mode, payload, config) and those only a variable
    # gives come from the environment when activate() is not given them; events,
    # backend and the module filters are activate()'s arguments alone.
    environ = {settings.SETTING[name].variable: SAMPLES[name][0]
               for name in ("events", "mode", "backend", "cycle_clock", "trace_dir")}
    options = settings.activate_options(["function"], None, None, "auto", None, (), None,
                                        environ)
    assert (options.events, options.backend) == ((settings.Event.FUNCTION,),
                                                 settings.Backend.AUTO)
    assert (options.mode, options.cycle_clock, options.trace_dir) == (
        settings.Mode.STANDBY, False, "/traces/run")


def test_the_options_of_trace_come_over_the_variables() -> None:
    inherited = settings.from_environment({settings.ENV_EXCLUDE: "a,b",
                                           settings.ENV_MODE: "standby"})
    chosen = settings.Settings(exclude=["b", "c"], events=[settings.Event.GIL])
    merged = chosen.over(inherited)
    assert (merged.exclude, merged.events, merged.mode) == (
        ["a", "b", "c"], [settings.Event.GIL], settings.Mode.STANDBY)
