"""Type stubs of the compiled trace reader (src/reader).

The reader hands Python named, typed records (PyStructSequence types made in
src/reader/records.cpp, in the field order declared here): tuples whose fields
are read by name. A symbol is an index into ``TraceResult.symbols``.
"""

import sys
from typing import Any, Dict, Final, List, Optional, Tuple, final

from _typeshed import structseq

class ReaderError(RuntimeError): ...
class OutputError(OSError): ...  # an export could not be written


@final
class FunctionStats(structseq[int], Tuple[int, int, int, int, int, int, int, int]):
    """Per function of a thread: a Python function or a native callee."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "symbol", "calls", "segments", "total_ns", "self_ns", "exceptions", "finished",
            "wall_ns",
        )

    @property
    def symbol(self) -> int: ...  # index into TraceResult.symbols
    @property
    def calls(self) -> int: ...  # starts (transition=start); native: every call
    @property
    def segments(self) -> int: ...  # frame segments, generator resumes included
    @property
    def total_ns(self) -> int: ...  # outermost of recursive frames only
    @property
    def self_ns(self) -> int: ...  # minus child frames, native ones included
    @property
    def exceptions(self) -> int: ...  # left by unwind, or native calls that raised
    @property
    def finished(self) -> int: ...  # generator/coroutine instances that ended (generator_end)
    @property
    def wall_ns(self) -> int: ...  # their lifetimes, first start to final end

@final
class NativeCallStats(structseq[int], Tuple[int, int, int, int, int]):
    """Per caller -> native callee pair of a thread."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("caller", "callee", "calls", "total_ns", "raised")

    @property
    def caller(self) -> int: ...  # symbol of the Python caller
    @property
    def callee(self) -> int: ...  # symbol of the native callee
    @property
    def calls(self) -> int: ...
    @property
    def total_ns(self) -> int: ...  # outermost calls of the pair only
    @property
    def raised(self) -> int: ...

@final
class Anomalies(structseq[int], Tuple[int, int, int, int, int]):
    """Input of a thread the stacks could not explain, reported rather than guessed at."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "ends_without_begin", "implicitly_closed", "open_at_end", "stepped_aside",
            "cut_by_damage",
        )

    @property
    def ends_without_begin(self) -> int: ...
    @property
    def implicitly_closed(self) -> int: ...
    @property
    def open_at_end(self) -> int: ...
    @property
    def stepped_aside(self) -> int: ...
    @property
    def cut_by_damage(self) -> int: ...  # open where the thread's stream lost packets

@final
class ImportStats(structseq[int], Tuple[int, int, int, int, int]):
    """Per imported module of a thread."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("symbol", "loads", "cumulative_ns", "self_ns", "raised")

    @property
    def symbol(self) -> int: ...  # an import frame's symbol: qualname is the module
    @property
    def loads(self) -> int: ...
    @property
    def cumulative_ns(self) -> int: ...
    @property
    def self_ns(self) -> int: ...  # minus nested imports (python -X importtime)
    @property
    def raised(self) -> int: ...

@final
class ImportChain(structseq[Any], Tuple[int, List[int], bool]):
    """An outermost import followed down its slowest nested imports."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("ns", "modules", "raised")

    @property
    def ns(self) -> int: ...  # the outermost import's cumulative time
    @property
    def modules(self) -> List[int]: ...  # symbols, outermost first
    @property
    def raised(self) -> bool: ...

@final
class AllocNode(structseq[int], Tuple[int, int]):
    """Sampled bytes allocated at a call-tree node of a thread."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("node", "bytes")

    @property
    def node(self) -> int: ...  # index into ThreadRecord.call_tree
    @property
    def bytes(self) -> int: ...

@final
class GilRelease(structseq[int], Tuple[int, int, int, int]):
    """GIL releases under one native callee."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("callee", "releases", "released_ns", "wait_ns")

    @property
    def callee(self) -> int: ...  # symbol, or -1: no native call open
    @property
    def releases(self) -> int: ...
    @property
    def released_ns(self) -> int: ...
    @property
    def wait_ns(self) -> int: ...  # waiting to take the GIL back

@final
class GilWait(structseq[int], Tuple[int, int]):
    """GIL waits while a function was the innermost Python frame."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("symbol", "gil_wait_ns")

    @property
    def symbol(self) -> int: ...
    @property
    def gil_wait_ns(self) -> int: ...

@final
class GilStats(structseq[Any], Tuple[int, int, int, int, int, List[GilRelease], List[GilWait]]):
    """events = gil: where a thread's time went with respect to the GIL."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "switch_wait_ns", "take_back_wait_ns", "released_ns", "switches", "releases",
            "releases_by_callee", "function_waits",
        )

    @property
    def switch_wait_ns(self) -> int: ...
    @property
    def take_back_wait_ns(self) -> int: ...
    @property
    def released_ns(self) -> int: ...
    @property
    def switches(self) -> int: ...
    @property
    def releases(self) -> int: ...
    @property
    def releases_by_callee(self) -> List[GilRelease]: ...
    @property
    def function_waits(self) -> List[GilWait]: ...

@final
class CallTreeNode(structseq[int], Tuple[int, int, int, int]):
    """A call path of a thread; node 0 is the thread itself, parents come first."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("parent", "symbol", "self_ns", "calls")

    @property
    def parent(self) -> int: ...  # index of the parent node
    @property
    def symbol(self) -> int: ...  # -1 for node 0
    @property
    def self_ns(self) -> int: ...
    @property
    def calls(self) -> int: ...

@final
class RecentEvent(structseq[Any], Tuple[int, str, int]):
    """One of a thread's last frame events (a flight recorder's dump shows them)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("ts_ns", "kind", "symbol")

    @property
    def ts_ns(self) -> int: ...
    @property
    def kind(self) -> str: ...  # call resume return yield unwind native_call/_return/_raise
    @property
    def symbol(self) -> int: ...  # -1: unknown

@final
class ThreadRecord(
    structseq[Any],
    Tuple[
        int, str, int, int, int, int, int, List[FunctionStats], List[NativeCallStats], Anomalies,
        List[ImportStats], List[ImportChain], List[AllocNode], Optional[GilStats],
        Optional[List[CallTreeNode]], Optional[List[CallTreeNode]], bool, List[RecentEvent],
    ],
):
    """One thread of the program (the tracer's control thread left out)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "vtid", "label", "python_thread_id", "thread_ident", "events", "first_ns", "last_ns",
            "functions", "native_calls", "anomalies", "imports", "import_chains", "alloc_tree",
            "gil", "call_tree", "task_tree", "lower_bound", "recent",
        )

    @property
    def vtid(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def python_thread_id(self) -> int: ...  # -1: unknown
    @property
    def thread_ident(self) -> int: ...
    @property
    def events(self) -> int: ...
    @property
    def first_ns(self) -> int: ...
    @property
    def last_ns(self) -> int: ...
    @property
    def functions(self) -> List[FunctionStats]: ...
    @property
    def native_calls(self) -> List[NativeCallStats]: ...
    @property
    def anomalies(self) -> Anomalies: ...
    @property
    def imports(self) -> List[ImportStats]: ...
    @property
    def import_chains(self) -> List[ImportChain]: ...
    @property
    def alloc_tree(self) -> List[AllocNode]: ...  # empty without call trees
    @property
    def gil(self) -> Optional[GilStats]: ...  # None: the thread has no gil events
    @property
    def call_tree(self) -> Optional[List[CallTreeNode]]: ...  # None: read without call trees
    # The call tree with each asyncio task step's frames under their task (by
    # name, its number left out); None: no task step ran here, or no call trees.
    @property
    def task_tree(self) -> Optional[List[CallTreeNode]]: ...
    @property
    def lower_bound(self) -> bool: ...  # damage to the trace may have cost it events
    @property
    def recent(self) -> List[RecentEvent]: ...  # its last frame events (at most 8), oldest first

@final
class OpenFrame(structseq[int], Tuple[int, int, int, int, int]):
    """A frame open when a flight recorder's dump was taken."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("depth", "symbol", "caller", "line", "begin_ns")

    @property
    def depth(self) -> int: ...  # 0: the outermost
    @property
    def symbol(self) -> int: ...  # a Python function, or a native call's callee
    @property
    def caller(self) -> int: ...  # a native call's Python caller; -1 for a Python frame
    @property
    def line(self) -> int: ...  # a Python function's first line; a native call's line
    @property
    def begin_ns(self) -> int: ...  # 0: not known

@final
class OpenRegion(structseq[Any], Tuple[str, int]):
    """A native region (PInsight's OpenMP, MPI, CUDA) open at the end of a dump."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("label", "begin_ns")

    @property
    def label(self) -> str: ...  # "[MPI] MPI_Allreduce"
    @property
    def begin_ns(self) -> int: ...

@final
class DumpStack(structseq[Any], Tuple[int, int, List[OpenFrame], List[OpenRegion]]):
    """One thread's open frames at a dump, outermost first, and its open regions."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("vtid", "python_thread_id", "frames", "regions")

    @property
    def vtid(self) -> int: ...
    @property
    def python_thread_id(self) -> int: ...
    @property
    def frames(self) -> List[OpenFrame]: ...
    @property
    def regions(self) -> List[OpenRegion]: ...

@final
class DumpRecord(structseq[Any], Tuple[int, int, str, int, int, int, List[DumpStack]]):
    """A process's part of a flight recorder's dump (its last dump_marker)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "dump_id", "ts_ns", "reason", "status", "threads", "frames", "stacks",
        )

    @property
    def dump_id(self) -> int: ...
    @property
    def ts_ns(self) -> int: ...
    @property
    def reason(self) -> str: ...
    @property
    def status(self) -> int: ...  # PINSIGHT_DUMP_* bits (format/wire.h): 0 when whole
    @property
    def threads(self) -> int: ...
    @property
    def frames(self) -> int: ...
    @property
    def stacks(self) -> List[DumpStack]: ...

@final
class AllocStats(structseq[int], Tuple[int, int, int, int, int]):
    """Sampled allocations of a process, per allocating function."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "symbol", "samples", "sampled_bytes", "retained_bytes", "native_bytes",
        )

    @property
    def symbol(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def sampled_bytes(self) -> int: ...
    @property
    def retained_bytes(self) -> int: ...  # not freed by the end of the trace
    @property
    def native_bytes(self) -> int: ...  # through malloc from native code

@final
class ModeChange(structseq[Any], Tuple[int, str, str, int]):
    """A change of the Python domain's trace mode (mode_change)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("ts_ns", "mode", "reason", "generation")

    @property
    def ts_ns(self) -> int: ...  # ns from the trace's origin, as first_ns
    @property
    def mode(self) -> str: ...  # OFF, STANDBY, MONITORING, TRACING
    @property
    def reason(self) -> str: ...  # activate, reload, window_end_action, set_mode, debugger, ...
    @property
    def generation(self) -> int: ...  # the configuration's generation

@final
class ConfigRecord(structseq[Any], Tuple[int, str, int]):
    """A configuration put in force (config_info: activation, each reload)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("ts_ns", "path", "generation")

    @property
    def ts_ns(self) -> int: ...
    @property
    def path(self) -> str: ...  # "": the built-in defaults
    @property
    def generation(self) -> int: ...

@final
class LexgionCounts(structseq[Any], Tuple[int, int, int, bool, int, int, int, str]):
    """Rate control's counts of one function (lexgion_counts, the process's last)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "symbol", "seen", "traced", "seen_is_lower_bound", "max_num_traces", "tracing_rate",
            "trace_starts_at", "section",
        )

    @property
    def symbol(self) -> int: ...
    @property
    def seen(self) -> int: ...  # calls the tracer saw (MONITORING and TRACING)
    @property
    def traced(self) -> int: ...  # calls whose function_begin was emitted
    @property
    def seen_is_lower_bound(self) -> bool: ...  # begins disabled: later calls not counted
    @property
    def max_num_traces(self) -> int: ...  # -1: no cap
    @property
    def tracing_rate(self) -> int: ...
    @property
    def trace_starts_at(self) -> int: ...
    @property
    def section(self) -> str: ...  # the lexgion section that decided

@final
class TaskFunction(structseq[Any], Tuple[int, int, bool]):
    """Self time of a function in a task's steps, or in the work it handed to threads."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("symbol", "self_ns", "offloaded")

    @property
    def symbol(self) -> int: ...
    @property
    def self_ns(self) -> int: ...
    @property
    def offloaded(self) -> bool: ...  # run by another thread (to_thread, run_in_executor)

@final
class TaskRecord(
    structseq[Any],
    Tuple[
        int, int, str, int, int, int, int, str, int, int, int, int, int, int, int, Tuple[int, ...],
        List[TaskFunction],
    ],
):
    """One asyncio task of a process: its steps, times, outcome and relations."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "serial", "task_id", "name", "vtid", "created_ns", "first_step_ns", "done_ns",
            "outcome", "steps", "running_ns", "waiting_ns", "offloaded_ns", "offloads", "creator",
            "created_at", "awaited_by", "functions",
        )

    @property
    def serial(self) -> int: ...  # 1, 2, ... in the process, in order of appearance
    @property
    def task_id(self) -> int: ...  # the Task object's address
    @property
    def name(self) -> str: ...
    @property
    def vtid(self) -> int: ...  # its event loop's thread
    @property
    def created_ns(self) -> int: ...
    @property
    def first_step_ns(self) -> int: ...  # 0: never ran
    @property
    def done_ns(self) -> int: ...  # 0: not done when the trace ended
    @property
    def outcome(self) -> str: ...  # returned, raised, cancelled, pending
    @property
    def steps(self) -> int: ...
    @property
    def running_ns(self) -> int: ...
    @property
    def waiting_ns(self) -> int: ...  # created to done (or the trace's end) less running
    @property
    def offloaded_ns(self) -> int: ...  # its work run by other threads
    @property
    def offloads(self) -> int: ...
    @property
    def creator(self) -> int: ...  # the creating task's serial, 0: none
    @property
    def created_at(self) -> int: ...  # symbol of the creating call, -1: unknown
    @property
    def awaited_by(self) -> Tuple[int, ...]: ...  # serials of the tasks that awaited it
    @property
    def functions(self) -> List[TaskFunction]: ...  # by self time, the first few

@final
class TaskGroupRecord(
    structseq[Any], Tuple[str, int, int, int, int, int, int, int, int, int]
):
    """Done tasks past the first 10,000 of a process, by name without its number."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "name", "vtid", "tasks", "steps", "running_ns", "waiting_ns", "offloaded_ns",
            "returned", "raised", "cancelled",
        )

    @property
    def name(self) -> str: ...  # "Task-*" for Task-1, Task-2, ...
    @property
    def vtid(self) -> int: ...
    @property
    def tasks(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def running_ns(self) -> int: ...
    @property
    def waiting_ns(self) -> int: ...
    @property
    def offloaded_ns(self) -> int: ...
    @property
    def returned(self) -> int: ...
    @property
    def raised(self) -> int: ...
    @property
    def cancelled(self) -> int: ...

@final
class ProcessRecord(
    structseq[Any],
    Tuple[
        int, str, int, str, bool, int, int, int, str, str, str, str, str, int, List[AllocStats],
        List[ThreadRecord], List[ModeChange], List[ConfigRecord], List[LexgionCounts],
        List[TaskRecord], List[TaskGroupRecord], Optional[DumpRecord],
    ],
):
    """One traced process the filters keep, and its threads, main first."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "vpid", "host", "chrome_pid", "label", "has_info", "pid", "mpi_rank", "mpi_size",
            "hostname", "argv", "python_version", "backend", "procname", "events", "allocations",
            "threads", "mode_changes", "configs", "rate_controlled", "tasks", "task_groups",
            "dump",
        )

    @property
    def vpid(self) -> int: ...
    @property
    def host(self) -> str: ...  # the trace's hostname
    @property
    def chrome_pid(self) -> int: ...
    @property
    def label(self) -> str: ...
    @property
    def has_info(self) -> bool: ...  # a process_info event was seen
    @property
    def pid(self) -> int: ...  # -1: no process_info
    @property
    def mpi_rank(self) -> int: ...  # -1: none
    @property
    def mpi_size(self) -> int: ...  # -1: none
    @property
    def hostname(self) -> str: ...
    @property
    def argv(self) -> str: ...
    @property
    def python_version(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def procname(self) -> str: ...
    @property
    def events(self) -> int: ...
    @property
    def allocations(self) -> List[AllocStats]: ...
    @property
    def threads(self) -> List[ThreadRecord]: ...
    @property
    def mode_changes(self) -> List[ModeChange]: ...
    @property
    def configs(self) -> List[ConfigRecord]: ...
    @property
    def rate_controlled(self) -> List[LexgionCounts]: ...
    @property
    def tasks(self) -> List[TaskRecord]: ...  # asyncio tasks, the first 10,000
    @property
    def task_groups(self) -> List[TaskGroupRecord]: ...  # the rest, folded
    @property
    def dump(self) -> Optional[DumpRecord]: ...  # None: no flight recorder's dump

@final
class Discard(structseq[Any], Tuple[int, int, int, int, bool]):
    """One record of events (or packets) LTTng discarded."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("discarded", "begin_ns", "end_ns", "stream_id", "packets")

    @property
    def discarded(self) -> int: ...  # events, or packets
    @property
    def begin_ns(self) -> int: ...  # 0: unknown
    @property
    def end_ns(self) -> int: ...
    @property
    def stream_id(self) -> int: ...
    @property
    def packets(self) -> bool: ...  # packets rather than events

@final
class MissingEvents(structseq[Any], Tuple[str, int, int, int, int, int]):
    """Records of the batched payload that never came, on one thread."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("host", "vpid", "vtid", "python_thread_id", "after_ns", "missing")

    @property
    def host(self) -> str: ...
    @property
    def vpid(self) -> int: ...
    @property
    def vtid(self) -> int: ...
    @property
    def python_thread_id(self) -> int: ...
    @property
    def after_ns(self) -> int: ...  # the thread's last record before them
    @property
    def missing(self) -> int: ...  # 0: unknown (the thread's last block never came)

@final
class DamagedPart(
    structseq[Any], Tuple[str, str, str, int, int, int, int, int, int, int, str, int]
):
    """Part of a trace file the reader had to skip: damage (one per place)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "file", "kind", "detail", "begin_ns", "end_ns", "packets", "offset", "bytes",
            "events_read", "events_lost", "host", "vpid",
        )

    @property
    def file(self) -> str: ...  # the stream file, metadata or index
    @property
    def kind(self) -> str: ...  # cut, no_whole_packet, empty, bad_packet_header,
    # undecodable, stopped, cut_metadata, bad_metadata, bad_index
    @property
    def detail(self) -> str: ...  # what was wrong (babeltrace2's cause, or the pre-scan's)
    @property
    def begin_ns(self) -> int: ...  # the time span lost, ns since the epoch (0: unknown)
    @property
    def end_ns(self) -> int: ...  # 0: unknown
    @property
    def packets(self) -> int: ...  # packets skipped, whole or in part
    @property
    def offset(self) -> int: ...  # where in the file the skipped bytes begin
    @property
    def bytes(self) -> int: ...  # bytes skipped
    @property
    def events_read(self) -> int: ...  # events of a damaged packet read before the damage
    @property
    def events_lost(self) -> int: ...  # events decoded but dropped (their time went back)
    @property
    def host(self) -> str: ...  # the trace's hostname
    @property
    def vpid(self) -> int: ...  # per-process buffers: the process; -1: any of the trace

@final
class SymbolInfo(structseq[Any], Tuple[bool, str, str, int, str, str]):
    """A Python function or a native callee; symbols are indexes into TraceResult.symbols."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("native", "qualname", "filename", "lineno", "module", "origin")

    @property
    def native(self) -> bool: ...
    @property
    def qualname(self) -> str: ...  # native: the callee's name
    @property
    def filename(self) -> str: ...  # native: empty
    @property
    def lineno(self) -> int: ...  # -1: a caller whose line is unknown
    @property
    def module(self) -> str: ...
    @property
    def origin(self) -> str: ...  # one of analysis.ORIGINS

@final
class NativeRegion(
    structseq[Any], Tuple[int, int, int, int, str, str, str, int, int, Optional[str]]
):
    """Native regions (OpenMP, MPI, CUDA...) of one process, caller, domain and name."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "vpid", "mpi_rank", "caller", "via", "attributed", "domain", "region", "instances",
            "total_ns", "mangled",
        )

    @property
    def vpid(self) -> int: ...
    @property
    def mpi_rank(self) -> int: ...  # -1: none
    @property
    def caller(self) -> int: ...  # the Python function's symbol, or -1: no Python caller
    @property
    def via(self) -> int: ...  # the native callee it went through (a symbol), or -1
    @property
    def attributed(self) -> str: ...  # how: "own_thread", "blocked_call"; why not:
    # "no_blocked_call", "several_blocked_calls", "no_launch"
    @property
    def domain(self) -> str: ...  # "openmp", "mpi", "cuda", or the provider
    @property
    def region(self) -> str: ...
    @property
    def instances(self) -> int: ...  # regions that ended
    @property
    def total_ns(self) -> int: ...
    @property
    def mangled(self) -> Optional[str]: ...  # a CUDA kernel's name before demangling

@final
class UnmatchedRegion(structseq[Any], Tuple[int, int, str, str, int]):
    """Native region begins that never ended (listed, never timed)."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("vpid", "mpi_rank", "domain", "region", "begins")

    @property
    def vpid(self) -> int: ...
    @property
    def mpi_rank(self) -> int: ...
    @property
    def domain(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def begins(self) -> int: ...

@final
class Progress(structseq[int], Tuple[int, int, int, int]):
    """How far run() got."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = ("events", "ts_ns", "begin_ns", "end_ns")

    @property
    def events(self) -> int: ...  # records analysed so far
    @property
    def ts_ns(self) -> int: ...  # timestamp reached
    @property
    def begin_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...  # 0: the trace's span is unknown

@final
class TraceResult(
    structseq[Any],
    Tuple[
        int, int, int, int, int, int, int, int, int, List[Discard], int, int, List[MissingEvents],
        List[SymbolInfo], List[ProcessRecord], List[NativeRegion], List[UnmatchedRegion],
        Dict[str, str], int, Dict[str, int], int, int, float, List[float], float,
        List[DamagedPart],
    ],
):
    """The aggregates of one read (Analysis.result())."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "events", "other_events", "chrome_events", "perfetto_packets", "first_ns", "last_ns",
            "discarded_events", "discarded_packets", "discard_records", "discards", "blocks",
            "late_records",
            "missing_events", "symbols", "processes", "native", "native_unmatched",
            "native_labels", "native_ends_without_begin", "event_counts", "control_threads",
            "decode_threads", "decode_cpu_s", "decode_thread_cpu_s", "analysis_cpu_s",
            "damaged",
        )

    @property
    def events(self) -> int: ...  # python_pinsight_lttng_ust events
    @property
    def other_events(self) -> int: ...  # other providers'
    @property
    def chrome_events(self) -> int: ...  # events the Chrome JSON holds (0 without chrome_path)
    @property
    def perfetto_packets(self) -> int: ...  # packets the Perfetto trace holds (0 without one)
    @property
    def first_ns(self) -> int: ...
    @property
    def last_ns(self) -> int: ...
    @property
    def discarded_events(self) -> int: ...
    @property
    def discarded_packets(self) -> int: ...
    @property
    def discard_records(self) -> int: ...
    @property
    def discards(self) -> List[Discard]: ...  # the first 1000
    @property
    def blocks(self) -> int: ...  # batched payload blocks
    @property
    def late_records(self) -> int: ...
    @property
    def missing_events(self) -> List[MissingEvents]: ...
    @property
    def symbols(self) -> List[SymbolInfo]: ...
    @property
    def processes(self) -> List[ProcessRecord]: ...
    @property
    def native(self) -> List[NativeRegion]: ...
    @property
    def native_unmatched(self) -> List[UnmatchedRegion]: ...
    @property
    def native_labels(self) -> Dict[str, str]: ...  # domain -> its label ("openmp" -> "OpenMP")
    @property
    def native_ends_without_begin(self) -> int: ...
    @property
    def event_counts(self) -> Dict[str, int]: ...  # per event name
    @property
    def control_threads(self) -> int: ...  # the tracer's own threads, left out
    @property
    def decode_threads(self) -> int: ...
    @property
    def decode_cpu_s(self) -> float: ...
    @property
    def decode_thread_cpu_s(self) -> List[float]: ...
    @property
    def analysis_cpu_s(self) -> float: ...
    @property
    def damaged(self) -> List[DamagedPart]: ...  # what damage to the trace cost the read

class Analysis:
    def __init__(
        self,
        trace_dirs: List[str],
        call_trees: bool = True,
        chrome_path: str = "",
        perfetto_path: str = "",
        compress: bool = True,
        decode_threads: int = 0,
        pids: List[int] = ...,
        ranks: List[int] = ...,
        threads: List[int] = ...,
        modules: List[str] = ...,
        excludes: List[str] = ...,
        ignore_frozen: bool = False,
    ) -> None: ...
    def run(self) -> bool: ...
    def cancel(self) -> None: ...
    def progress(self) -> Progress: ...
    def result(self) -> TraceResult: ...

class Unbatcher:
    """pinsight-python unbatch: a batched trace rewritten as a per-event (compact) one."""

    def __init__(self, trace_dir: str, out_dir: str) -> None: ...
    def run(self) -> bool: ...
    def cancel(self) -> None: ...
    def progress(self) -> Progress: ...
    def damaged(self) -> List[DamagedPart]: ...  # after run()

def babeltrace2_version() -> str: ...
def reads_ctf2() -> bool: ...
