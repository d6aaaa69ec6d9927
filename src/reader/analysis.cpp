#include "analysis.h"

#include <sys/resource.h>

#include <algorithm>
#include <thread>
#include <tuple>

#include "batch_queue.h"
#include "event_decoder.h"
#include "json_text.h"

namespace pinsight_reader {
namespace {

constexpr size_t kMaxDecodeThreads = 16;
constexpr uint64_t kProgressEvery = 1 << 14;

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Thrown inside the graph's callback to unwind it when the reader stops.
struct Stopped {};

std::string chrome_other_data(const CallStackAnalyzer &a, uint64_t foreign_events) {
  std::string out = "{\"generator\":\"pinsight-python export\",\"origin_ns\":";
  append_int(out, a.first_ns());
  out += ",\"events\":";
  append_int(out, a.events());
  out += ",\"other_events\":";
  append_int(out, foreign_events);
  out += ",\"discarded_events\":";
  append_int(out, a.discarded_events());
  out += ",\"discarded_packets\":";
  append_int(out, a.discarded_packets());
  out += "}";
  return out;
}

// Names the processes and threads of the export, and their GIL and device
// tracks, in the reports' order: written once the replay has labelled them.
void write_chrome_metadata(const CallStackAnalyzer &a, ChromeTraceWriter &chrome) {
  int64_t index = 0;
  for (const ProcessState *p : a.processes()) {
    chrome.process_metadata(p->chrome_pid, p->label, index++);
    int64_t thread_index = 0;
    for (const ThreadState *t : a.threads_of(*p)) {
      chrome.thread_metadata(t->chrome_pid, t->vtid, t->label, thread_index++);
      if (t->gil.seen) {
        chrome.thread_metadata(t->chrome_pid, ChromeTraceWriter::gil_track(t->vtid),
                               "GIL: " + t->label, thread_index++);
      }
      // asyncio: its loop's tasks, each a track under it.
      for (const auto &[track, name] : chrome.task_tracks(t->chrome_pid, t->vtid)) {
        chrome.thread_metadata(t->chrome_pid, track, name + " (" + t->label + ")", thread_index++);
      }
    }
    if (chrome.has_device_track(p->chrome_pid)) {
      chrome.thread_metadata(p->chrome_pid, ChromeTraceWriter::kDeviceTrackTid,
                             "GPU (CUDA activity)", thread_index++);
    }
  }
}

// The processes and threads of the Perfetto trace named, as in the reports: a
// process by its MPI rank, command and host, a thread by its label.
void write_perfetto_metadata(const CallStackAnalyzer &a, PerfettoTraceWriter &perfetto) {
  for (const ProcessState *p : a.processes()) {
    std::string command = p->argv.empty() ? p->procname : p->argv;
    std::string host = p->hostname.empty() ? p->host_name : p->hostname;
    std::vector<std::string> labels;
    if (p->mpi_rank >= 0) {
      labels.push_back("MPI rank " + std::to_string(p->mpi_rank) +
                       (p->mpi_size > 0 ? " of " + std::to_string(p->mpi_size) : ""));
    }
    if (!host.empty()) labels.push_back("host " + host);
    if (!p->python_version.empty()) labels.push_back("Python " + p->python_version);
    std::string name = p->mpi_rank >= 0 ? "rank " + std::to_string(p->mpi_rank) + ": " : "";
    name += command.empty() ? p->label : command;
    if (!host.empty()) name += " on " + host;
    perfetto.process_metadata(p->chrome_pid, name, command, labels);
    for (const ThreadState *t : a.threads_of(*p)) {
      perfetto.thread_metadata(t->chrome_pid, t->vtid, t->label);
    }
  }
}

}  // namespace

// One decoding thread: a graph over a group of streams, and the queue its
// records go through.
struct Analysis::DecodeWorker {
  explicit DecodeWorker(HostRegistry &hosts) : decoder(hosts) {}

  std::unique_ptr<TraceGraph> graph;
  BatchQueue queue;
  EventDecoder decoder;
  std::exception_ptr error;
  double cpu_seconds = 0;
  std::thread thread;

  void run(const TraceSet &set) {
    double start = thread_cpu_seconds();
    try {
      EventBatch *batch = queue.acquire_empty();
      if (batch == nullptr) throw Stopped{};
      auto full = [&] {
        if (batch->events.size() >= BatchQueue::kEventsPerBatch) {
          queue.push_full(batch);
          batch = queue.acquire_empty();
          if (batch == nullptr) throw Stopped{};
        }
      };
      TraceGraph::Client client;
      client.messages = [&](const bt_message *const *messages, const uint32_t *streams,
                            uint64_t count) {
        for (uint64_t i = 0; i < count; ++i) decoder.decode(messages[i], streams[i], *batch);
        full();
      };
      client.loss = [&](const StreamLoss &loss) {
        uint64_t id = loss.stream < set.streams().size() ? set.streams()[loss.stream].instance_id
                                                         : UINT64_MAX;
        decoder.decode_loss(loss, id == UINT64_MAX ? -1 : static_cast<int64_t>(id), *batch);
        full();
      };
      client.graph_replaced = [&] { decoder.forget_classes(); };
      bool completed = graph->run(std::move(client));
      if (completed && !batch->events.empty()) queue.push_full(batch);
      queue.finish();
    } catch (const Stopped &) {
      queue.finish();
    } catch (...) {
      error = std::current_exception();
      queue.close();
    }
    cpu_seconds = thread_cpu_seconds() - start;
  }
};

Analysis::Analysis(AnalysisOptions options) : options_(std::move(options)) {}
Analysis::~Analysis() = default;

bool Analysis::run() {
  completed_ = false;
  set_ = std::make_unique<TraceSet>(options_.trace_dirs);
  size_t streams = set_->streams().size();
  size_t threads = options_.decode_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::clamp<size_t>(std::min(threads, streams), 1, kMaxDecodeThreads);
  decode_threads_used_ = threads;

  std::vector<std::unique_ptr<DecodeWorker>> workers;
  for (size_t i = 0; i < threads; ++i) {
    workers.push_back(std::make_unique<DecodeWorker>(hosts_));
    workers.back()->graph = std::make_unique<TraceGraph>(*set_, i, threads);
  }
  {
    std::lock_guard<std::mutex> lock(graphs_mutex_);
    if (cancelled_) return false;
    for (auto &w : workers) graphs_.push_back(w->graph.get());
  }
  struct Unpublish {
    Analysis *self;
    ~Unpublish() {
      std::lock_guard<std::mutex> lock(self->graphs_mutex_);
      self->graphs_.clear();
    }
  } unpublish{this};

  TimeRange range = workers.front()->graph->time_range();
  begin_ns_ = range.begin_ns;
  end_ns_ = range.end_ns;
  if (!options_.chrome_path.empty()) {
    chrome_ = std::make_unique<ChromeTraceWriter>(options_.chrome_path);
  }
  if (!options_.perfetto_path.empty()) {
    perfetto_ = std::make_unique<PerfettoTraceWriter>(options_.perfetto_path, options_.compress);
  }
  ReplayOutput *output = chrome_ ? static_cast<ReplayOutput *>(chrome_.get()) : perfetto_.get();
  analyzer_ =
      std::make_unique<CallStackAnalyzer>(options_.call_trees, output, hosts_, options_.filter);
  merger_ = std::make_unique<BlockMerger>(*analyzer_);

  double analysis_start = thread_cpu_seconds();
  for (auto &w : workers) {
    w->thread = std::thread([worker = w.get(), set = set_.get()] { worker->run(*set); });
  }
  auto join_all = [&] {
    for (auto &w : workers) {
      if (w->thread.joinable()) w->thread.join();
    }
  };
  try {
    merge(workers);
  } catch (...) {
    for (auto &w : workers) {
      w->queue.close();
      w->graph->interrupt();
    }
    join_all();
    throw;
  }
  join_all();
  analysis_cpu_seconds_ = thread_cpu_seconds() - analysis_start;
  decode_cpu_seconds_ = 0;
  decode_thread_cpu_.clear();
  foreign_events_ = 0;
  for (auto &w : workers) {
    if (w->error) std::rethrow_exception(w->error);
    decode_cpu_seconds_ += w->cpu_seconds;
    decode_thread_cpu_.push_back(w->cpu_seconds);
    foreign_events_ += w->decoder.foreign_events();
  }
  if (cancelled_) return false;
  damages_ = set_->damages();
  for (auto &w : workers) {
    const std::vector<Damage> &found = w->graph->damages();
    damages_.insert(damages_.end(), found.begin(), found.end());
  }
  std::stable_sort(damages_.begin(), damages_.end(), [](const Damage &a, const Damage &b) {
    return std::tie(a.file, a.offset) < std::tie(b.file, b.offset);
  });
  merger_->finish();
  analyzer_->set_damages(damages_);
  analyzer_->finish();
  if (chrome_) {
    write_chrome_metadata(*analyzer_, *chrome_);
    chrome_->finish(chrome_other_data(*analyzer_, foreign_events_));
  }
  if (perfetto_) {
    write_perfetto_metadata(*analyzer_, *perfetto_);
    perfetto_->finish();
  }
  completed_ = true;
  return true;
}

void Analysis::merge(std::vector<std::unique_ptr<DecodeWorker>> &workers) {
  // Each worker's records are in time order; taking the earliest head each
  // time puts them all in time order, as one muxer over all streams would.
  struct Cursor {
    BatchQueue *queue;
    EventBatch *batch = nullptr;
    size_t next = 0;
  };
  auto advance = [](Cursor &c) {
    if (c.batch != nullptr) c.queue->release(c.batch);
    c.batch = nullptr;
    c.next = 0;
    while (EventBatch *batch = c.queue->pop_full()) {
      if (!batch->events.empty()) {
        c.batch = batch;
        return;
      }
      c.queue->release(batch);
    }
  };
  std::vector<Cursor> cursors;
  for (auto &w : workers) {
    cursors.push_back(Cursor{&w->queue});
    advance(cursors.back());
  }
  uint64_t since_progress = 0;
  for (;;) {
    Cursor *earliest = nullptr;
    for (Cursor &c : cursors) {
      if (c.batch != nullptr &&
          (earliest == nullptr ||
           c.batch->events[c.next].ts_ns < earliest->batch->events[earliest->next].ts_ns)) {
        earliest = &c;
      }
    }
    if (earliest == nullptr) break;
    merger_->consume(earliest->batch->events[earliest->next], *earliest->batch);
    if (++earliest->next == earliest->batch->events.size()) advance(*earliest);
    if (++since_progress == kProgressEvery) {
      since_progress = 0;
      events_done_.store(analyzer_->events(), std::memory_order_relaxed);
      ts_reached_.store(analyzer_->last_ns(), std::memory_order_relaxed);
    }
  }
  events_done_.store(analyzer_->events(), std::memory_order_relaxed);
  ts_reached_.store(analyzer_->last_ns(), std::memory_order_relaxed);
}

void Analysis::cancel() {
  std::lock_guard<std::mutex> lock(graphs_mutex_);
  cancelled_ = true;
  for (TraceGraph *graph : graphs_) graph->interrupt();
}

Progress Analysis::progress() const {
  return Progress{events_done_.load(std::memory_order_relaxed),
                  ts_reached_.load(std::memory_order_relaxed), begin_ns_.load(), end_ns_.load()};
}

}  // namespace pinsight_reader
