#include "block_merger.h"

#include <algorithm>
#include <iterator>

#include "block_records.h"

namespace pinsight_reader {
namespace {

uint64_t merger_key(const RawEvent &e) {
  // LTTng's discarded-event records, and damage, name a stream, not a thread.
  if (e.kind == EventKind::Discarded || e.kind == EventKind::DiscardedPackets ||
      e.kind == EventKind::Damage) {
    return (uint64_t{0xffff} << 48) | static_cast<uint32_t>(e.vtid);
  }
  int32_t tid = e.vtid >= 0 ? e.vtid : e.python_thread_id;
  return (static_cast<uint64_t>(e.host) << 48) |
         (static_cast<uint64_t>(static_cast<uint32_t>(e.vpid) & 0xffffff) << 24) |
         (static_cast<uint32_t>(tid) & 0xffffff);
}

constexpr size_t kMaxHeldStrings = size_t{16} << 20;

}  // namespace

BlockMerger::Thread &BlockMerger::thread(const RawEvent &e) {
  auto &slot = threads_[merger_key(e)];
  if (!slot) {
    slot = std::make_unique<Thread>();
    slot->identity = e;
  }
  return *slot;
}

void BlockMerger::consume(const RawEvent &e, const EventBatch &batch) {
  if (e.kind == EventKind::DumpMarker) {
    dumped_.insert((static_cast<uint64_t>(e.host) << 32) | static_cast<uint32_t>(e.vpid));
  }
  if (e.kind == EventKind::Block) {
    on_block(thread(e), e, batch);
  } else if (open_.empty() && held_ == 0) {
    analyzer_.consume(e, batch);
    return;
  } else {
    hold(thread(e), e, batch);
  }
  release(false);
}

void BlockMerger::on_block(Thread &t, const RawEvent &e, const EventBatch &batch) {
  ++blocks_;
  t.identity.python_thread_id = e.python_thread_id;
  uint64_t first_sequence = e.code_id;
  uint64_t count = static_cast<uint32_t>(e.aux);
  if (t.seen_block && first_sequence > t.next_sequence) {
    missing_.push_back({e.host, e.vpid, e.vtid, e.python_thread_id, t.last_record_ns,
                        first_sequence - t.next_sequence});
  }
  t.seen_block = true;
  t.next_sequence = first_sequence + count;

  records_.clear();
  const auto *p = reinterpret_cast<const uint8_t *>(batch.arena.data() + e.str[0]);
  const uint8_t *end = e.lineno > 0 ? p + e.lineno : p;
  BlockRecordReader reader(p, static_cast<size_t>(end - p), count, e.extra);
  BlockRecord record;
  while (reader.next(record)) {
    int kind = record.kind;
    uint64_t clock = record.clock;
    RawEvent &r = records_.emplace_back();
    r.kind = kind == PINSIGHT_RECORD_FUNCTION_BEGIN ? EventKind::FunctionBegin
             : kind == PINSIGHT_RECORD_FUNCTION_END ? EventKind::FunctionEnd
             : kind == PINSIGHT_RECORD_C_CALL_BEGIN ? EventKind::CCallBegin
             : kind == PINSIGHT_RECORD_C_CALL_END   ? EventKind::CCallEnd
                                                    : EventKind::GeneratorEnd;
    r.transition = record.transition;
    r.code_id = record.code_id;
    if (r.kind == EventKind::GeneratorEnd) {
      // As a compact generator_end event: code_info names it.
      r.extra = record.lifetime_ns;
      r.lineno = 0;
      r.aux = static_cast<int32_t>(record.segments);
    } else {
      r.extra = record.callable_id;
      r.lineno = static_cast<int32_t>(record.line);
      r.aux = 0;
    }
    r.host = e.host;
    r.vpid = e.vpid;
    r.vtid = e.vtid;
    r.python_thread_id = e.python_thread_id;
    r.str[0] = r.str[1] = r.str[2] = r.str[3] = kNoString;
    r.procname = kNoString;
    r.compact = true;
    r.stream = e.stream;
    if (clock < t.delivered_ns) {
      ++late_;
      r.ts_ns = t.delivered_ns;
    } else {
      r.ts_ns = clock;
    }
    if (r.kind == EventKind::FunctionBegin || r.kind == EventKind::CCallBegin) {
      ++t.depth;
    } else if (r.kind != EventKind::GeneratorEnd && t.depth > 0) {
      --t.depth;
    }
  }
  if (!records_.empty()) {
    t.last_record_ns = records_.back().ts_ns;
    // Held events of this thread after its first record interleave with them.
    uint64_t first = records_.front().ts_ns;
    size_t keep = t.queue.size();
    while (keep > 0 && t.queue[keep - 1].ts_ns > first) --keep;
    merged_.clear();
    auto by_time = [](const RawEvent &a, const RawEvent &b) { return a.ts_ns < b.ts_ns; };
    std::merge(t.queue.begin() + static_cast<std::ptrdiff_t>(keep), t.queue.end(), records_.begin(),
               records_.end(), std::back_inserter(merged_), by_time);
    t.queue.erase(t.queue.begin() + static_cast<std::ptrdiff_t>(keep), t.queue.end());
    t.queue.insert(t.queue.end(), merged_.begin(), merged_.end());
    held_ += records_.size();
    heads_.push({t.queue.front().ts_ns, &t});
  }
  // Nothing older than this block's time can come from the thread, or, for a
  // partial block (records staged earlier may be on their way), nothing older
  // than its last record.
  uint64_t until = e.ts_ns;
  if (e.transition & PINSIGHT_BLOCK_PARTIAL) {
    until = std::max(t.batched ? t.flushed_until : 0,
                     records_.empty() ? t.last_record_ns : records_.back().ts_ns);
  }
  if (t.batched) open_.erase({t.flushed_until, &t});
  t.batched = !(e.transition & PINSIGHT_BLOCK_FINAL);
  if (t.batched) {
    t.flushed_until = until;
    open_.insert({t.flushed_until, &t});
  }
}

void BlockMerger::hold(Thread &t, const RawEvent &e, const EventBatch &batch) {
  if (t.strings.arena.size() > kMaxHeldStrings) {
    // Strings of events handed over since the queue last emptied: copy the
    // live ones into a fresh arena.
    EventBatch fresh;
    for (RawEvent &held : t.queue) {
      for (StringRef &ref : held.str) {
        if (ref != kNoString) {
          std::string_view s = t.strings.string(ref);
          ref = fresh.add_string(s.data(), s.size());
        }
      }
      if (held.procname != kNoString) {
        std::string_view s = t.strings.string(held.procname);
        held.procname = fresh.add_string(s.data(), s.size());
      }
    }
    t.strings = std::move(fresh);
  }
  RawEvent &copy = t.queue.emplace_back(e);
  for (StringRef &ref : copy.str) {
    if (ref != kNoString) {
      std::string_view s = batch.string(ref);
      ref = t.strings.add_string(s.data(), s.size());
    }
  }
  if (copy.procname != kNoString) {
    std::string_view s = batch.string(copy.procname);
    copy.procname = t.strings.add_string(s.data(), s.size());
  }
  if (copy.ts_ns < t.delivered_ns) copy.ts_ns = t.delivered_ns;
  ++held_;
  if (t.queue.size() == 1) heads_.push({copy.ts_ns, &t});
}

void BlockMerger::release(bool everything) {
  uint64_t watermark = open_.empty() ? UINT64_MAX : open_.begin()->first;
  while (!heads_.empty()) {
    auto [ts, t] = heads_.top();
    if (t->queue.empty() || t->queue.front().ts_ns != ts) {
      heads_.pop();  // stale: the thread's head changed since
      continue;
    }
    if (ts > watermark && !everything && held_ <= kMaxHeld) break;
    heads_.pop();
    deliver(*t);
  }
}

void BlockMerger::deliver(Thread &t) {
  const RawEvent &e = t.queue.front();
  t.delivered_ns = e.ts_ns;
  analyzer_.consume(e, t.strings);
  t.queue.pop_front();
  --held_;
  if (!t.queue.empty()) {
    heads_.push({t.queue.front().ts_ns, &t});
  } else {
    t.strings.clear();
  }
}

void BlockMerger::finish() {
  release(true);
  for (auto &[key, t] : threads_) {
    // Calls open and no last block: the process ended without flushing (unless
    // the trace is a flight recorder's dump, which cut it while it ran).
    const RawEvent &id = t->identity;
    const uint64_t process =
        (static_cast<uint64_t>(id.host) << 32) | static_cast<uint32_t>(id.vpid);
    if (t->batched && t->depth > 0 && dumped_.count(process) == 0) {
      missing_.push_back({id.host, id.vpid, id.vtid, id.python_thread_id,
                          std::max(t->last_record_ns, t->flushed_until), 0});
    }
  }
  std::sort(missing_.begin(), missing_.end(), [](const MissingRecords &a, const MissingRecords &b) {
    return a.after_ns < b.after_ns || (a.after_ns == b.after_ns && a.vtid < b.vtid);
  });
}

}  // namespace pinsight_reader
