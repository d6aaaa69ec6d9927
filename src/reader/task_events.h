// asyncio tasks in the replay: each task's steps (the segments of its
// outermost coroutine that a task_step announced), running time, waits, outcome,
// who created and who awaited it, its functions, and the work it handed to
// threads (an executor's work item, attributed across threads). Fed by the
// stack replay (call_stack_analyzer), which owns the thread and process state.
//
// Memory stays bounded whatever the number of tasks: a task lives in the table
// while it is not done; done, it is kept whole among the first kKeptTasks of
// its process, and beyond those folded into its group (name without its
// number, loop thread): counts and times only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "raw_event.h"
#include "symbol_table.h"

namespace pinsight_reader {

enum class TaskOutcome : uint8_t { Returned, Raised, Cancelled, Pending };
const char *task_outcome_name(TaskOutcome outcome);
// A task's group: its name without a trailing number ("Task-123" -> "Task-*").
std::string task_group_name(const std::string &name);

struct TaskRecord {
  uint64_t task_id = 0;  // the Task object's address in its process
  uint64_t serial = 0;   // 1, 2, ... per process in order of appearance
  std::string name;
  int32_t vtid = -1;  // its loop's thread (where it first ran, else where it was created)
  uint64_t created_ns = 0;
  uint64_t first_step_ns = 0;
  uint64_t done_ns = 0;  // 0: not done when the trace ended
  TaskOutcome outcome = TaskOutcome::Pending;
  uint64_t steps = 0;
  uint64_t running_ns = 0;
  uint64_t offloaded_ns = 0;  // its work run by other threads (to_thread, run_in_executor)
  uint64_t offloads = 0;
  uint64_t creator = 0;  // the serial of the task that created it, 0: none (or unknown)
  SymbolId created_at = kNoSymbol;
  std::vector<uint64_t> awaited_by;  // serials of the tasks that awaited it
  // Self time of the functions run in its steps, and (second) in the threads
  // its work was handed to.
  std::unordered_map<SymbolId, uint64_t> functions, offloaded_functions;
};

// Done tasks past the kept ones, by group.
struct TaskGroupRecord {
  std::string name;
  int32_t vtid = -1;
  uint64_t tasks = 0, steps = 0, running_ns = 0, waiting_ns = 0, offloaded_ns = 0;
  uint64_t outcomes[3] = {};  // returned, raised, cancelled
};

// A step of a task running on a thread, or a work item run for one.
struct TaskFrame {
  size_t depth;  // the stack index of its frame
  uint64_t start_ns;
  uint64_t nested_ns;  // other tasks' steps inside it (an eager task's first step)
  std::shared_ptr<TaskRecord> task;
  bool offloaded;  // a work item on another thread, not a step
};

// A thread's task state (in its replay ThreadState).
struct ThreadTasks {
  std::shared_ptr<TaskRecord> pending_step;  // task_step seen, its frame's begin not yet
  bool pending_continues = false;            // it goes on with the step before (no new step)
  std::vector<TaskFrame> frames;             // innermost last
  // The task whose frames run now (the innermost step or work item), or null.
  TaskRecord *current() const { return frames.empty() ? nullptr : frames.back().task.get(); }
};

class TaskTable {
 public:
  static constexpr size_t kKeptTasks = 10000;
  static constexpr size_t kMaxTopFunctions = 8;

  // The task of `task_id`, made if it is not live (created or seen running at `ts`).
  std::shared_ptr<TaskRecord> task(uint64_t task_id, int32_t vtid, uint64_t ts,
                                   std::string_view name);
  std::shared_ptr<TaskRecord> live(uint64_t task_id) const;
  // The task, when this event is its creation (not a creation function's
  // second naming of it), else null.
  TaskRecord *on_create(uint64_t task_id, int32_t vtid, uint64_t ts, std::string_view name,
                        const TaskRecord *creator, SymbolId where);
  void on_await(uint64_t waiter_id, uint64_t awaited_id);
  // The task now done, or null when it was not live.
  std::shared_ptr<TaskRecord> on_done(uint64_t task_id, uint64_t ts, TaskOutcome outcome);
  // Work `work_id` submitted by the thread's current task; its run, by another thread.
  void on_submit(uint64_t work_id, const std::shared_ptr<TaskRecord> &task);
  std::shared_ptr<TaskRecord> take_submitted(uint64_t work_id);
  // The trace ended: the tasks not done stay pending, timed to `last_ns`.
  void finish(uint64_t last_ns);

  // Kept tasks in order of appearance (the pending ones once finished).
  const std::vector<std::shared_ptr<TaskRecord>> &kept() const { return kept_; }
  const std::map<std::pair<int32_t, std::string>, TaskGroupRecord> &groups() const {
    return groups_;
  }
  uint64_t last_ns() const { return last_ns_; }

 private:
  void keep(std::shared_ptr<TaskRecord> task);

  uint64_t next_serial_ = 1;
  uint64_t last_ns_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<TaskRecord>> live_;
  std::unordered_map<uint64_t, std::shared_ptr<TaskRecord>> submitted_;
  std::vector<std::shared_ptr<TaskRecord>> kept_;
  std::map<std::pair<int32_t, std::string>, TaskGroupRecord> groups_;
};

// The exports draw a track per task for the first kKeptTasks of a process (by
// number); the tasks after those share one track per loop thread.
bool task_has_track(const TaskRecord &task);
// That track's name: "task NAME #N", or the shared one's.
std::string task_track_name(const TaskRecord &task);

// The task's waits: created to done (or the trace's end) less its running time.
uint64_t task_waiting_ns(const TaskRecord &task, uint64_t last_ns);
// Its `kMaxTopFunctions` functions of most self time: (symbol, ns, in another thread).
std::vector<std::tuple<SymbolId, uint64_t, bool>> task_top_functions(const TaskRecord &task);

}  // namespace pinsight_reader
