// `pinsight-python unbatch`: a batched trace rewritten as an ordinary
// per-event (compact) one, for Trace Compass and other CTF tools.
//
// babeltrace2 reads the batched trace (TraceGraph: source.ctf.fs and the
// muxer, in time order); every event_block is expanded into the compact
// events its records stand for, written directly as CTF (CtfWriter) in the
// layout babeltrace2's sink.ctf.fs would give them.
//
// Every event is copied but event_block: each of its records becomes the
// compact event it stands for (compact_function_begin/end,
// compact_c_call_begin/end, at the record's own time), merged by time with
// the thread's other events held since its previous block. Each thread gets
// a stream of its own in the output (a CTF stream must be in time order, and
// a thread's records are late by up to a block). Names stay in code_info /
// callable_info, as in a compact trace: Trace Compass's analyses read it as
// one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "analysis.h"  // Progress
#include "trace_graph.h"
#include "trace_set.h"

namespace pinsight_reader {

class UnbatchConverter;

class Unbatcher {
 public:
  // trace_dir: one CTF trace (a directory holding its `metadata`); out_dir:
  // where the per-event trace is written (created if absent; should be empty).
  Unbatcher(std::string trace_dir, std::string out_dir);
  ~Unbatcher();
  Unbatcher(const Unbatcher &) = delete;
  Unbatcher &operator=(const Unbatcher &) = delete;

  // Converts the whole trace. Blocking; call it without holding the GIL.
  // Returns false when cancel() stopped it. Throws ReaderError.
  bool run();
  // Thread-safe.
  void cancel();
  // events: events written so far; ts_ns: the input's time reached.
  Progress progress() const;
  // What damage to the input cost the conversion (after run()).
  std::vector<Damage> damages() const;

  // Called by the conversion (unbatch.cpp).
  void note_input_ns(uint64_t ns) { input_ns_.store(ns, std::memory_order_relaxed); }
  void note_output(uint64_t events) { output_events_.fetch_add(events, std::memory_order_relaxed); }

 private:
  std::unique_ptr<TraceSet> set_;
  std::unique_ptr<TraceGraph> graph_;
  std::unique_ptr<UnbatchConverter> converter_;
  uint64_t begin_ns_ = 0;
  uint64_t end_ns_ = 0;
  std::atomic<uint64_t> input_ns_{0};
  std::atomic<uint64_t> output_events_{0};
};

}  // namespace pinsight_reader
