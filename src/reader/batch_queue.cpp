#include "batch_queue.h"

namespace pinsight_reader {

BatchQueue::BatchQueue() {
  for (size_t i = 0; i < kBatchCount; ++i) {
    storage_.push_back(std::make_unique<EventBatch>());
    storage_.back()->events.reserve(kEventsPerBatch);
    empty_.push_back(storage_.back().get());
  }
}

EventBatch *BatchQueue::acquire_empty() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return closed_ || !empty_.empty(); });
  if (closed_) return nullptr;
  EventBatch *batch = empty_.back();
  empty_.pop_back();
  return batch;
}

void BatchQueue::push_full(EventBatch *batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    full_.push_back(batch);
  }
  changed_.notify_all();
}

void BatchQueue::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

EventBatch *BatchQueue::pop_full() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return closed_ || finished_ || !full_.empty(); });
  if (closed_ || full_.empty()) return nullptr;
  EventBatch *batch = full_.front();
  full_.pop_front();
  return batch;
}

void BatchQueue::release(EventBatch *batch) {
  batch->clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    empty_.push_back(batch);
  }
  changed_.notify_all();
}

void BatchQueue::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

}  // namespace pinsight_reader
