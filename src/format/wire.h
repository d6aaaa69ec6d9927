/*
 * The values of the provider's enumerations (tracepoints/python_pinsight_lttng_ust.h):
 * what the emitter and the allocation sampler write and the reader reads back,
 * defined once. C as well as C++: the provider's own C file includes it.
 */
#ifndef PINSIGHT_FORMAT_WIRE_H
#define PINSIGHT_FORMAT_WIRE_H

/* frame_transition: how a frame was entered (function_begin) or left (function_end). */
enum {
  PINSIGHT_FRAME_START = 0,  /* PY_START: a new call */
  PINSIGHT_FRAME_RESUME = 1, /* PY_RESUME: a generator or coroutine resumed */
  PINSIGHT_FRAME_THROW = 2,  /* PY_THROW: resumed by throw()/close() */
  PINSIGHT_FRAME_RETURN = 3, /* PY_RETURN */
  PINSIGHT_FRAME_YIELD = 4,  /* PY_YIELD: suspended, a resume follows */
  PINSIGHT_FRAME_UNWIND = 5  /* PY_UNWIND: left by an exception */
};

/* c_call_transition: "call" on every c_call_begin, how the call ended on c_call_end. */
enum { PINSIGHT_C_CALL = 0, PINSIGHT_C_RETURN = 1, PINSIGHT_C_RAISE = 2 };

/* generator_end: how a traced generator, coroutine or async-generator instance ended. */
enum {
  PINSIGHT_GENERATOR_RETURNED = 0, /* returned (StopIteration, a coroutine's result) */
  PINSIGHT_GENERATOR_RAISED = 1,   /* left by an exception (close() and throw() too) */
  PINSIGHT_GENERATOR_COLLECTED = 2 /* destroyed while suspended, without running again */
};

/* task_done: how an asyncio task's coroutine ended (its last step). */
enum {
  PINSIGHT_TASK_RETURNED = 0, /* returned: the task's result */
  PINSIGHT_TASK_RAISED = 1,   /* left by an exception other than CancelledError */
  PINSIGHT_TASK_CANCELLED = 2 /* left by CancelledError: the task is cancelled */
};

/* task_step: a step begins, or goes on in an outer coroutine of the task after an
 * inner one that a throw() resumed first (by delegation) returned or raised. */
enum { PINSIGHT_TASK_STEP_BEGIN = 0, PINSIGHT_TASK_STEP_CONTINUE = 1 };

/* task_handoff: work handed to a thread from a task (an executor's work item). */
enum { PINSIGHT_HANDOFF_SUBMIT = 0, PINSIGHT_HANDOFF_RUN = 1 };

/* import_transition: import_begin carries "load". */
enum { PINSIGHT_IMPORT_LOAD = 0, PINSIGHT_IMPORT_RETURN = 1, PINSIGHT_IMPORT_RAISE = 2 };

/* alloc_source: which allocator a sampled block came from. */
enum {
  PINSIGHT_ALLOC_PYTHON_RAW = 0,    /* PyMem_RawMalloc and friends */
  PINSIGHT_ALLOC_PYTHON_MEM = 1,    /* PyMem_Malloc */
  PINSIGHT_ALLOC_PYTHON_OBJECT = 2, /* PyObject_Malloc (objects) */
  PINSIGHT_ALLOC_NATIVE = 3         /* malloc from native code (the preload library) */
};

/* gil_released_source: which pair of CPython calls released the GIL and took it back. */
enum {
  PINSIGHT_GIL_SAVE_RESTORE =
      0, /* PyEval_SaveThread / PyEval_RestoreThread (Py_BEGIN/END_ALLOW_THREADS) */
  PINSIGHT_GIL_GILSTATE = 1 /* PyGILState_Release / PyGILState_Ensure */
};
/*
 * The batched payload's records (event_block's `records`): per record a kind
 * byte, (record kind << 3) | transition, then LEB128 varints: the code_id's
 * change from the block's previous record (zigzag), for a native call the
 * callable_id's change (zigzag) and the call site's line, for a generator's end
 * its lifetime_ns and segments (the transition is generator_end's `how`), and
 * last the clock's advance in ns since the previous record (the first: since
 * base_clock). Deltas start from 0 in every block, so a block decodes on its own.
 */
enum {
  PINSIGHT_RECORD_FUNCTION_BEGIN = 0,
  PINSIGHT_RECORD_FUNCTION_END = 1,
  PINSIGHT_RECORD_C_CALL_BEGIN = 2,
  PINSIGHT_RECORD_C_CALL_END = 3,
  PINSIGHT_RECORD_GENERATOR_END = 4 /* generator_end's fields, without the names */
};
/*
 * event_block's flags. FINAL: the thread's last block (it exited, or the process
 * did). PARTIAL: written while records the thread staged earlier may still be on
 * their way (by the writer thread, or a full block of a longer flush): the
 * thread's records are complete up to this block's last record, not up to the
 * block's own time; later blocks bring the rest. Without it, every record of the
 * thread older than the block is in it or an earlier block.
 */
enum { PINSIGHT_BLOCK_FINAL = 1, PINSIGHT_BLOCK_PARTIAL = 2 };
/*
 * dump_marker's status: what a process could not do for a flight recorder's
 * dump. NO_GIL: the GIL did not come within its bound (a thread holds it in
 * native code): no open frames, and the records its threads were staging are
 * not in the dump. SIGNAL_NO_GIL: a fatal signal's thread did not hold the GIL:
 * its own records only, no open frames. BUSY: the thread list was in use (a
 * fatal signal interrupted a change of it): no open frames. UNFLUSHED: the
 * records were not flushed first (the dump asked for none: they may lag by up
 * to 100 ms).
 */
enum {
  PINSIGHT_DUMP_NO_GIL = 1,
  PINSIGHT_DUMP_SIGNAL_NO_GIL = 2,
  PINSIGHT_DUMP_BUSY = 4,
  PINSIGHT_DUMP_UNFLUSHED = 8
};

#ifdef __cplusplus
namespace pinsight::wire {

enum FrameTransition : int {
  kStart = PINSIGHT_FRAME_START,
  kResume = PINSIGHT_FRAME_RESUME,
  kThrow = PINSIGHT_FRAME_THROW,
  kReturn = PINSIGHT_FRAME_RETURN,
  kYield = PINSIGHT_FRAME_YIELD,
  kUnwind = PINSIGHT_FRAME_UNWIND,
};
enum CCallTransition : int {
  kCall = PINSIGHT_C_CALL,
  kCReturn = PINSIGHT_C_RETURN,
  kCRaise = PINSIGHT_C_RAISE,
};
enum GeneratorEnd : int {
  kGeneratorReturned = PINSIGHT_GENERATOR_RETURNED,
  kGeneratorRaised = PINSIGHT_GENERATOR_RAISED,
  kGeneratorCollected = PINSIGHT_GENERATOR_COLLECTED,
};
enum TaskEnd : int {
  kTaskReturned = PINSIGHT_TASK_RETURNED,
  kTaskRaised = PINSIGHT_TASK_RAISED,
  kTaskCancelled = PINSIGHT_TASK_CANCELLED,
};
enum TaskStepKind : int {
  kTaskStepBegin = PINSIGHT_TASK_STEP_BEGIN,
  kTaskStepContinue = PINSIGHT_TASK_STEP_CONTINUE,
};
enum Handoff : int {
  kHandoffSubmit = PINSIGHT_HANDOFF_SUBMIT,
  kHandoffRun = PINSIGHT_HANDOFF_RUN,
};
enum ImportTransition : int {
  kImportLoad = PINSIGHT_IMPORT_LOAD,
  kImportReturn = PINSIGHT_IMPORT_RETURN,
  kImportRaise = PINSIGHT_IMPORT_RAISE,
};
enum GilSource : int {
  kGilSaveRestore = PINSIGHT_GIL_SAVE_RESTORE,
  kGilState = PINSIGHT_GIL_GILSTATE,
};
enum AllocSource : int {
  kPythonRaw = PINSIGHT_ALLOC_PYTHON_RAW,
  kPythonMem = PINSIGHT_ALLOC_PYTHON_MEM,
  kPythonObject = PINSIGHT_ALLOC_PYTHON_OBJECT,
  kNative = PINSIGHT_ALLOC_NATIVE,
};

}  // namespace pinsight::wire
#endif

#endif /* PINSIGHT_FORMAT_WIRE_H */
