"""export --format perfetto on the small committed traces (tests/unit/test_reader.py
says what they hold), per-event and batched alike, read back with Perfetto's own
schema (tests/perfetto_trace.py checks as trace_processor reads): the same
functions and counts as report, each Python slice with its source location and
module, and no file that looks complete when the export fails."""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import List, Tuple

import pytest

from pinsight_python import cli
from pinsight_python.reading.analysis import read_trace
from pinsight_python.reading.export import export_perfetto
from tests import perfetto_trace

TRACES = Path(__file__).resolve().parent / "traces"
PAYLOADS = ("full", "compact", "full_file_per_event", "batched")


def run_cli(*args: str) -> Tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as usage:  # argparse's errors
            code = int(usage.code or 0)
    return code, err.getvalue()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_same_functions_and_counts_as_report(payload: str, tmp_path: Path) -> None:
    out = tmp_path / "run.pftrace"  # the suffix chooses the format
    code, err = run_cli("export", str(TRACES / payload), "-o", str(out))
    assert code == 0, err
    assert f"wrote {out}" in err and "ui.perfetto.dev" in err
    trace = perfetto_trace.read(out)
    data = read_trace(TRACES / payload, progress="never")
    assert perfetto_trace.thread_slice_counts(trace) == perfetto_trace.report_segments(data)
    assert f"{trace.packets:,} packets" in err
    [process] = data.processes
    assert set(trace.processes()) == {process.chrome_pid}
    assert {key for key in trace.threads()} == {(process.chrome_pid, t.vtid)
                                                for t in process.threads}
    names = {t.thread_name for t in trace.threads().values()}
    assert names == {t.label for t in process.threads}
    for s in trace.slices:
        if s.category == "python":
            assert s.source is not None and s.source[1] == s.name and s.source[0].endswith(".py")
            assert s.args["module"]
        else:
            assert s.category == "native" and s.source is None
        assert s.end >= s.ts


def test_timestamps_are_the_traces(tmp_path: Path) -> None:
    """ns from the first event, exact: the Chrome export's times, which
    tests/integration/test_report.py checks against babeltrace2's."""
    out = tmp_path / "run.pftrace"
    export_perfetto(TRACES / "full", out, progress="never")
    trace = perfetto_trace.read(out)
    chrome = tmp_path / "run.json"
    assert run_cli("export", str(TRACES / "full"), "-o", str(chrome))[0] == 0
    import json

    events = [e for e in json.loads(chrome.read_text())["traceEvents"] if e["ph"] in "BE"]
    begins = sorted(round(e["ts"] * 1000) for e in events if e["ph"] == "B")
    assert sorted(s.ts for s in trace.slices) == begins
    ends = sorted(round(e["ts"] * 1000) for e in events if e["ph"] == "E")
    assert sorted(s.end for s in trace.slices) == ends
    fails = [s for s in trace.slices if s.name == "fails"]
    assert len(fails) == 1 and fails[0].args["exit"] == "unwind"


def test_plain_and_compressed_hold_the_same_packets(tmp_path: Path) -> None:
    plain, packed = tmp_path / "plain.pftrace", tmp_path / "packed.pftrace"
    export_perfetto(TRACES / "compact", plain, progress="never", compress=False)
    export_perfetto(TRACES / "compact", packed, progress="never")
    assert perfetto_trace.packets_of(plain) == perfetto_trace.packets_of(packed)
    assert packed.stat().st_size < plain.stat().st_size / 2


def test_format_option_and_suffixes(tmp_path: Path) -> None:
    for name, args in (("a.perfetto-trace", ()), ("b.pb", ("--format", "perfetto"))):
        out = tmp_path / name
        assert run_cli("export", *args, str(TRACES / "full"), "-o", str(out))[0] == 0
        assert perfetto_trace.read(out).slices
    code, err = run_cli("export", "--format", "perfetto", str(TRACES / "full"), "-o", "-")
    assert code == 2 and "writes a file" in err


def test_filters(tmp_path: Path) -> None:
    out = tmp_path / "run.pftrace"
    data = read_trace(TRACES / "full", progress="never")
    worker = next(t.vtid for t in data.processes[0].threads if t.vtid != data.processes[0].vpid)
    assert run_cli("export", str(TRACES / "full"), "--thread", str(worker), "-o", str(out))[0] == 0
    trace = perfetto_trace.read(out)
    assert {tid for _pid, tid in perfetto_trace.thread_slice_counts(trace)} == {worker}
    assert run_cli("export", str(TRACES / "full"), "--exclude", "unit_program", "-o",
                   str(out))[0] == 0
    names = {s.name for s in perfetto_trace.read(out).slices}
    assert "fib" not in names and "work" not in names


def test_no_events_of_ours_is_an_error(tmp_path: Path) -> None:
    """A CTF trace without python_pinsight_lttng_ust events: one error naming it, and
    no file."""
    empty = tmp_path / "other" / "ust"
    empty.mkdir(parents=True)
    metadata = next((TRACES / "full").rglob("metadata"))
    (empty / "metadata").write_bytes(metadata.read_bytes())  # its streams left out
    out = tmp_path / "run.pftrace"
    code, err = run_cli("export", str(tmp_path / "other"), "-o", str(out))
    assert code == 1 and "no python_pinsight_lttng_ust events" in err and str(tmp_path) in err
    assert not out.exists() and list(tmp_path.glob("*.partial")) == []


def test_unwritable_output(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "run.pftrace"
    code, err = run_cli("export", str(TRACES / "full"), "-o", str(out))
    assert code == 1 and f"cannot write {out}" in err


FULL_DISK = """
import resource, signal, sys
from pinsight_python import cli
from pinsight_python.reading.export import export_perfetto
# A filling disk: writes past 200 bytes fail (EFBIG) instead of raising SIGXFSZ.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
if sys.argv[1] == "plain":
    export_perfetto(sys.argv[2], sys.argv[3], progress="never", compress=False)
else:
    sys.exit(cli.main(["export", sys.argv[2], "-o", sys.argv[3]]))
"""


@pytest.mark.parametrize("packets", ["compressed", "plain"])
def test_a_full_disk_leaves_no_file(tmp_path: Path, packets: str) -> None:
    out = tmp_path / "run.pftrace"
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, packets, str(TRACES / "compact"),
                           str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert f"cannot write {out}.partial: File too large" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_damaged_batched_blocks(tmp_path: Path) -> None:
    """A batched trace whose block bytes were damaged: the export says so, or reads
    what is readable; never a crash, never a file that looks complete on failure."""
    damaged = tmp_path / "batched"
    import shutil

    shutil.copytree(TRACES / "batched", damaged)
    streams: List[Path] = sorted(p for p in damaged.rglob("pinsight_*") if p.parent.name != "index")
    for stream in streams:
        data = bytearray(stream.read_bytes())
        for at in range(len(data) // 2, len(data), 97):
            data[at] ^= 0x5A
        stream.write_bytes(bytes(data))
    out = tmp_path / "run.pftrace"
    code, err = run_cli("export", str(damaged), "-o", str(out))
    if code == 0:
        perfetto_trace.read(out)  # what was read is a valid trace
    else:
        assert code == 1 and "error" in err and str(damaged) in err, err
        assert not out.exists()
    assert list(tmp_path.glob("*.partial")) == []
