/*
 * LTTng-UST provider of pinsight-python: python_pinsight_lttng_ust.
 *
 * Written to the lttng-ust(3) template. Built into its own shared object
 * (python_pinsight_lttng_ust_provider.c); the extension module dlopen's it, so
 * the module imports and the program runs where liblttng-ust is absent.
 *
 * Field names and types are a contract with the Trace Compass analyses (tracecompass/) and the trace
 * reader (src/reader): change them together.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER python_pinsight_lttng_ust

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "python_pinsight_lttng_ust.h"

#if !defined(PINSIGHT_PYTHON_LTTNG_UST_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define PINSIGHT_PYTHON_LTTNG_UST_H

#include <lttng/tracepoint.h>

#include "format/wire.h" /* the enumerations' values, shared with the reader */

/* How a frame was entered (function_begin) or left (function_end). */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, frame_transition,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("start", PINSIGHT_FRAME_START)  /* PY_START: a new call */
        lttng_ust_field_enum_value("resume", PINSIGHT_FRAME_RESUME) /* PY_RESUME: generator/coroutine resumed */
        lttng_ust_field_enum_value("throw", PINSIGHT_FRAME_THROW)  /* PY_THROW: resumed by throw()/close() */
        lttng_ust_field_enum_value("return", PINSIGHT_FRAME_RETURN) /* PY_RETURN */
        lttng_ust_field_enum_value("yield", PINSIGHT_FRAME_YIELD)  /* PY_YIELD: suspended, a resume follows */
        lttng_ust_field_enum_value("unwind", PINSIGHT_FRAME_UNWIND) /* PY_UNWIND: left by an exception */
    )
)

/* How a native call ended (c_call_end); "call" on every c_call_begin. */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, c_call_transition,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("call", PINSIGHT_C_CALL)
        lttng_ust_field_enum_value("return", PINSIGHT_C_RETURN)
        lttng_ust_field_enum_value("raise", PINSIGHT_C_RAISE)
    )
)

/*
 * The full payload (the default): every frame event names its function by
 * qualname and definition line, so that babeltrace2 or a user's script reads it
 * alone; the file is named once per code object (code_id) by code_info, written
 * with the code object's first event after each tick of the naming epoch, as
 * for the compact payload below. Traces of earlier versions carry filename
 * here (caller_filename in c_call_*) and an int transition; the reader reads both.
 */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, frame_class,
    LTTNG_UST_TP_ARGS(
        const char *, qualname,
        int, lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_integer(int, lineno, lineno)
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, frame_transition, uint8_t,
                             transition, transition)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, frame_class,
    python_pinsight_lttng_ust, function_begin,
    LTTNG_UST_TP_ARGS(
        const char *, qualname,
        int, lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, frame_class,
    python_pinsight_lttng_ust, function_end,
    LTTNG_UST_TP_ARGS(
        const char *, qualname,
        int, lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

/*
 * A call from Python into native code: the bridge between a Python name and
 * the OMPT/PMPI/CUPTI events it causes. caller_lineno is the line of the call
 * site; code_id identifies the calling code object, whose file code_info names.
 */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, c_call_class,
    LTTNG_UST_TP_ARGS(
        const char *, caller_qualname,
        const char *, callee_name,
        int, caller_lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(caller_qualname, caller_qualname)
        lttng_ust_field_string(callee_name, callee_name)
        lttng_ust_field_integer(int, caller_lineno, caller_lineno)
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, c_call_transition, uint8_t,
                             transition, transition)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, c_call_class,
    python_pinsight_lttng_ust, c_call_begin,
    LTTNG_UST_TP_ARGS(
        const char *, caller_qualname,
        const char *, callee_name,
        int, caller_lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, c_call_class,
    python_pinsight_lttng_ust, c_call_end,
    LTTNG_UST_TP_ARGS(
        const char *, caller_qualname,
        const char *, callee_name,
        int, caller_lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

/*
 * The compact payload ([Python] payload = compact): integers only. A frame or
 * native call names its code object (code_id) and callee (callable_id); the
 * names are in code_info / callable_info events, written with the first
 * event of each code object and callable after every tick of the naming
 * epoch (about one second), so a trace that starts late (a session created
 * after the program, a snapshot, a relay daemon's stream) lacks names only
 * for its first tick. Readers fall back to the ids there.
 */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, compact_frame_class,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, frame_transition, uint8_t,
                             transition, transition)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, compact_frame_class,
    python_pinsight_lttng_ust, compact_function_begin,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, compact_frame_class,
    python_pinsight_lttng_ust, compact_function_end,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        int, python_thread_id,
        int, transition
    )
)

/* code_id: the calling code object; caller_lineno: the line of the call site. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, compact_c_call_class,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        unsigned long, callable_id,
        int, caller_lineno,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer_hex(unsigned long, callable_id, callable_id)
        lttng_ust_field_integer(int, caller_lineno, caller_lineno)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, c_call_transition, uint8_t,
                             transition, transition)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, compact_c_call_class,
    python_pinsight_lttng_ust, compact_c_call_begin,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        unsigned long, callable_id,
        int, caller_lineno,
        int, python_thread_id,
        int, transition
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, compact_c_call_class,
    python_pinsight_lttng_ust, compact_c_call_end,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        unsigned long, callable_id,
        int, caller_lineno,
        int, python_thread_id,
        int, transition
    )
)

/*
 * The batched payload ([Python] payload = batched): a thread's compact frame and
 * native-call events, packed (format/wire.h says how) and written as one event
 * per block of a few KiB, or when the block's first record is 100 ms old, or at
 * a flush (thread or process exit, os._exit, fork, mode change, reload,
 * deactivate, SIGUSR1, a fatal signal). base_clock is the clock LTTng-UST timestamps events with
 * (CLOCK_MONOTONIC) at the block's first record; first_sequence counts the
 * thread's records before this block, so a gap is a lost block. tid is the
 * thread the records are of: an idle thread's block is flushed by the control
 * thread, whose vtid the event's context has. An empty block opens a thread's
 * batched records (and keeps an idle thread's stream moving); flags bit 0 marks
 * its last one. code_info / callable_info name the ids as for compact.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, event_block,
    LTTNG_UST_TP_ARGS(
        int, python_thread_id,
        int, tid,
        uint64_t, first_sequence,
        uint32_t, record_count,
        uint64_t, base_clock,
        int, flags,
        const uint8_t *, records,
        uint16_t, size
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer(int, tid, tid)
        lttng_ust_field_integer(uint64_t, first_sequence, first_sequence)
        lttng_ust_field_integer(uint32_t, record_count, record_count)
        lttng_ust_field_integer(uint64_t, base_clock, base_clock)
        lttng_ust_field_integer(uint8_t, flags, flags)
        lttng_ust_field_sequence(uint8_t, records, records, uint16_t, size)
    )
)

/*
 * The names of a code object: qualname, file, first line. Written by both the
 * full and the compact payload, with the first event of a code object after
 * each tick of the naming epoch.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, code_info,
    LTTNG_UST_TP_ARGS(
        unsigned long, code_id,
        const char *, qualname,
        const char *, filename,
        int, lineno
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_string(filename, filename)
        lttng_ust_field_integer(int, lineno, lineno)
    )
)

/* The name of a native callee (compact payload), as c_call_begin's callee_name. */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, callable_info,
    LTTNG_UST_TP_ARGS(
        unsigned long, callable_id,
        const char *, name
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, callable_id, callable_id)
        lttng_ust_field_string(name, name)
    )
)

/* How a traced generator instance ended (generator_end). */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, generator_end_kind,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("returned", PINSIGHT_GENERATOR_RETURNED)
        lttng_ust_field_enum_value("raised", PINSIGHT_GENERATOR_RAISED)
        lttng_ust_field_enum_value("collected", PINSIGHT_GENERATOR_COLLECTED)
    )
)

/*
 * A traced generator, coroutine or async-generator instance ended: its
 * lifetime from its first start (function_begin, transition start) to its
 * final end, and how many segments (resumptions + 1) ran in between, on any
 * thread. The frame events give the time it ran; this gives its wall time.
 * qualname and filename are empty in the compact payload, filename in the full
 * one (code_info names code_id). Emitted on the thread where it ended (for "collected", where it
 * was destroyed).
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, generator_end,
    LTTNG_UST_TP_ARGS(
        const char *, qualname,
        const char *, filename,
        int, lineno,
        unsigned long, code_id,
        int, python_thread_id,
        uint64_t, lifetime_ns,
        unsigned int, segments,
        int, how
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_string(filename, filename)
        lttng_ust_field_integer(int, lineno, lineno)
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer(uint64_t, lifetime_ns, lifetime_ns)
        lttng_ust_field_integer(unsigned int, segments, segments)
        lttng_ust_field_enum(python_pinsight_lttng_ust, generator_end_kind, int, how, how)
    )
)

/*
 * Once per process, at activation (and again in a forked child, with its pid):
 * lets tools label processes and MPI ranks.
 * mpi_rank/mpi_size are -1 outside an MPI launcher. backend is "sys.monitoring"
 * or "setprofile". procname is the thread name (comm) at activation, what the
 * procname context gave on every event; our sessions no longer record it.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, process_info,
    LTTNG_UST_TP_ARGS(
        int, pid,
        int, mpi_rank,
        int, mpi_size,
        const char *, hostname,
        const char *, argv,
        const char *, python_version,
        const char *, backend,
        const char *, procname
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, pid, pid)
        lttng_ust_field_integer(int, mpi_rank, mpi_rank)
        lttng_ust_field_integer(int, mpi_size, mpi_size)
        lttng_ust_field_string(hostname, hostname)
        lttng_ust_field_string(argv, argv)
        lttng_ust_field_string(python_version, python_version)
        lttng_ust_field_string(backend, backend)
        lttng_ust_field_string(procname, procname)
    )
)

/* The first time a thread runs Python code under the tracer. */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, thread_start,
    LTTNG_UST_TP_ARGS(
        int, python_thread_id,
        unsigned long, thread_ident
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer_hex(unsigned long, thread_ident, thread_ident)
    )
)

/* The Python domain's trace mode changed (activation, reload, window end). */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, mode_change,
    LTTNG_UST_TP_ARGS(
        const char *, mode,
        const char *, reason,
        unsigned long, config_generation
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(mode, mode)
        lttng_ust_field_string(reason, reason)
        lttng_ust_field_integer(unsigned long, config_generation, config_generation)
    )
)

/*
 * The configuration in force (activation, and each successful reload): path is
 * the file read, "" for the built-in defaults; config_generation as in
 * mode_change.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, config_info,
    LTTNG_UST_TP_ARGS(
        const char *, path,
        unsigned long, config_generation
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(path, path)
        lttng_ust_field_integer(unsigned long, config_generation, config_generation)
    )
)

/*
 * Rate control's counts of one code object (a lexgion whose section sets
 * max_num_traces, tracing_rate > 1 or trace_starts_at > 0, and that ran), at
 * process exit and at deactivate: executions seen (starts in MONITORING and
 * TRACING, every thread), traced (function_begin emitted). flags bit 0: its
 * begins were disabled once the cap was reached, so later calls were not seen
 * and executions is a lower bound. Names as strings in every payload, so that
 * full, compact and batched traces read it alike (no code_id: LTTng-UST takes
 * ten arguments at most, and the names identify the function as the reader
 * keys functions); section is the lexgion section that decided (e.g.
 * "Lexgion(Python:hot)").
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, lexgion_counts,
    LTTNG_UST_TP_ARGS(
        const char *, qualname,
        const char *, filename,
        int, lineno,
        uint64_t, executions,
        uint64_t, traced,
        int, flags,
        int64_t, max_num_traces,
        int64_t, tracing_rate,
        int64_t, trace_starts_at,
        const char *, section
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_string(filename, filename)
        lttng_ust_field_integer(int, lineno, lineno)
        lttng_ust_field_integer(uint64_t, executions, executions)
        lttng_ust_field_integer(uint64_t, traced, traced)
        lttng_ust_field_integer(int, flags, flags)
        lttng_ust_field_integer(int64_t, max_num_traces, max_num_traces)
        lttng_ust_field_integer(int64_t, tracing_rate, tracing_rate)
        lttng_ust_field_integer(int64_t, trace_starts_at, trace_starts_at)
        lttng_ust_field_string(section, section)
    )
)

/* How an import ended: import_begin carries "load". */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, import_transition,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("load", PINSIGHT_IMPORT_LOAD)
        lttng_ust_field_enum_value("return", PINSIGHT_IMPORT_RETURN)
        lttng_ust_field_enum_value("raise", PINSIGHT_IMPORT_RAISE)  /* the import raised */
    )
)

/*
 * A module actually loaded (not yet in sys.modules): importlib's
 * _find_and_load, so nested imports nest (xml.dom.minidom loads xml.dom, which
 * loads xml). module is the fully qualified name.
 */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, import_class,
    LTTNG_UST_TP_ARGS(
        const char *, module,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(module, module)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, import_transition, int,
                             transition, transition)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, import_class,
    python_pinsight_lttng_ust, import_begin,
    LTTNG_UST_TP_ARGS(
        const char *, module,
        int, python_thread_id,
        int, transition
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, import_class,
    python_pinsight_lttng_ust, import_end,
    LTTNG_UST_TP_ARGS(
        const char *, module,
        int, python_thread_id,
        int, transition
    )
)

/* Which allocator a sampled block came from. */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, alloc_source,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("python_raw", PINSIGHT_ALLOC_PYTHON_RAW)     /* PyMem_RawMalloc and friends */
        lttng_ust_field_enum_value("python_mem", PINSIGHT_ALLOC_PYTHON_MEM)     /* PyMem_Malloc */
        lttng_ust_field_enum_value("python_object", PINSIGHT_ALLOC_PYTHON_OBJECT)  /* PyObject_Malloc (objects) */
        lttng_ust_field_enum_value("native", PINSIGHT_ALLOC_NATIVE)         /* malloc from native code (preload) */
    )
)

/*
 * A sampled allocation: sampling by bytes with exponential intervals of mean
 * alloc_sample_interval, so sampled_bytes (the bytes the sample stands for)
 * summed over samples estimates the bytes allocated. qualname, filename,
 * lineno (definition line; the call site's for a native call) and code_id name
 * the innermost Python function of the allocating thread ("<no Python frame>",
 * "<none>", 0, 0 and python_thread_id -1 on a thread running no Python code).
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, alloc_sample,
    LTTNG_UST_TP_ARGS(
        unsigned long, address,
        unsigned long, size,
        unsigned long, sampled_bytes,
        const char *, qualname,
        const char *, filename,
        int, lineno,
        unsigned long, code_id,
        int, python_thread_id,
        int, source
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, address, address)
        lttng_ust_field_integer(unsigned long, size, size)
        lttng_ust_field_integer(unsigned long, sampled_bytes, sampled_bytes)
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_string(filename, filename)
        lttng_ust_field_integer(int, lineno, lineno)
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, alloc_source, int, source, source)
    )
)

/* A sampled block was freed (or moved by realloc). */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, free_sample,
    LTTNG_UST_TP_ARGS(
        unsigned long, address
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, address, address)
    )
)

/* Which calls released the GIL and took it back (gil_released). */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, gil_source,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("save_restore", PINSIGHT_GIL_SAVE_RESTORE) /* Py_BEGIN/END_ALLOW_THREADS */
        lttng_ust_field_enum_value("gilstate", PINSIGHT_GIL_GILSTATE)         /* PyGILState_Release/Ensure */
    )
)

/*
 * events = gil. A thread runs again after another thread produced events
 * (a hand-off). Since its previous such point it was off CPU for wait_ns +
 * released_ns: wait_ns waiting to take the GIL back (wall time minus thread CPU
 * time), or, when it was inside a native call, released_ns (the call released
 * the GIL itself, e.g. a lock or sleep inside libpython). previous_thread_id:
 * the thread that produced the events before (-1: unknown).
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, gil_switch,
    LTTNG_UST_TP_ARGS(
        int, python_thread_id,
        int, previous_thread_id,
        unsigned long, wait_ns,
        unsigned long, released_ns
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer(int, previous_thread_id, previous_thread_id)
        lttng_ust_field_integer(unsigned long, wait_ns, wait_ns)
        lttng_ust_field_integer(unsigned long, released_ns, released_ns)
    )
)

/*
 * events = gil. Native code (an extension module) released the GIL and took it
 * back; emitted once the GIL is held again. At this event's timestamp T: the GIL
 * was released during [T - wait_ns - released_ns, T - wait_ns], then waited for
 * during [T - wait_ns, T]. before_ns: time waited for the GIL between the
 * thread's previous gil event and the release.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, gil_released,
    LTTNG_UST_TP_ARGS(
        int, python_thread_id,
        unsigned long, released_ns,
        unsigned long, wait_ns,
        unsigned long, before_ns,
        int, source
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer(unsigned long, released_ns, released_ns)
        lttng_ust_field_integer(unsigned long, wait_ns, wait_ns)
        lttng_ust_field_integer(unsigned long, before_ns, before_ns)
        lttng_ust_field_enum(python_pinsight_lttng_ust, gil_source, int, source, source)
    )
)

/*
 * asyncio tasks (every payload; per event: one per task step, not per call).
 * task_id is the Task object's address, unique while the task lives: the
 * reader starts a new task at its task_create (or, for a task created where
 * no Python creation function ran, at its first step). A step is the segment
 * of the task's outermost coroutine that the next function_begin of the same
 * thread starts, up to its function_end (yield, return, unwind).
 */
LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, task_end_kind,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("returned", PINSIGHT_TASK_RETURNED)
        lttng_ust_field_enum_value("raised", PINSIGHT_TASK_RAISED)
        lttng_ust_field_enum_value("cancelled", PINSIGHT_TASK_CANCELLED)
    )
)

LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, task_step_kind,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("begin", PINSIGHT_TASK_STEP_BEGIN)
        lttng_ust_field_enum_value("continue", PINSIGHT_TASK_STEP_CONTINUE)
    )
)

LTTNG_UST_TRACEPOINT_ENUM(python_pinsight_lttng_ust, task_handoff_kind,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("submit", PINSIGHT_HANDOFF_SUBMIT)
        lttng_ust_field_enum_value("run", PINSIGHT_HANDOFF_RUN)
    )
)

/*
 * A task was created (asyncio's create_task, ensure_future, TaskGroup.create_task
 * returned it) on this thread, by the task running there if any; name: its name
 * (get_name()). task_name names it too at its coroutine's start.
 */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(python_pinsight_lttng_ust, task_named_class,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        const char *, name
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, task_id, task_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_string(name, name)
    )
)

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, task_named_class,
    python_pinsight_lttng_ust, task_create,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        const char *, name
    )
)

/* The task's name, once: at its coroutine's start (before its first task_step). */
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(python_pinsight_lttng_ust, task_named_class,
    python_pinsight_lttng_ust, task_name,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        const char *, name
    )
)

/*
 * A step of the task begins: the next function_begin is its outermost coroutine's
 * (start, resume or throw), or that of a coroutine it awaits which a throw()
 * resumed first (the exception goes to the innermost awaited coroutine before its
 * awaiters run). transition "continue": the same step goes on in an awaiting
 * coroutine, after such an inner one returned or raised.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, task_step,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, task_id, task_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, task_step_kind, uint8_t,
                             transition, transition)
    )
)

/* The step ended by yielding another task (await task), or a gather of tasks
 * (one event per child): the task waits for awaited_id. */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, task_await,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        unsigned long, awaited_id
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, task_id, task_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer_hex(unsigned long, awaited_id, awaited_id)
    )
)

/* The task's coroutine ended (its last step's end): returned, raised or cancelled. */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, task_done,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        int, how
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, task_id, task_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, task_end_kind, uint8_t, how, how)
    )
)

/*
 * Work handed to a thread from a task (asyncio.to_thread, run_in_executor: a
 * ThreadPoolExecutor's work item, work_id its future): "submit" on the task's
 * thread as the work item is made (task_id: the submitting task), "run" on the
 * worker thread just after the work item's function_begin (task_id 0).
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, task_handoff,
    LTTNG_UST_TP_ARGS(
        unsigned long, task_id,
        int, python_thread_id,
        unsigned long, work_id,
        int, transition
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer_hex(unsigned long, task_id, task_id)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer_hex(unsigned long, work_id, work_id)
        lttng_ust_field_enum(python_pinsight_lttng_ust, task_handoff_kind, uint8_t,
                             transition, transition)
    )
)

/*
 * A flight recorder's dump (pinsight-python trace --flight-recorder): every
 * frame open on every thread of the process when the dump was taken, read from
 * the tracer's own stacks (the ring buffer no longer holds the outer frames'
 * begins), outermost first (depth 0). A Python function's frame names the
 * function (lineno: its first line; callee "-", never empty: Babeltrace 2.0.4
 * reads an empty string as the field's previous value); a native call's names
 * the Python caller, the callee and the call's line. begin_ns: when the frame
 * began, on LTTng-UST's clock (CLOCK_MONOTONIC); 0 when not known (a frame
 * already running when tracing started, or a payload other than batched). tid
 * is the frame's thread (the event's vtid is whichever thread wrote it).
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, open_frame,
    LTTNG_UST_TP_ARGS(
        uint32_t, dump_id,
        int, tid,
        int, python_thread_id,
        uint32_t, depth,
        unsigned long, code_id,
        const char *, qualname,
        const char *, filename,
        int, lineno,
        const char *, callee,
        uint64_t, begin_ns
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint32_t, dump_id, dump_id)
        lttng_ust_field_integer(int, tid, tid)
        lttng_ust_field_integer(int, python_thread_id, python_thread_id)
        lttng_ust_field_integer(uint32_t, depth, depth)
        lttng_ust_field_integer_hex(unsigned long, code_id, code_id)
        lttng_ust_field_string(qualname, qualname)
        lttng_ust_field_string(filename, filename)
        lttng_ust_field_integer(int, lineno, lineno)
        lttng_ust_field_string(callee, callee)
        lttng_ust_field_integer(uint64_t, begin_ns, begin_ns)
    )
)

/*
 * After a process's open_frame events for dump dump_id (the run's number of
 * the dump): the reason trace gave (stall, usr2, signal-SIGSEGV, ...), how many
 * threads and frames it wrote, and status (format/wire.h's PINSIGHT_DUMP_*
 * bits) what it could not: 0 when the stacks are whole and every record staged
 * before the dump was flushed into the buffers first.
 */
LTTNG_UST_TRACEPOINT_EVENT(python_pinsight_lttng_ust, dump_marker,
    LTTNG_UST_TP_ARGS(
        uint32_t, dump_id,
        const char *, reason,
        uint32_t, threads,
        uint32_t, frames,
        int, status
    ),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint32_t, dump_id, dump_id)
        lttng_ust_field_string(reason, reason)
        lttng_ust_field_integer(uint32_t, threads, threads)
        lttng_ust_field_integer(uint32_t, frames, frames)
        lttng_ust_field_integer(int, status, status)
    )
)

#endif /* PINSIGHT_PYTHON_LTTNG_UST_H */

#include <lttng/tracepoint-event.h>
