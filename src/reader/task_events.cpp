#include "task_events.h"

#include <algorithm>
#include <tuple>

namespace pinsight_reader {
std::string task_group_name(const std::string &name) {
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  return end < name.size() ? name.substr(0, end) + "*" : name;
}

const char *task_outcome_name(TaskOutcome outcome) {
  switch (outcome) {
    case TaskOutcome::Returned:
      return "returned";
    case TaskOutcome::Raised:
      return "raised";
    case TaskOutcome::Cancelled:
      return "cancelled";
    default:
      return "pending";
  }
}

std::shared_ptr<TaskRecord> TaskTable::live(uint64_t task_id) const {
  auto found = live_.find(task_id);
  return found == live_.end() ? nullptr : found->second;
}

std::shared_ptr<TaskRecord> TaskTable::task(uint64_t task_id, int32_t vtid, uint64_t ts,
                                            std::string_view name) {
  std::shared_ptr<TaskRecord> &slot = live_[task_id];
  if (!slot) {
    slot = std::make_shared<TaskRecord>();
    slot->task_id = task_id;
    slot->serial = next_serial_++;
    slot->vtid = vtid;
    slot->created_ns = ts;
  }
  if (slot->name.empty() && !name.empty()) slot->name = name;
  return slot;
}

TaskRecord *TaskTable::on_create(uint64_t task_id, int32_t vtid, uint64_t ts, std::string_view name,
                                 const TaskRecord *creator, SymbolId where) {
  const bool known = live_.count(task_id) != 0;
  std::shared_ptr<TaskRecord> t = task(task_id, vtid, ts, name);
  // Nested creation functions (TaskGroup.create_task, then the loop's) name a
  // task more than once: the first, innermost, is its creation. An eager
  // task's first step comes before: its creation fills in what it lacks.
  if (known && (t->creator != 0 || t->created_at != kNoSymbol)) return nullptr;
  if (creator != nullptr && creator != t.get()) t->creator = creator->serial;
  t->created_at = where;
  return t.get();
}

void TaskTable::on_await(uint64_t waiter_id, uint64_t awaited_id) {
  std::shared_ptr<TaskRecord> waiter = live(waiter_id);
  std::shared_ptr<TaskRecord> awaited = live(awaited_id);
  if (!waiter || !awaited || waiter == awaited) return;
  std::vector<uint64_t> &by = awaited->awaited_by;
  if (std::find(by.begin(), by.end(), waiter->serial) == by.end()) by.push_back(waiter->serial);
}

std::shared_ptr<TaskRecord> TaskTable::on_done(uint64_t task_id, uint64_t ts, TaskOutcome outcome) {
  auto found = live_.find(task_id);
  if (found == live_.end()) return nullptr;
  std::shared_ptr<TaskRecord> t = std::move(found->second);
  live_.erase(found);
  t->done_ns = ts;
  t->outcome = outcome;
  keep(t);
  return t;
}

namespace {
// Only what the report shows of a done task's functions stays.
void trim(std::unordered_map<SymbolId, uint64_t> &functions) {
  if (functions.size() <= TaskTable::kMaxTopFunctions) return;
  std::vector<std::pair<SymbolId, uint64_t>> sorted(functions.begin(), functions.end());
  std::nth_element(sorted.begin(), sorted.begin() + TaskTable::kMaxTopFunctions - 1, sorted.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  sorted.resize(TaskTable::kMaxTopFunctions);
  functions = std::unordered_map<SymbolId, uint64_t>(sorted.begin(), sorted.end());
}
}  // namespace

void TaskTable::keep(std::shared_ptr<TaskRecord> t) {
  if (kept_.size() < kKeptTasks) {
    trim(t->functions);
    trim(t->offloaded_functions);
    kept_.push_back(std::move(t));
    return;
  }
  TaskGroupRecord &g = groups_[{t->vtid, task_group_name(t->name)}];
  g.name = task_group_name(t->name);
  g.vtid = t->vtid;
  ++g.tasks;
  g.steps += t->steps;
  g.running_ns += t->running_ns;
  g.waiting_ns += task_waiting_ns(*t, t->done_ns);
  g.offloaded_ns += t->offloaded_ns;
  if (t->outcome != TaskOutcome::Pending) ++g.outcomes[static_cast<size_t>(t->outcome)];
  // Its functions go with it: a step still open elsewhere holds the record alone.
  t->functions.clear();
  t->offloaded_functions.clear();
}

void TaskTable::on_submit(uint64_t work_id, const std::shared_ptr<TaskRecord> &task) {
  if (task) submitted_[work_id] = task;
}

std::shared_ptr<TaskRecord> TaskTable::take_submitted(uint64_t work_id) {
  auto found = submitted_.find(work_id);
  if (found == submitted_.end()) return nullptr;
  std::shared_ptr<TaskRecord> task = std::move(found->second);
  submitted_.erase(found);
  return task;
}

void TaskTable::finish(uint64_t last_ns) {
  last_ns_ = last_ns;
  std::vector<std::shared_ptr<TaskRecord>> pending;
  for (auto &[id, t] : live_) pending.push_back(std::move(t));
  live_.clear();
  submitted_.clear();
  std::sort(pending.begin(), pending.end(),
            [](const auto &a, const auto &b) { return a->serial < b->serial; });
  for (auto &t : pending) keep(std::move(t));
  std::stable_sort(kept_.begin(), kept_.end(),
                   [](const auto &a, const auto &b) { return a->serial < b->serial; });
}

bool task_has_track(const TaskRecord &task) { return task.serial <= TaskTable::kKeptTasks; }

std::string task_track_name(const TaskRecord &task) {
  if (!task_has_track(task)) {
    return "tasks after the first " + std::to_string(TaskTable::kKeptTasks);
  }
  return "task " + (task.name.empty() ? std::string("?") : task.name) + " #" +
         std::to_string(task.serial);
}

uint64_t task_waiting_ns(const TaskRecord &task, uint64_t last_ns) {
  uint64_t end = task.done_ns != 0 ? task.done_ns : last_ns;
  uint64_t life = end > task.created_ns ? end - task.created_ns : 0;
  return life > task.running_ns ? life - task.running_ns : 0;
}

std::vector<std::tuple<SymbolId, uint64_t, bool>> task_top_functions(const TaskRecord &task) {
  std::vector<std::tuple<SymbolId, uint64_t, bool>> out;
  for (const auto &[symbol, ns] : task.functions) out.emplace_back(symbol, ns, false);
  for (const auto &[symbol, ns] : task.offloaded_functions) out.emplace_back(symbol, ns, true);
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return std::make_tuple(std::get<1>(b), std::get<0>(a)) <
           std::make_tuple(std::get<1>(a), std::get<0>(b));
  });
  if (out.size() > TaskTable::kMaxTopFunctions) out.resize(TaskTable::kMaxTopFunctions);
  return out;
}

}  // namespace pinsight_reader
