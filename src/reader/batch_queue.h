// A bounded hand-off of event batches from the decoding thread to the
// analysis thread. Batches are recycled, so memory stays bounded by
// kBatchCount batches however long the trace is.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "raw_event.h"

namespace pinsight_reader {

class BatchQueue {
 public:
  static constexpr size_t kBatchCount = 8;
  static constexpr size_t kEventsPerBatch = 8192;

  BatchQueue();

  // Producer: an empty batch to fill; nullptr once the queue was closed.
  EventBatch *acquire_empty();
  // Producer: hands a filled batch over.
  void push_full(EventBatch *batch);
  // Producer: no more batches will come.
  void finish();

  // Consumer: the next filled batch, or nullptr at the end of the stream.
  EventBatch *pop_full();
  // Consumer: gives a consumed batch back for reuse.
  void release(EventBatch *batch);

  // Either side: stop; wakes up every waiter.
  void close();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<EventBatch>> storage_;
  std::vector<EventBatch *> empty_;
  std::deque<EventBatch *> full_;
  bool finished_ = false;
  bool closed_ = false;
};

}  // namespace pinsight_reader
