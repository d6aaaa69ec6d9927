// Puts the batched payload's records back in time order (analysis thread),
// between the time-ordered merge of the decoders and the analyzer.
//
// A thread's event_block arrives after its records happened, and after the
// other events of that thread (native regions, imports, names) and of every
// other thread that happened meanwhile. A block's records all come after the
// thread's previous block (the thread, or the control thread holding the GIL,
// wrote it), so nothing older than a batched thread's last block can still
// come from it: events are held until every batched thread's last block is
// past them, then handed over in time order, records and other events merged.
// Traces without blocks pass straight through.
//
// A gap in a thread's record sequence is a lost block; a thread whose stream
// ends with calls open and without its last block (flags: final) lost its
// unflushed records (kill -9, os._exit): both are reported as missing events.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "call_stack_analyzer.h"
#include "raw_event.h"

namespace pinsight_reader {

struct MissingRecords {
  uint16_t host;
  int32_t vpid;
  int32_t vtid;
  int32_t python_thread_id;
  uint64_t after_ns;  // the thread's last record before them
  uint64_t count;     // 0: unknown (the thread's last block never came)
};

class BlockMerger {
 public:
  explicit BlockMerger(CallStackAnalyzer &analyzer) : analyzer_(analyzer) {}

  // Records in time order, as the analyzer takes them.
  void consume(const RawEvent &event, const EventBatch &batch);
  // Hands over everything held, and notes threads whose last block never came.
  void finish();

  const std::vector<MissingRecords> &missing() const { return missing_; }
  uint64_t blocks() const { return blocks_; }
  // Records older than events of their thread already handed over (a block
  // later than the writer promises): handed over at that later time.
  uint64_t late_records() const { return late_; }

 private:
  // Held events beyond this are handed over without waiting (a batched thread
  // stopped writing blocks without its last one, e.g. a stopped process).
  static constexpr size_t kMaxHeld = size_t{1} << 21;  // about 150 MB

  struct Thread {
    std::deque<RawEvent> queue;  // held, in time order
    EventBatch strings;          // the held events' strings
    bool batched = false;        // a block came, and not the last one
    uint64_t flushed_until = 0;  // the last block's time (batched)
    bool seen_block = false;
    uint64_t next_sequence = 0;
    uint64_t last_record_ns = 0;
    uint64_t delivered_ns = 0;
    uint32_t depth = 0;  // batched records' open frames
    RawEvent identity{};
  };

  Thread &thread(const RawEvent &e);
  void on_block(Thread &t, const RawEvent &e, const EventBatch &batch);
  void hold(Thread &t, const RawEvent &e, const EventBatch &batch);
  void release(bool everything);
  void deliver(Thread &t);

  CallStackAnalyzer &analyzer_;
  EventBatch no_strings_;
  std::unordered_map<uint64_t, std::unique_ptr<Thread>> threads_;
  std::set<std::pair<uint64_t, Thread *>> open_;  // batched threads by flushed_until
  using Head = std::pair<uint64_t, Thread *>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads_;
  size_t held_ = 0;
  std::vector<RawEvent> records_;  // a block's records (reused)
  std::vector<RawEvent> merged_;
  std::vector<MissingRecords> missing_;
  // Processes a flight recorder's dump cut (host << 32 | vpid): their threads'
  // streams end at the dump, with calls open and no last block, and lost nothing.
  std::set<uint64_t> dumped_;
  uint64_t blocks_ = 0;
  uint64_t late_ = 0;
};

}  // namespace pinsight_reader
