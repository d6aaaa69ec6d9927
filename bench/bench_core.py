"""Cost per event and bytes per event of pinsight-python against baselines measured
in the same run.

    .venv/bin/python bench/bench_core.py [--repeat N] [--workloads fib,objects,native]

Workloads: recursive calls (fib), method-heavy object code, n-body (4.2 M events of
small Python functions), many native calls, generator instances (generators: a
generator_end each), asyncio tasks (asyncio: 4,000 gathered tasks of two steps).
Configurations, run interleaved (every configuration once per round, every other
round backwards, each started once LTTng's consumer daemons are idle; rounds
repeated; the minimum is kept): untraced; cProfile; VizTracer and trace0 (the
bench extra: pip install -e ".[bench]"; trace0 records Python begins and ends only,
into thread-local buffers, with a TSC clock); an empty C sys.monitoring callback on
every event we use (the floor of any per-call tool) and on PY_START/PY_RETURN only
(empty-function: the floor of a begin/end tracer); the same plus one cycle-counter
read per record, kept in a ring (clock-callback, clock-function: the floor of a tracer
that timestamps each record, as trace0 and batched do); the integers-only LTTng floor
(bench/reftracer writing the compact payload's events with no naming); the
reference tracer (bench/reftracer: a C callback writing the design's full payload
to the same provider, nothing else); pinsight-python in TRACING with the full,
compact and batched payloads, and batched with `events=("function",)`
(batched-function: begins and ends only, trace0's events; batched-function-inline:
the same without the writer thread, PINSIGHT_PYTHON_BLOCK_WRITER=inline); on CPython 3.15+,
CPython's own sampling profiler (sampler: `python -m profiling.sampling run`, 1 kHz,
the cost of a sampler beside a full timeline; wall time only). The traced ones run
inside one LTTng session with `pinsight-python trace`'s defaults (contexts,
channel). ns per event = time added over untraced / events emitted: by
batched-function for trace0, empty-function, clock-function and batched-function, by the default
events for the others. `--configs untraced,batched,...` times only those (untraced
is always in); `--cpu-time` times the traced thread's CPU time (loaded machines);
`--total-cpu` times all the CPU a tool costs: every thread of the process, from the
tool's start to its stop (trace0's writer threads and its file; our final flush),
plus the LTTng consumer daemons' CPU time meanwhile.

Bytes per event: each workload traced once per payload in a session of its own
(trace's defaults); the bytes LTTng wrote (packet contents, from the trace's
index, plus metadata) over the events of the program (code_info and
callable_info count as bytes, not as events; a batched trace's events are its
blocks' records). The bytes runs' scripts live in a short temporary folder;
nbody also runs from a script whose path is about 150 characters long (row "nbody, long path"),
as a package's module in a virtual environment's site-packages would be.
Discards: fib on 4 threads with each payload, on trace's default channel.
`--bytes-only` measures the bytes and discards alone (no timed rounds).
Each workload's targets (batched against the empty callback and cProfile, batched-function
against trace0) are also given as the median over rounds of the round's own ratio of added
times, steadier than the minima's ratio where the machine's speed drifts between rounds.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import os
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent

WORKLOADS = {
    "fib": """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def workload():
    return fib(25)
""",
    "objects": """
class Vec:
    __slots__ = ("x", "y")
    def __init__(self, x, y):
        self.x = x; self.y = y
    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y)
    def dot(self, o):
        return self.x * o.x + self.y * o.y
    @property
    def norm2(self):
        return self.dot(self)
def workload():
    acc = Vec(0, 0); s = 0
    for i in range(60000):
        acc = acc.add(Vec(i, 1))
        s += acc.norm2 % 7
    return s
""",
    "nbody": """
def advance(bodies, pairs, dt):
    for (b1, b2) in pairs:
        dx = b1[0] - b2[0]; dy = b1[1] - b2[1]; dz = b1[2] - b2[2]
        mag = dt * inverse_cube(dx * dx + dy * dy + dz * dz)
        kick(b1, b2, dx, dy, dz, mag)
    for b in bodies:
        drift(b, dt)
def inverse_cube(d2):
    return d2 ** -1.5
def kick(b1, b2, dx, dy, dz, mag):
    m1 = b1[6] * mag; m2 = b2[6] * mag
    b1[3] -= dx * m2; b1[4] -= dy * m2; b1[5] -= dz * m2
    b2[3] += dx * m1; b2[4] += dy * m1; b2[5] += dz * m1
def drift(b, dt):
    b[0] += dt * b[3]; b[1] += dt * b[4]; b[2] += dt * b[5]
def workload():
    bodies = [[float(i), float(i * i % 7), float(i % 3), 0.1 * i, 0.0, 0.05, 1.0 + i]
              for i in range(5)]
    pairs = [(bodies[i], bodies[j]) for i in range(5) for j in range(i + 1, 5)]
    for _ in range(80000):
        advance(bodies, pairs, 0.01)
    return bodies[0][0]
""",
    "native": """
import math
def workload():
    out = []
    for i in range(100000):
        out.append(math.sqrt(i))
        len(out)
    return sum(out)
""",
    # Generator instances (a generator_end each) and their resumptions.
    "generators": """
def pairs(n):
    for i in range(n):
        yield i, i * i
def workload():
    s = 0
    for i in range(20000):
        s += any(b > 20 for _, b in pairs(8))
    return s
""",
    # asyncio tasks: 4,000 tasks of two steps each, gathered 200 at a time (a
    # task_step per step, a task_create and task_done per task, the loop's frames).
    "asyncio": """
import asyncio
async def leaf(i):
    await asyncio.sleep(0)
    return i
async def main():
    for _ in range(20):
        await asyncio.gather(*(leaf(i) for i in range(200)))
def workload():
    return asyncio.run(main())
""",
}

EVERY_EVENT = ("PY_START", "PY_RETURN", "CALL", "C_RETURN", "C_RAISE")
FUNCTION_EVENTS = ("PY_START", "PY_RETURN")


def monitoring_setup(tool: str, callbacks: Dict[str, str], preamble: str = "") -> str:
    """A runner's setup: bench/reftracer's callbacks (sys.monitoring event -> function)
    registered under tool id 4; start turns those events on."""
    lines = ["import sys, _reftracer", preamble, "M = sys.monitoring; E = M.events",
             f'M.use_tool_id(4, "{tool}")']
    lines += [f"M.register_callback(4, E.{event}, _reftracer.{function})"
              for event, function in callbacks.items()]
    lines += [f"start = lambda: M.set_events(4, {' | '.join(f'E.{e}' for e in callbacks)})",
              "stop = lambda: M.set_events(4, 0)"]
    return "\n".join(line for line in lines if line) + "\n"


def reftracer_setup(suffix: str) -> str:
    """bench/reftracer writing to the provider: the full payload, or integers (_int)."""
    functions = ("on_start", "on_return", "on_call", "on_c_return", "on_c_return")
    return monitoring_setup("reftracer", {e: f + suffix for e, f in zip(EVERY_EVENT, functions)},
                            preamble="_reftracer.load_provider(PROVIDER)")


FLIGHT = "flight-recorder"
SETUP = {
    "untraced": "",
    "cProfile": "import cProfile; _p = cProfile.Profile(); start = _p.enable; stop = _p.disable",
    "viztracer": (
        "from viztracer import VizTracer; _v = VizTracer(tracer_entries=5000000, verbose=0);"
        " start = _v.start; stop = _v.stop"
    ),
    "empty-callback": monitoring_setup("empty", {e: "empty" for e in EVERY_EVENT}),
    "empty-function": monitoring_setup("empty", {e: "empty" for e in FUNCTION_EVENTS}),
    # The floor of a timestamping tracer: the empty callbacks above plus one
    # cycle-counter read per record (a begin, an end, a native call's CALL and end).
    "clock-callback": monitoring_setup(
        "clock", {e: "clocked_call" if e == "CALL" else "clocked" for e in EVERY_EVENT}),
    "clock-function": monitoring_setup("clock", {e: "clocked" for e in FUNCTION_EVENTS}),
    # Its Perfetto file is written at stop, after the timed part, and dropped.
    "trace0": """
import os, shutil, tempfile, trace0
_dir = tempfile.mkdtemp()
_t = trace0.Tracer(os.path.join(_dir, "t.pftrace"), trace_subprocesses=False)
start = _t.__enter__
def stop():
    _t.__exit__(None, None, None); shutil.rmtree(_dir, ignore_errors=True)
""",
    # bench/reftracer's callbacks: integers only, and the full payload.
    "int-floor": reftracer_setup("_int"),
    "reference": reftracer_setup(""),
    "full": """
import pinsight_python
start = lambda: pinsight_python.activate(payload="full")
stop = pinsight_python.deactivate
""",
    "compact": """
import pinsight_python
start = lambda: pinsight_python.activate(payload="compact")
stop = pinsight_python.deactivate
""",
    "batched": """
import pinsight_python
start = lambda: pinsight_python.activate(payload="batched")
stop = pinsight_python.deactivate
""",
    "batched-function": """
import pinsight_python
start = lambda: pinsight_python.activate(("function",), payload="batched")
stop = pinsight_python.deactivate
""",
    # No writer thread: each traced thread encodes and writes its own blocks.
    "batched-function-inline": """
import os, pinsight_python
os.environ["PINSIGHT_PYTHON_BLOCK_WRITER"] = "inline"
start = lambda: pinsight_python.activate(("function",), payload="batched")
stop = pinsight_python.deactivate
""",
    # A flight-recorder run's process (trace --flight-recorder --stall 30): batched into a
    # snapshot session of its own (flight_run), its recorder connected to the run's keeper,
    # the stall watch on.
    FLIGHT: """
import pinsight_python
start = lambda: pinsight_python.activate(payload="batched")
def stop():
    pinsight_python.deactivate()
    # The run's ring as this process maps it: the flight session's buffers alone.
    mapped = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "shm-ust-consumer" in line:
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                mapped += high - low
    print("bench-mapped", mapped)
""",
}
PAYLOADS = ("full", "compact", "batched")
OURS = (*PAYLOADS, "batched-function", "batched-function-inline", FLIGHT)
# Configurations that see Python begins and ends only: their ns per event are
# over batched-function's events.
FUNCTION_ONLY = ("empty-function", "clock-function", "trace0", "batched-function",
                 "batched-function-inline")
# Not a setup inside the workload's process: CPython's own sampling profiler (3.15+)
# runs the workload as its child (run mode, 1 kHz, main thread) and reads its stacks
# from outside; only wall time shows its cost (its CPU is its own process's).
SAMPLER = "sampler"

RUNNER = """
import time, sys
CLOCK = time.{clock}
PROVIDER = {provider!r}
{workload}
start = stop = lambda: None
{setup}
workload()  # warm up (caches, specialization)
events0 = 0
WHOLE = {whole}  # --total-cpu: start() and stop() are timed too
if WHOLE:
    t0 = CLOCK()
start()
if {is_pinsight}:
    import pinsight_python; events0 = pinsight_python.status()["events_emitted"]
if not WHOLE:
    t0 = CLOCK()
workload()
if not WHOLE:
    t1 = CLOCK()
events = 0
if {is_pinsight}:
    events = pinsight_python.status()["events_emitted"] - events0
stop()
if WHOLE:
    t1 = CLOCK()
print("bench-result", t1 - t0, events)
"""


FLIGHT_STALL = 30.0


@contextlib.contextmanager
def flight_run(tmp: Path, gid: Optional[int]) -> Iterator[Dict[str, str]]:
    """A flight recorder's run as `trace --flight-recorder` makes it (a snapshot session of
    the default SIZE on this node's CPUs, recording group `gid` only, its keeper): the
    variables its processes join it with."""
    from pinsight_python.activation.join import ENV_SOCKET
    from pinsight_python.activation.settings import ENV_FLIGHT_RECORDER
    from pinsight_python.recording import lttng
    from pinsight_python.recording.run.flight import Dumps
    from pinsight_python.recording.run.keeper import Keeper

    size = lttng.size_bytes(lttng.FLIGHT_RECORDER_SIZE)
    subbuf, count = lttng.flight_channel(size, lttng.possible_cpus())
    session = lttng.Session(tmp / "flight", track_vgid=gid, snapshot=True,
                            subbuf_size=str(subbuf), num_subbuf=count)
    session.create()
    try:
        session.start()
        keeper = Keeper(session.name, f"PINSIGHT_BENCH_RUN={session.name}",
                        Dumps(session, tmp / "flight", size, lambda line: None))
        keeper.serve()
        try:
            yield {ENV_SOCKET: str(keeper.socket), ENV_FLIGHT_RECORDER: f"{FLIGHT_STALL:g}"}
        finally:
            keeper.stop()
    finally:
        session.destroy()


def daemons_memory() -> Dict[str, Tuple[int, int]]:
    """(RSS, of which shared memory) in bytes of this user's LTTng session and consumer
    daemons, by name, summed over their processes."""
    out: Dict[str, Tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            if (name not in ("lttng-sessiond", "lttng-consumerd")
                    or entry.stat().st_uid != os.geteuid()):
                continue
            status = (entry / "status").read_text().splitlines()
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        rss = int(fields.get("VmRSS", "0 kB").split()[0]) << 10
        shared = int(fields.get("RssShmem", "0 kB").split()[0]) << 10
        total = out.get(name, (0, 0))
        out[name] = (total[0] + rss, total[1] + shared)
    return out


def build_reftracer(out: Path) -> Path:
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = out / f"_reftracer{suffix}"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{include}",
            f"-I{ROOT / 'tracepoints'}",
            f"-I{ROOT / 'src'}",  # format/wire.h, which the provider's header includes
            str(ROOT / "bench" / "reftracer" / "reftracer.c"),
            "-o",
            str(target),
            "-ldl",
        ],
        check=True,
    )
    return out


def provider_path() -> str:
    from pinsight_python import _pinsight_python

    return str(Path(_pinsight_python.__file__).parent / "libpython_pinsight_lttng_ust.so")


# What the runners time: wall time (perf_counter), or with --cpu-time the traced
# thread's CPU time (thread_time: on a loaded machine wall time also counts the
# turns of other processes; a tool's own threads, trace0's writer, are left out
# as an idle core would hide them), or with --total-cpu everything a tool costs
# the machine's CPUs: the process's CPU time, all its threads (trace0's writers),
# from the tool's start to its stop (trace0's file written, our blocks flushed),
# plus the LTTng consumer daemons' CPU time meanwhile (they write LTTng's buffers
# to disk; added to every configuration, ~0 for the untraced ones). On a node
# whose cores all compute (an MPI rank per core), that is the cost that counts.
CLOCK = "perf_counter"
WHOLE = False


def consumer_cpu_seconds() -> float:
    """CPU time so far of this user's lttng-consumerd processes (utime + stime)."""
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "lttng-consumerd":
                continue
            if entry.stat().st_uid != os.geteuid():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def settle(timeout: float = 10.0) -> None:
    """Waits until LTTng's consumer daemons are idle (no CPU tick for 0.2 s), then
    writes back dirty pages: a traced run's data (and a tool's own file) is still being
    written out after it ends, and on a small machine that work would land in the next
    configuration's timing."""
    deadline = time.monotonic() + timeout
    last = consumer_cpu_seconds()
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = consumer_cpu_seconds()
        quiet = quiet + 1 if now == last else 0
        last = now
    os.sync()


def round_order(configs: List[str], round_: int) -> List[str]:
    """Every other round backwards: no configuration always follows the same one."""
    return list(configs) if round_ % 2 == 0 else list(reversed(configs))


def run_one(workload: str, config: str, tmp: Path,
            env: Optional[Dict[str, str]] = None) -> Tuple[float, int]:
    code = RUNNER.format(
        clock=CLOCK,
        provider=provider_path(),
        workload=WORKLOADS[workload],
        setup=SETUP.get(config, ""),
        is_pinsight=config in OURS,
        whole=WHOLE,
    )
    if config == SAMPLER:
        script = tmp / f"sampled_{workload}.py"
        script.write_text(code)
        return run_code(code, tmp, launcher=[
            "-m", "profiling.sampling", "run", "--collapsed",
            "-o", str(tmp / "sampled.stacks"), str(script),
        ])
    if not WHOLE:
        return run_code(code, tmp, env=env)
    consumed = consumer_cpu_seconds()
    seconds, events = run_code(code, tmp, env=env)
    return seconds + consumer_cpu_seconds() - consumed, events


# The group the traced children run in, the only one the sessions record (as
# root): other users' programs stay out of the buffers and the trace. The flight
# recorder's children run in a group of their own, which only its session records.
GID = random.randrange(200_000, 2**31 - 1) if os.geteuid() == 0 else None
FLIGHT_GID = GID + 1 if GID is not None else None


def in_group(gid: Optional[int] = GID) -> None:
    if gid is not None:
        os.setgid(gid)


# The targets: what each of ours is measured against.
TARGET_PAIRS = [("batched", "empty-callback"), ("batched-function", "trace0"),
                ("batched-function-inline", "trace0"), ("batched", "cProfile"),
                (FLIGHT, "batched")]
# The floor of any tracer that timestamps its records: what is left of ours over it.
FLOOR_PAIRS = [("batched", "clock-callback"), ("batched-function", "clock-function"),
               ("trace0", "clock-function")]


def run_code(code: str, tmp: Path, launcher: Optional[List[str]] = None,
             env: Optional[Dict[str, str]] = None) -> Tuple[float, int]:
    """(the workload's seconds, the events it emitted), as the child measured them;
    `launcher`: the interpreter's arguments that run it instead of `-c code`; `env`: a
    flight recorder's variables (the child then runs in its group)."""
    child_env = dict(os.environ, **(env or {}),
                     PYTHONPATH=f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    gid = FLIGHT_GID if env else GID
    proc = subprocess.run(
        [sys.executable, *(launcher or ["-c", code])],
        capture_output=True,
        text=True,
        env=child_env,
        check=False,
        preexec_fn=lambda: in_group(gid),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    MAPPED.extend(int(line.split()[1]) for line in proc.stdout.splitlines()
                  if line.startswith("bench-mapped "))
    result = [line for line in proc.stdout.splitlines() if line.startswith("bench-result ")]
    if not result:
        raise RuntimeError(f"benchmark child printed no result:\n{proc.stdout}{proc.stderr}")
    _, seconds, events = result[-1].split()
    return float(seconds), int(events)


def events_of(config: str) -> str:
    """The configuration whose event count a configuration's ns per event is over."""
    return "batched-function" if config in FUNCTION_ONLY else "batched"


THREADED = """
import sys, threading
import pinsight_python
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
pinsight_python.activate(payload=sys.argv[1])
threads = [threading.Thread(target=fib, args=(25,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""

BYTES_RUNNER = """
import sys
{workload}
import pinsight_python
pinsight_python.activate(payload=sys.argv[1])
workload()
"""


def trace_bytes(trace: Path) -> int:
    """Bytes of the trace's packets (their content size, from LTTng's index
    files: sub-buffers are written whole, padding included) plus metadata."""
    total = 0
    for index in trace.rglob("*.idx"):
        data = index.read_bytes()
        _magic, _major, _minor, entry_len = struct.unpack(">IIII", data[:16])
        for offset in range(16, len(data) - entry_len + 1, entry_len):
            # struct ctf_packet_index: offset, packet_size, content_size (bits), ...
            _off, _size, content_bits = struct.unpack(">QQQ", data[offset : offset + 24])
            total += content_bits // 8
    total += sum(p.stat().st_size for p in trace.rglob("metadata"))
    return total


def count_events(trace: Path) -> Tuple[int, int, int]:
    """(program events, naming events, discarded events) of a trace, by babeltrace2."""
    proc = subprocess.Popen(
        ["babeltrace2", str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    events = names = 0
    for line in proc.stdout:
        if ":code_info:" in line or ":callable_info:" in line:
            names += 1
        elif ":event_block:" in line:
            # The batched payload: the block's records are the program's events.
            found = re.search(r"record_count = (\d+)", line)
            events += int(found.group(1)) if found else 0
        else:
            events += 1
    stderr = proc.stderr.read() if proc.stderr else ""
    proc.wait()
    discarded = sum(int(n) for n in re.findall(r"discarded (\d+) events", stderr))
    return events, names, discarded


# A deep folder (the script's path: about 150 characters) for the long-path row.
LONG_PATH = "home/someone/projects/2026/simulation-campaign/.venv/lib/python3.13/" \
    "site-packages/physics_package/integrators/nbody/symplectic"
LONG_ROW = "nbody, long path"


def traced_once(
    code: str, payload: str, tmp: Path, name: str, folder: str = ""
) -> Tuple[int, int, int, int]:
    """Run `code` (argv[1] = payload) alone in a session with trace's defaults,
    from a script in tmp/folder: (bytes, program events, naming events,
    discarded events)."""
    from pinsight_python.recording import lttng

    out = tmp / name
    script = tmp / folder / f"{name}.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(code)
    with lttng.Session(out, track_vgid=GID):
        subprocess.run(
            [sys.executable, str(script), payload], check=True, preexec_fn=in_group
        )
    events, names, discarded = count_events(out)
    size = trace_bytes(out)
    shutil.rmtree(out)
    return size, events, names, discarded


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def installed(configs: Iterable[str]) -> List[str]:
    """The configurations whose tools are installed (VizTracer and trace0 are extras;
    CPython's sampler came with 3.15)."""
    out = list(configs)
    if SAMPLER in out and WHOLE:
        out.remove(SAMPLER)
        print("--total-cpu: the sampler's CPU is another process's: column skipped")
    if SAMPLER in out and not (importlib.util.find_spec("profiling")
                               and importlib.util.find_spec("profiling.sampling")):
        out.remove(SAMPLER)
        print(f"CPython {sys.version.split()[0]} has no profiling.sampling (3.15+): column skipped")
    for tool in ("viztracer", "trace0"):
        if tool not in out:
            continue
        try:
            __import__(tool)
        except ImportError:
            out.remove(tool)
            print(f"{tool} is not installed (pip install -e '.[bench]'): column skipped")
    return out


def names_among(parser: argparse.ArgumentParser, value: str, known: Sequence[str],
                what: str) -> List[str]:
    """`value`'s comma-separated names, each one of `known`; else the parser's error
    naming the unknown ones and what was expected."""
    names = value.split(",")
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown {what}(s) {', '.join(unknown)}; expected some of "
                     f"{', '.join(known)}")
    return names


def parse_arguments() -> argparse.Namespace:
    """The command line, checked; sets what the runners time (CLOCK, WHOLE)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the minimum is kept")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--configs", default=",".join([*SETUP, SAMPLER]))
    parser.add_argument("--no-bytes", action="store_true", help="time only")
    parser.add_argument("--bytes-only", action="store_true",
                        help="bytes per event and discards only, no timed rounds")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the traced thread's CPU time, not wall time (loaded machines)")
    parser.add_argument("--total-cpu", action="store_true",
                        help="time all the CPU a tool costs: every thread of the process from"
                        " the tool's start to its stop, and LTTng's consumer daemons meanwhile")
    args = parser.parse_args()
    global CLOCK, WHOLE
    if args.cpu_time and args.total_cpu:
        parser.error("--cpu-time and --total-cpu are exclusive")
    if args.cpu_time:
        CLOCK = "thread_time"
    if args.total_cpu:
        CLOCK, WHOLE = "process_time", True
    names_among(parser, args.configs, [*SETUP, SAMPLER], "configuration")
    return args


def main() -> int:
    args = parse_arguments()
    wanted = args.configs.split(",")
    known = [*SETUP, SAMPLER]
    # untraced is every ratio's base, and the event counts come from ours.
    needed = {"untraced"} | {events_of(c) for c in wanted}
    configs = installed([c for c in known if c in wanted or c in needed])
    workloads = args.workloads.split(",")
    print(f"load average before: {load_average()}; timing {CLOCK}")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        runs: Dict[Tuple[str, str], List[float]] = {}
        events: Dict[Tuple[str, str], int] = {}
        if not args.bytes_only:
            build_reftracer(tmp)
            runs, events = time_rounds(workloads, configs, args.repeat, tmp)
            if FLIGHT in configs:
                measure_flight_memory(workloads[0], tmp)
        sizes: Dict[Tuple[str, str], Tuple[int, int, int, int]] = {}
        discards: Dict[str, int] = {}
        rows = [(w, w, "") for w in workloads]
        if "nbody" in workloads:
            rows.append((LONG_ROW, "nbody", LONG_PATH))
        if not args.no_bytes:
            for row, workload, folder in rows:
                code = BYTES_RUNNER.format(workload=WORKLOADS[workload])
                for payload in PAYLOADS:
                    sizes[(row, payload)] = traced_once(code, payload, tmp, f"b-{workload}",
                                                        folder)
            discards = {p: traced_once(THREADED, p, tmp, "fib4")[3] for p in PAYLOADS}
    print(f"load average after: {load_average()}")

    if not args.bytes_only:
        best = {key: min(values) for key, values in runs.items()}
        print_costs(workloads, configs[1:], best, events, args.repeat)
        print_memory()
        for workload in workloads:
            print_paired(f"{workload}, time added over untraced, ours / theirs, median of the "
                         f"{args.repeat} rounds' ratios (each round's own untraced)",
                         TARGET_PAIRS + FLOOR_PAIRS, {c: runs[(workload, c)] for c in configs})
    if not args.no_bytes:
        print_sizes([row for row, _, _ in rows], sizes, discards)
    return 0


def paired_ratio(ours: List[float], theirs: List[float], base: List[float],
                 their_base: Optional[List[float]] = None) -> Optional[Tuple[float, float, float]]:
    """(median, lowest, highest) over rounds of the time `ours` adds over untraced
    divided by the time `theirs` adds, both from the same round: a machine whose speed
    drifts between rounds moves both alike. `their_base`: `theirs`' own untraced runs
    (another build's interpreter), else `base`. None when no round has `theirs` above
    untraced."""
    ratios = sorted((o - u) / (t - v)
                    for o, t, u, v in zip(ours, theirs, base, their_base or base) if t > v)
    if not ratios:
        return None
    return statistics.median(ratios), ratios[0], ratios[-1]


def print_paired(title: str, pairs: List[Tuple[str, str]],
                 runs: Dict[str, List[float]]) -> None:
    """The per-round ratios of `pairs` present in `runs` (by configuration)."""
    lines = []
    for ours, theirs in pairs:
        if ours in runs and theirs in runs:
            r = paired_ratio(runs[ours], runs[theirs], runs["untraced"])
            if r:
                lines.append(f"{ours} / {theirs}: {r[0]:.2f} (rounds {r[1]:.2f} to {r[2]:.2f})")
    if lines:
        print(f"\n{title}\n" + "\n".join(lines))


def time_rounds(
    workloads: List[str], configs: List[str], repeat: int, tmp: Path
) -> Tuple[Dict[Tuple[str, str], List[float]], Dict[Tuple[str, str], int]]:
    """(the time of each (workload, config) in every round, in round order, the events
    each of ours emits per workload), over interleaved rounds."""
    from pinsight_python.recording import lttng

    runs: Dict[Tuple[str, str], List[float]] = collections.defaultdict(list)
    events: Dict[Tuple[str, str], int] = {}
    for round_ in range(repeat):
        # One session per round: the traced runs' data is dropped after it.
        trace = tmp / f"trace-{round_}"
        with contextlib.ExitStack() as stack:
            stack.enter_context(lttng.Session(trace, track_vgid=GID))
            flight = (stack.enter_context(flight_run(tmp, FLIGHT_GID)) if FLIGHT in configs
                      else None)
            for workload in workloads:
                for config in round_order(configs, round_):
                    settle()
                    seconds, n = run_one(workload, config, tmp,
                                         flight if config == FLIGHT else None)
                    runs[(workload, config)].append(seconds)
                    if config in OURS:
                        events[(workload, config)] = n
        shutil.rmtree(trace, ignore_errors=True)
    return dict(runs), events


# LTTng's daemons' memory before the rounds, and with a flight recorder's session alone,
# once a workload ran into it (measure_flight_memory).
MEMORY: Dict[str, Dict[str, Tuple[int, int]]] = {}


MAPPED: List[int] = []  # what the flight recorder's process mapped of the ring


def measure_flight_memory(workload: str, tmp: Path) -> None:
    settle()
    MEMORY["before"] = daemons_memory()
    with flight_run(tmp, FLIGHT_GID) as env:
        run_one(workload, FLIGHT, tmp, env)
        MEMORY["with"] = daemons_memory()


def print_memory() -> None:
    from pinsight_python.recording import lttng

    if "with" not in MEMORY:
        return
    size = lttng.size_bytes(lttng.FLIGHT_RECORDER_SIZE)
    subbuf, count = lttng.flight_channel(size, lttng.possible_cpus())
    print(f"\nLTTng's daemons (RSS, of which shared memory), without a session of ours and "
          f"with a flight recorder's alone ({lttng.FLIGHT_RECORDER_SIZE} on "
          f"{lttng.possible_cpus()} possible CPUs: {count} x {subbuf >> 10} KiB sub-buffers "
          "per CPU, and the reader's), after one run of the first workload into it (its ring "
          "fills as it is written, up to SIZE):")
    for name in ("lttng-sessiond", "lttng-consumerd"):
        (rss0, shm0), (rss1, shm1) = (MEMORY[k].get(name, (0, 0)) for k in ("before", "with"))
        print(f"{name}: {rss0 / (1 << 20):,.1f} MiB ({shm0 / (1 << 20):,.1f}) -> "
              f"{rss1 / (1 << 20):,.1f} MiB ({shm1 / (1 << 20):,.1f})")
    print("(the daemons serve every session of the user: others' sessions count in)")
    if MAPPED:
        print(f"the ring, as the flight recorder's traced process maps it: "
              f"{max(MAPPED) / (1 << 20):,.1f} MiB of {lttng.FLIGHT_RECORDER_SIZE}")


def print_costs(
    workloads: List[str],
    shown: List[str],
    best: Dict[Tuple[str, str], float],
    events: Dict[Tuple[str, str], int],
    repeat: int,
) -> None:
    print(
        f"\nns per event = (time - untraced) / events emitted by pinsight-python (batched's;"
        f" batched-function's for {', '.join(FUNCTION_ONLY)}); min of {repeat} interleaved"
        " rounds\n"
    )
    print(f"| workload | events | function events | {' | '.join(shown)} |")
    print(f"|---|---:|---:|{'---:|' * len(shown)}")
    per: Dict[Tuple[str, str], float] = {}
    for workload in workloads:
        base = best[(workload, "untraced")]
        for c in shown:
            n = events[(workload, events_of(c))]
            per[(workload, c)] = (best[(workload, c)] - base) / n * 1e9
        cells = [f"{per[(workload, c)]:.1f}" for c in shown]
        counts = [f"{events.get((workload, c), 0):,}" for c in ("batched", "batched-function")]
        print(f"| {workload} | {' | '.join(counts)} | {' | '.join(cells)} |")

    def ratios(title: str, pairs: List[Tuple[str, str]]) -> None:
        pairs = [(a, b) for a, b in pairs if a in shown and b in shown]
        if not pairs:
            return
        print(f"\n{title}\n")
        print("| workload | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " |")
        print("|---|" + "---:|" * len(pairs))
        for workload in workloads:
            print(f"| {workload} | " + " | ".join(
                f"{per[(workload, a)] / per[(workload, b)]:.2f}" for a, b in pairs) + " |")

    ratios("ratios per event (target: compact <= 0.95x, full <= 1.10x the reference)",
           [("full", "reference"), ("compact", "reference"), ("int-floor", "reference")])
    ratios("batched per event against the fastest (targets: batched <= 1.5x empty-callback,"
           " batched-function <= 1.00x trace0, batched <= 1.00x cProfile)",
           [("batched", "empty-callback"), ("batched-function", "trace0"),
            ("batched-function-inline", "trace0"),
            ("batched-function", "empty-function"), ("batched", "cProfile"),
            ("batched", "compact")])
    ratios("over the floor of a timestamping tracer (an empty callback plus one cycle-counter"
           " read per record)",
           FLOOR_PAIRS)


def print_sizes(
    workloads: List[str],
    sizes: Dict[Tuple[str, str], Tuple[int, int, int, int]],
    discards: Dict[str, int],
) -> None:
    print("\nbytes per event with trace's defaults (target: compact <= 45, full <= 90)\n")
    print("| workload | full B/event | compact B/event | batched B/event | "
          "compact names events |")
    print("|---|---:|---:|---:|---:|")
    for workload in workloads:
        full = sizes[(workload, "full")]
        compact = sizes[(workload, "compact")]
        batched = sizes[(workload, "batched")]
        print(
            f"| {workload} | {full[0] / full[1]:.1f} | {compact[0] / compact[1]:.1f} | "
            f"{batched[0] / batched[1]:.1f} | {compact[2]:,} |"
        )
    print(
        "\ndiscarded events, fib(25) on 4 threads, trace's default channel: "
        + ", ".join(f"{p} {n:,}" for p, n in discards.items())
    )


if __name__ == "__main__":
    sys.exit(main())
