"""Record the small traces tests/unit/test_reader.py reads (tests/unit/traces/).

    .venv/bin/python scripts/make_unit_traces.py

Needs what tests/core needs (LTTng, its session daemon); the unit tests that read
the traces need neither. tests/unit/traces/full_ctf2 is the full payload in CTF 2,
LTTng 2.15's default format, recorded with LTTng 2.16 (Debian sid's, scripts/sid-prefix.sh
lttng) on an interpreter whose glibc is sid's:

    bash scripts/with-lttng.sh -- .venv-3.14/bin/python scripts/make_unit_traces.py --ctf2
 Run it again when the trace format changes (the
tracepoints, the payloads, the reader's contract), check that tests/unit passes,
and commit the new traces: each is a few tens of KB. The program is fixed, so the
expected counts in test_reader.py stay what they are. tests/unit/traces/
full_file_per_event is not recorded again: it is the full payload as earlier versions
wrote it (the file in every event), which the reader must keep reading.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tracing import clean_env, isolated_session, read_trace, report_json  # noqa: E402

from pinsight_python.recording import lttng  # noqa: E402

OUT = ROOT / "tests" / "unit" / "traces"
# Known counts: fib(6) makes 25 calls; two threads each sort and sum; one
# function raises and is caught. Small: every trace stays well under 100 KB.
PROGRAM = textwrap.dedent(
    """
    import threading

    import pinsight_python

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work(i):
        data = sorted([3, 1, 2])
        return sum(data) + i

    def fails():
        raise ValueError("caught")

    def main():
        fib(6)
        threads = [threading.Thread(target=work, args=(i,), name=f"w{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            fails()
        except ValueError:
            pass

    pinsight_python.activate(events=["function", "c_call"], payload=PAYLOAD)
    main()
    """
)
PAYLOADS = ("full", "compact", "batched")


def record(payload: str, tmp: Path, trace_format: str = lttng.DEFAULT_TRACE_FORMAT) -> Path:
    script = tmp / "unit_program.py"
    script.write_text(PROGRAM.replace("PAYLOAD", repr(payload)))
    out = tmp / payload
    # Small sub-buffers: the files the consumer writes stay small.
    with isolated_session(out, subbuf_size="16k", num_subbuf=4,
                          trace_format=trace_format) as run_as:
        subprocess.run([sys.executable, str(script)], env=clean_env(), cwd=tmp, check=True,
                       preexec_fn=run_as, timeout=120)
    if trace_format == "ctf-2":  # beyond Debian 12's python3-bt2: our reader, on 2.1
        report = report_json(out, "--top", "0")
        events, discarded = sum(report["event_counts"].values()), report["discarded"]["events"]
    else:
        trace = read_trace(out)
        events, discarded = len(trace.events), trace.discarded
    if discarded or not events:
        sys.exit(f"make_unit_traces: {payload}: {events} events, {discarded} discarded: "
                 "record again")
    return out


def main() -> int:
    ctf2 = sys.argv[1:] == ["--ctf2"]
    lttng.ensure_sessiond()
    with tempfile.TemporaryDirectory(prefix="unit-traces-") as name:
        tmp = Path(name)
        for payload in ["full"] if ctf2 else PAYLOADS:
            recorded = record(payload, tmp, "ctf-2" if ctf2 else lttng.DEFAULT_TRACE_FORMAT)
            target = OUT / (f"{payload}_ctf2" if ctf2 else payload)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(recorded, target)
            size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
            print(f"{target.relative_to(ROOT)}: {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
