// One read of a trace. Decoding (babeltrace2) is the expensive part, so it
// runs on threads of its own, one per group of data streams, while the
// calling thread merges their records by time and replays the stacks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "block_merger.h"
#include "call_stack_analyzer.h"
#include "chrome_trace_writer.h"
#include "host_registry.h"
#include "perfetto_trace_writer.h"
#include "read_filter.h"
#include "trace_graph.h"
#include "trace_set.h"

namespace pinsight_reader {

struct AnalysisOptions {
  std::vector<std::string> trace_dirs;
  bool call_trees = true;     // needed for folded stacks / flame graphs
  std::string chrome_path;    // non-empty: also write Chrome trace JSON there
  std::string perfetto_path;  // non-empty: also write a Perfetto trace there
  bool compress = true;       // the Perfetto trace's packets deflated (compressed_packets)
  size_t decode_threads = 0;  // 0: one per core, at most one per data stream
  ReadFilter filter;          // what the outputs keep
};

struct Progress {
  uint64_t events;    // records analysed so far
  uint64_t ts_ns;     // timestamp reached
  uint64_t begin_ns;  // time span of the trace (0, 0: unknown)
  uint64_t end_ns;
};

class Analysis {
 public:
  explicit Analysis(AnalysisOptions options);
  ~Analysis();

  // Reads the whole trace. Blocking; call it without holding the GIL.
  // Returns false when cancel() stopped it. Throws ReaderError.
  bool run();
  // Thread-safe.
  void cancel();
  Progress progress() const;

  bool completed() const { return completed_; }
  const CallStackAnalyzer &analyzer() const { return *analyzer_; }
  // The batched payload's blocks, and the records they lost.
  const BlockMerger &blocks() const { return *merger_; }
  const HostRegistry &hosts() const { return hosts_; }
  // What damage to the trace cost the read: the pre-scan's finds and the
  // packets babeltrace2 failed to decode, by file and time.
  const std::vector<Damage> &damages() const { return damages_; }
  uint64_t foreign_events() const { return foreign_events_; }
  // Events the Chrome JSON holds (0 without chrome_path).
  uint64_t chrome_events() const { return chrome_ ? chrome_->events_written() : 0; }
  // Packets the Perfetto trace holds (0 without perfetto_path).
  uint64_t perfetto_packets() const { return perfetto_ ? perfetto_->packets_written() : 0; }
  size_t decode_threads() const { return decode_threads_used_; }
  // CPU time of the decoding threads (summed) and of the analysis thread.
  double decode_cpu_seconds() const { return decode_cpu_seconds_; }
  const std::vector<double> &decode_thread_cpu_seconds() const { return decode_thread_cpu_; }
  double analysis_cpu_seconds() const { return analysis_cpu_seconds_; }

 private:
  struct DecodeWorker;

  void merge(std::vector<std::unique_ptr<DecodeWorker>> &workers);

  AnalysisOptions options_;
  HostRegistry hosts_;
  std::unique_ptr<TraceSet> set_;
  std::vector<Damage> damages_;
  std::unique_ptr<ChromeTraceWriter> chrome_;
  std::unique_ptr<PerfettoTraceWriter> perfetto_;
  std::unique_ptr<CallStackAnalyzer> analyzer_;
  std::unique_ptr<BlockMerger> merger_;
  uint64_t foreign_events_ = 0;
  size_t decode_threads_used_ = 0;
  double decode_cpu_seconds_ = 0;
  std::vector<double> decode_thread_cpu_;
  double analysis_cpu_seconds_ = 0;
  bool completed_ = false;  // run() read the whole trace

  mutable std::mutex graphs_mutex_;  // guards graphs_ against cancel()
  std::vector<TraceGraph *> graphs_;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> events_done_{0};
  std::atomic<uint64_t> ts_reached_{0};
  std::atomic<uint64_t> begin_ns_{0};
  std::atomic<uint64_t> end_ns_{0};
};

}  // namespace pinsight_reader
