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
from pinsight_python import lttng, settings
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
    assert lttng.parse_relayd(spec) == expected
    assert lttng.relayd_url(*expected) == url


def test_find_relayd_traces_both_layouts(tmp_path: Path) -> None:
    for d in ("node1/job-20260101-120000", "node2/job-20260101-115959",
              "node2/job-2-20260101-120000", "node2/jobx-20260101-120000",
              "job/node3-20260101-120001"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "node1" / "job-20260101-120001").write_text("a file, not a trace")
    found = lttng.find_relayd_traces(tmp_path, "job")
    assert found == [tmp_path / "node2/job-20260101-115959", tmp_path / "node1/job-20260101-120000",
                     tmp_path / "job/node3-20260101-120001"]
    assert lttng.find_relayd_traces(tmp_path, "job", "node3") == [
        tmp_path / "job/node3-20260101-120001"]
    assert lttng.find_relayd_traces(tmp_path / "missing", "job") == []


# ---------------------------------------------------------------------------- settings.py


def test_own_variables_are_every_variable_settings_reads() -> None:
    # The tests scrub these from their children's environment (tests/tracing.py):
    # a variable settings.py reads but the list lacked would let the shell steer a test.
    read = {name for name, _, _ in settings._VARIABLES} | {settings.ENV_SWITCH}
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
