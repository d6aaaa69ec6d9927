// Streams Perfetto's own trace format (the Trace protobuf of
// protos/perfetto/trace: TracePackets holding TrackEvents), written by hand as
// the stack replay goes: the file Perfetto UI and trace_processor read
// natively, at any size.
//
// One packet sequence per thread, with incremental state: its first packet
// clears the state and sets the sequence's defaults (its thread's track, an
// incremental clock), then each event names its function by an id interned on
// that sequence the first time it is used there (name, source location,
// module), and its timestamp is the nanoseconds since the sequence's previous
// one. An event earlier than that (a native region or a GPU kernel, written at
// its end) carries its absolute time on the trace's clock instead. Tracks:
// a process track per process; a thread track per thread (Python and native
// calls, imports); under it "GIL" and one track per native domain (OpenMP,
// MPI, ...); under the process, a track per GPU device and stream, a counter
// of the sampled heap, and instants for mode changes, configurations and
// caps. A region or kernel is joined to the call that caused it by a flow
// whose id both slices carry. asyncio: under a loop's thread, a track per task
// (its steps, the last with its outcome), with flows from the step that made a
// task to its first, from a task's last step to the next step of each task that
// awaited it, and from a step to the work it handed to a thread. Memory: the
// open frames, the interning tables, and each live task's last step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "packet_sink.h"
#include "replay_output.h"
#include "symbol_table.h"

namespace pinsight_reader {

class PerfettoTraceWriter final : public ReplayOutput {
 public:
  // compress: chunks of packets deflated into compressed_packets (about a
  // third of the bytes); off, plain packets any protobuf reader takes.
  PerfettoTraceWriter(const std::string &path, bool compress);
  ~PerfettoTraceWriter() override;
  PerfettoTraceWriter(const PerfettoTraceWriter &) = delete;
  PerfettoTraceWriter &operator=(const PerfettoTraceWriter &) = delete;

  void set_origin(uint64_t ns) override { origin_ns_ = ns; }
  void begin_frame(int64_t pid, int32_t tid, const SymbolTable &symbols, SymbolId symbol,
                   uint64_t ts_ns) override;
  void end_frame(int64_t pid, int32_t tid, uint64_t ts_ns, FrameExit exit) override;
  void renamed(SymbolId symbol) override;
  uint64_t join(int64_t pid, int32_t tid) override;
  void discarded(uint64_t ts_ns, uint64_t count, bool packets, int32_t stream_id) override;
  void native_region(int64_t pid, int32_t tid, const std::string &label, const std::string &domain,
                     uint64_t begin_ns, uint64_t end_ns, int32_t flow_from_tid,
                     uint64_t join) override;
  void device_activity(int64_t pid, const DeviceActivity &activity) override;
  void gil_state(int64_t pid, int32_t vtid, const char *state, uint64_t begin_ns,
                 uint64_t end_ns) override;
  void mode_change(int64_t pid, uint64_t ts_ns, const std::string &mode, const std::string &reason,
                   uint64_t generation) override;
  void config_loaded(int64_t pid, uint64_t ts_ns, const std::string &path,
                     uint64_t generation) override;
  void rate_counts(int64_t pid, uint64_t ts_ns, const std::string &function,
                   const RateCounts &counts) override;
  void sampled_memory(int64_t pid, uint64_t ts_ns, uint64_t live_bytes) override;
  void task_step(int64_t pid, int32_t vtid, const TaskRecord &task, uint64_t begin_ns,
                 uint64_t end_ns, bool offloaded) override;
  void task_created(int64_t pid, const TaskRecord &task, const TaskRecord *creator) override;
  void task_handoff(int64_t pid, int32_t vtid, const TaskRecord &task, uint64_t work,
                    bool run) override;
  void task_done(int64_t pid, const TaskRecord &task) override;

  // The names, once the replay has labelled processes and threads (at the end:
  // their descriptors again, with names). `labels`: the process's facts
  // (host, MPI rank, command), shown with it.
  void process_metadata(int64_t pid, const std::string &name, const std::string &command,
                        const std::vector<std::string> &labels);
  void thread_metadata(int64_t pid, int32_t tid, const std::string &name);
  // Writes what is left and closes the file; throws OutputError when it could
  // not be written.
  void finish();
  uint64_t packets_written() const { return packets_; }
  uint64_t bytes_written() const { return sink_.bytes_written(); }

 private:
  // One packet sequence: its id, its incremental clock and its interning tables.
  struct Sequence {
    uint32_t id = 0;
    uint64_t default_track = 0;
    bool cleared = false;      // its first packet (incremental state cleared) is written
    uint64_t last_ts = 0;      // the incremental clock, ns from origin
    uint32_t next_name = 1;    // event names (functions' and others'), source locations
    uint32_t next_string = 1;  // debug annotation string values
    uint32_t next_category = kFirstDynamicCategory;
    uint32_t defined = 0;  // bits: fixed categories and annotation names already interned
    // Per symbol: its event name / source location id, its module's string id
    // (0: none) and the symbol's rename generation it was interned under (0: not yet).
    struct Interned {
      uint32_t iid, module, generation;
    };
    std::vector<Interned> symbols;
    std::unordered_map<std::string, uint32_t> names, strings, categories;
  };
  struct Pending {
    uint32_t depth;
    uint64_t flow;
  };
  struct Thread {
    int64_t pid;
    int32_t tid;
    uint64_t uuid;
    Sequence seq;
    uint32_t depth = 0;             // frames open on its track
    std::vector<Pending> pending;   // flows leaving open frames: written at their ends
    std::unique_ptr<Sequence> gil;  // the GIL track's own sequence (its slices are in order)
    std::map<std::string, uint64_t> domains;  // native domain -> its track
    // As a loop's thread: its tasks' tracks' sequence, and the track the tasks
    // past the first TaskTable::kKeptTasks share.
    std::unique_ptr<Sequence> tasks;
    uint64_t shared_task_track = 0;
  };
  // A live task: its track, and its last step, held until the task's next step
  // or its end says what the slice carries (the rest of a step a throw()
  // continued, the outcome, the flows leaving it). Dropped at the task's end.
  struct TaskTrack {
    uint64_t serial = 0;
    uint64_t track = 0;  // 0: no step yet
    int32_t vtid = -1;
    std::string name;
    bool held = false;
    uint64_t begin_ns = 0, end_ns = 0;
    uint64_t steps = 0;                               // the task's steps counted at the held one
    std::vector<uint64_t> flows;                      // of the held step
    std::vector<uint64_t> next_flows;                 // of its step running now, or its next
    std::vector<std::pair<uint64_t, uint64_t>> work;  // work item -> flow, not started yet
  };
  struct Process {
    int64_t pid;
    uint64_t uuid;
    Sequence seq;  // its instants and counter
    uint64_t memory_track = 0;
    // (device, stream) -> its tracks, each with the end of its last slice: an activity
    // overlapping every one of them (their times say so) goes on a track of its own,
    // as slices on one track must nest.
    std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint64_t, uint64_t>>> devices;
    std::unordered_map<uint64_t, TaskTrack> tasks;  // by serial: the live ones drawn
  };

  // Categories and debug annotation names every sequence may use, interned on
  // first use under fixed ids (Sequence::defined's bits).
  enum Fixed : uint32_t {
    kCategoryPython = 1,
    kCategoryNative = 2,
    kCategoryImport = 3,
    kCategoryAsyncio = 4,
    kFirstDynamicCategory = 8,
    kAnnotationModule = 1,
    kAnnotationExit = 2,
    kAnnotationTask = 3,
    kAnnotationOutcome = 4,
  };

  Thread &thread(int64_t pid, int32_t tid);
  Process &process(int64_t pid);
  // A track under `parent` (0: none); bytes_counter: a counter of bytes.
  uint64_t child_track(uint64_t parent, const std::string &name, bool bytes_counter);
  void describe_process(const Process &p, const std::string *name, const std::string *command,
                        const std::vector<std::string> *labels);
  void describe_thread(const Thread &t, const std::string *name);

  // Packet framing: begin_packet() opens a packet of `seq` at `ts_ns` (on its
  // incremental clock when not earlier than its previous packet);
  // end_packet() closes it, and hands the chunk over when it is full.
  size_t begin_packet(Sequence &seq, uint64_t ts_ns);
  size_t begin_untimed_packet(uint32_t sequence_id);
  void end_packet(size_t packet);
  void start_sequence(Sequence &seq, uint64_t ts_ns);
  uint64_t relative(uint64_t ts_ns) const { return ts_ns > origin_ns_ ? ts_ns - origin_ns_ : 0; }

  // Interning: the id on `seq`, with the interned data the packet under way
  // must carry when it is new (written into `interned_`).
  const Sequence::Interned &symbol_iid(Sequence &seq, const SymbolTable &symbols, SymbolId symbol);
  // `text`'s id in `ids` (a table of the sequence), defined in table `table` when new.
  uint32_t intern(std::unordered_map<std::string, uint32_t> &ids, uint32_t &next, uint32_t table,
                  const std::string &text);
  uint32_t name_iid(Sequence &seq, const std::string &name);
  uint32_t string_iid(Sequence &seq, const std::string &text);
  uint32_t category_iid(Sequence &seq, const std::string &name);
  void fixed(Sequence &seq, uint32_t bit, uint32_t table, uint32_t iid, const char *name);
  void flush_interned();

  // A slice's begin or end on `track` (names interned on `seq`; flow: 0 for none).
  void slice(Sequence &seq, uint64_t track, uint64_t ts_ns, int type, const std::string &name,
             const std::string &category, uint64_t flow);
  // The held step of `task` as a slice on its track (outcome: null while it runs on).
  void write_task_step(Process &p, TaskTrack &task, const char *outcome);
  TaskTrack &live_task(Process &p, uint64_t serial);
  uint64_t task_track(int64_t pid, const TaskRecord &task);
  using Args = std::vector<std::pair<const char *, std::string>>;
  using Numbers = std::vector<std::pair<const char *, int64_t>>;
  void instant(Sequence &seq, uint64_t track, uint64_t ts_ns, const std::string &name,
               const Args &texts, const Numbers &numbers);

  PacketSink sink_;
  std::string chunk_;
  std::string interned_;  // the interned data of the packet under way
  uint64_t origin_ns_ = 0;
  uint64_t packets_ = 0;
  static constexpr uint32_t kMetadataSequence = 1;  // descriptors, LTTng's discards
  Sequence metadata_;
  uint32_t next_sequence_ = kMetadataSequence + 1;
  uint64_t next_uuid_ = 1;
  uint64_t next_flow_ = 1;
  uint64_t lttng_track_ = 0;
  std::vector<uint32_t> generations_;  // per symbol: renames so far, + 1
  std::unordered_map<uint64_t, std::unique_ptr<Thread>> threads_;  // by pid << 32 | tid
  Thread *last_thread_ = nullptr;
  uint64_t last_thread_key_ = UINT64_MAX;
  std::unordered_map<int64_t, std::unique_ptr<Process>> processes_;
};

}  // namespace pinsight_reader
