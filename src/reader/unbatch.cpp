#include "unbatch.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "block_records.h"
#include "ctf_writer.h"
#include "trace_graph.h"

namespace pinsight_reader {
namespace {

constexpr const char *kBlock = "python_pinsight_lttng_ust:event_block";
// Indexed by the record's kind (PINSIGHT_RECORD_*).
constexpr int kRecordKinds = PINSIGHT_RECORD_GENERATOR_END + 1;
constexpr const char *kRecordEvents[kRecordKinds] = {
    "python_pinsight_lttng_ust:compact_function_begin",
    "python_pinsight_lttng_ust:compact_function_end",
    "python_pinsight_lttng_ust:compact_c_call_begin",
    "python_pinsight_lttng_ust:compact_c_call_end",
    // As the compact payload writes it (no names: code_info has them), lineno 0.
    "python_pinsight_lttng_ust:generator_end",
};

bool is_signed(const bt_field *field) {
  return bt_field_class_type_is(bt_field_get_class_type(field), BT_FIELD_CLASS_TYPE_SIGNED_INTEGER);
}

uint64_t get_integer(const bt_field *field) {
  return is_signed(field) ? static_cast<uint64_t>(bt_field_integer_signed_get_value(field))
                          : bt_field_integer_unsigned_get_value(field);
}

// The index of a structure's member, -1 when it has none of that name.
int64_t member_index(const bt_field_class *structure, const char *name) {
  if (structure == nullptr) return -1;
  uint64_t count = bt_field_class_structure_get_member_count(structure);
  for (uint64_t i = 0; i < count; ++i) {
    const bt_field_class_structure_member *member =
        bt_field_class_structure_borrow_member_by_index_const(structure, i);
    if (std::strcmp(bt_field_class_structure_member_get_name(member), name) == 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

const bt_field *member(const bt_field *structure, int64_t index) {
  return bt_field_structure_borrow_member_field_by_index_const(structure,
                                                               static_cast<uint64_t>(index));
}

// What the conversion knows of an input event class.
struct InputClass {
  int64_t out = -1;  // the output event id; -1: not copied
  bool block = false;
  int64_t vpid = -1, vtid = -1;  // in the common context
  // event_block's payload members
  int64_t tid = -1, python_thread_id = -1, flags = -1, base_clock = -1, record_count = -1,
          records = -1;
};

// What a compact event's payload member holds, in the order of its members.
enum class Slot : uint8_t {
  kCodeId,
  kPythonThreadId,
  kTransition,
  kCallableId,
  kCallerLineno,
  kLifetime,
  kSegments,
  kZero,         // an integer the record does not hold (generator_end's lineno)
  kEmptyString,  // a name the record does not hold (generator_end's)
};

struct RecordClass {
  int64_t id = -1;
  std::vector<std::pair<Slot, unsigned>> members;  // what, and its size in bytes
};

struct Held {
  uint64_t clock;
  const bt_message *message;  // an input event message, referenced
};

struct Thread {
  int64_t vpid = -1, vtid = -1;
  int64_t stream = -1;  // the output stream, made at the thread's first event
  uint64_t last = 0;    // the last clock value written to the stream
  bool batched = false;
  std::vector<Held> held;
  uint64_t held_since = 0;  // when held became non-empty: the end releases in that order
};

}  // namespace

// The conversion: every input message in time order (the muxer's), events
// out through the writer.
class UnbatchConverter {
 public:
  UnbatchConverter(Unbatcher &owner, std::string out_dir)
      : owner_(owner), out_dir_(std::move(out_dir)) {}
  ~UnbatchConverter() {
    for (auto &entry : threads_) {
      for (const Held &h : entry.second->held) bt_message_put_ref(h.message);
    }
  }
  UnbatchConverter(const UnbatchConverter &) = delete;
  UnbatchConverter &operator=(const UnbatchConverter &) = delete;

  void consume(const bt_message *const *messages, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) process(messages[i]);
    owner_.note_output(events_);
    events_ = 0;
  }

  // The graph was built anew past damage: its event classes are new objects
  // (those of held messages stay alive with them, and are looked up again).
  void forget_classes() { input_classes_.clear(); }

  void finish() {
    if (!writer_) throw ReaderError("the trace holds no stream");
    std::vector<Thread *> waiting;
    for (auto &entry : threads_) {
      if (!entry.second->held.empty()) waiting.push_back(entry.second.get());
    }
    std::sort(waiting.begin(), waiting.end(),
              [](const Thread *a, const Thread *b) { return a->held_since < b->held_since; });
    for (Thread *t : waiting) {
      for (const Held &h : t->held) {
        emit_copy(*t, h.clock, h.message);
        bt_message_put_ref(h.message);
      }
      t->held.clear();
    }
    writer_->finish();
    owner_.note_output(events_);
    events_ = 0;
  }

 private:
  void process(const bt_message *message) {
    bt_message_type type = bt_message_get_type(message);
    if (type == BT_MESSAGE_TYPE_STREAM_BEGINNING && !writer_) {
      make_writer(bt_message_stream_beginning_borrow_stream_const(message));
      return;
    }
    if (type != BT_MESSAGE_TYPE_EVENT) return;
    const bt_event *event = bt_message_event_borrow_event_const(message);
    if (!writer_) make_writer(bt_event_borrow_stream_const(event));
    const bt_clock_snapshot *snapshot = nullptr;
    if (bt_message_event_borrow_stream_class_default_clock_class_const(message) != nullptr) {
      snapshot = bt_message_event_borrow_default_clock_snapshot_const(message);
    }
    uint64_t clock = snapshot ? bt_clock_snapshot_get_value(snapshot) : 0;
    int64_t ns = 0;
    if (snapshot && bt_clock_snapshot_get_ns_from_origin(snapshot, &ns) ==
                        BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK) {
      owner_.note_input_ns(static_cast<uint64_t>(ns));
    }
    const InputClass &ic = input_class(bt_event_borrow_class_const(event));
    const bt_field *context = bt_event_borrow_common_context_field_const(event);
    int64_t vpid =
        context && ic.vpid >= 0 ? static_cast<int64_t>(get_integer(member(context, ic.vpid))) : -1;
    if (ic.block) {
      on_block(event, ic, vpid, context);
      return;
    }
    if (ic.out < 0) return;
    int64_t vtid =
        context && ic.vtid >= 0 ? static_cast<int64_t>(get_integer(member(context, ic.vtid))) : -1;
    Thread &t = thread(vpid, vtid);
    if (t.batched) {
      if (t.held.empty()) t.held_since = ++held_order_;
      t.held.push_back({clock, message});
      bt_message_get_ref(message);
      return;
    }
    emit_copy(t, clock, message);
  }

  void on_block(const bt_event *event, const InputClass &ic, int64_t vpid,
                const bt_field *context) {
    const bt_field *payload = bt_event_borrow_payload_field_const(event);
    auto read = [&](int64_t index) -> uint64_t {
      if (index < 0) throw ReaderError(std::string(kBlock) + " lacks a member");
      return get_integer(member(payload, index));
    };
    Thread &t = thread(vpid, static_cast<int64_t>(static_cast<int32_t>(read(ic.tid))));
    auto python_thread_id = static_cast<int64_t>(read(ic.python_thread_id));
    if (ic.records < 0) throw ReaderError(std::string(kBlock) + " lacks its records");
    const bt_field *records = member(payload, ic.records);
    uint64_t length = bt_field_array_get_length(records);
    bytes_.resize(length);
    for (uint64_t i = 0; i < length; ++i) {
      bytes_[i] = static_cast<uint8_t>(bt_field_integer_unsigned_get_value(
          bt_field_array_borrow_element_field_by_index_const(records, i)));
    }
    BlockRecordReader reader(bytes_.data(), bytes_.size(), read(ic.record_count),
                             read(ic.base_clock));
    records_.clear();
    BlockRecord record;
    while (reader.next(record)) records_.push_back(record);

    // The held events first at equal times: they came before the block. A
    // partial block vouches for the thread's records up to its last one only:
    // held events after it wait for the next block.
    uint64_t flags = read(ic.flags);
    uint64_t until = UINT64_MAX;
    if (flags & PINSIGHT_BLOCK_PARTIAL) until = records_.empty() ? 0 : records_.back().clock;
    size_t h = 0, r = 0;
    auto releasable = [&] { return h < t.held.size() && t.held[h].clock <= until; };
    while (releasable() || r < records_.size()) {
      if (r == records_.size() || (releasable() && t.held[h].clock <= records_[r].clock)) {
        emit_copy(t, t.held[h].clock, t.held[h].message);
        bt_message_put_ref(t.held[h].message);
        t.held[h].message = nullptr;
        ++h;
      } else {
        emit_record(t, records_[r++], python_thread_id, context);
      }
    }
    t.held.erase(t.held.begin(), t.held.begin() + static_cast<std::ptrdiff_t>(h));
    t.batched = !(flags & PINSIGHT_BLOCK_FINAL);
  }

  Thread &thread(int64_t vpid, int64_t vtid) {
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(vpid)) << 32) | static_cast<uint32_t>(vtid);
    auto &slot = threads_[key];
    if (!slot) {
      slot = std::make_unique<Thread>();
      slot->vpid = vpid;
      slot->vtid = vtid;
    }
    return *slot;
  }

  // Starts the thread's event in its stream (made at its first event), at
  // `clock` or, for a block later than the writer promises, the stream's last
  // time: a stream stays in time order.
  void begin(Thread &t, int64_t id, uint64_t clock) {
    if (t.stream < 0) {
      t.stream = static_cast<int64_t>(writer_->new_stream());
      t.last = clock;
    }
    t.last = std::max(clock, t.last);
    writer_->begin_event(static_cast<size_t>(t.stream), id, t.last);
    ++events_;
  }

  // The event context: the source's, with the thread's vpid and vtid.
  void put_context(const Thread &t, const bt_field *source) {
    const bt_field_class *fc = writer_->context_class();
    if (fc == nullptr) return;
    uint64_t count = bt_field_class_structure_get_member_count(fc);
    for (uint64_t i = 0; i < count; ++i) {
      auto index = static_cast<int64_t>(i);
      if (index == out_vpid_ || index == out_vtid_) {
        writer_->put_le(static_cast<uint64_t>(index == out_vpid_ ? t.vpid : t.vtid),
                        context_bytes_[i]);
      } else if (source != nullptr) {
        writer_->put_field(bt_field_structure_borrow_member_field_by_index_const(source, i));
      } else {
        throw ReaderError("an event without the trace's event context");
      }
    }
  }

  void emit_copy(Thread &t, uint64_t clock, const bt_message *message) {
    const bt_event *source = bt_message_event_borrow_event_const(message);
    const InputClass &ic = input_class(bt_event_borrow_class_const(source));
    begin(t, ic.out, clock);
    put_context(t, bt_event_borrow_common_context_field_const(source));
    const bt_field *payload = bt_event_borrow_payload_field_const(source);
    if (writer_->payload_class(ic.out) == nullptr) return;
    if (payload == nullptr) throw ReaderError("an event without its payload");
    writer_->put_field(payload);
  }

  void emit_record(Thread &t, const BlockRecord &r, int64_t python_thread_id,
                   const bt_field *block_context) {
    const RecordClass &rc = record_classes_[r.kind];
    if (rc.id < 0) {
      throw ReaderError(std::string("the trace's metadata lacks ") + kRecordEvents[r.kind] +
                        ", which its records need");
    }
    begin(t, rc.id, r.clock);
    if (context_plain_) {
      // The usual context, vpid and vtid: written without reading the block's.
      for (const auto &[index, bytes] : context_plan_) {
        writer_->put_le(static_cast<uint64_t>(index == out_vpid_ ? t.vpid : t.vtid), bytes);
      }
    } else {
      put_context(t, block_context);
    }
    for (const auto &[slot, bytes] : rc.members) {
      uint64_t value = 0;
      switch (slot) {
        case Slot::kCodeId:
          value = r.code_id;
          break;
        case Slot::kPythonThreadId:
          value = static_cast<uint64_t>(python_thread_id);
          break;
        case Slot::kTransition:
          value = r.transition;
          break;
        case Slot::kCallableId:
          value = r.callable_id;
          break;
        case Slot::kCallerLineno:
          value = r.line;
          break;
        case Slot::kLifetime:
          value = r.lifetime_ns;
          break;
        case Slot::kSegments:
          value = r.segments;
          break;
        case Slot::kZero:
        case Slot::kEmptyString:  // its terminating NUL: one byte
          break;
      }
      writer_->put_le(value, bytes);
    }
  }

  const InputClass &input_class(const bt_event_class *ec) {
    auto found = input_classes_.find(ec);
    if (found != input_classes_.end()) return found->second;
    InputClass &ic = input_classes_[ec];
    const char *name = bt_event_class_get_name(ec);
    name = name ? name : "";
    ic.block = std::strcmp(name, kBlock) == 0;
    if (!ic.block) ic.out = writer_->event_id(ec);
    const bt_field_class *context = bt_stream_class_borrow_event_common_context_field_class_const(
        bt_event_class_borrow_stream_class_const(ec));
    ic.vpid = member_index(context, "vpid");
    ic.vtid = member_index(context, "vtid");
    if (ic.block) {
      const bt_field_class *payload = bt_event_class_borrow_payload_field_class_const(ec);
      ic.tid = member_index(payload, "tid");
      ic.python_thread_id = member_index(payload, "python_thread_id");
      ic.flags = member_index(payload, "flags");
      ic.base_clock = member_index(payload, "base_clock");
      ic.record_count = member_index(payload, "record_count");
      ic.records = member_index(payload, "records");
    }
    return ic;
  }

  void make_writer(const bt_stream *stream) {
    writer_ = std::make_unique<CtfWriter>(stream, out_dir_, kBlock);
    if (const bt_field_class *context = writer_->context_class()) {
      out_vpid_ = member_index(context, "vpid");
      out_vtid_ = member_index(context, "vtid");
      uint64_t count = bt_field_class_structure_get_member_count(context);
      context_plain_ = true;
      for (uint64_t i = 0; i < count; ++i) {
        const bt_field_class *fc = bt_field_class_structure_member_borrow_field_class_const(
            bt_field_class_structure_borrow_member_by_index_const(context, i));
        bool integer =
            bt_field_class_type_is(bt_field_class_get_type(fc), BT_FIELD_CLASS_TYPE_INTEGER);
        context_bytes_.push_back(integer ? integer_bytes(fc) : 0);
        auto index = static_cast<int64_t>(i);
        if ((index == out_vpid_ || index == out_vtid_) && integer) {
          context_plan_.emplace_back(index, integer_bytes(fc));
        } else {
          context_plain_ = false;
        }
      }
    }
    std::string missing;
    for (int kind = 0; kind < kRecordKinds; ++kind) {
      int64_t id = writer_->event_id(std::string(kRecordEvents[kind]));
      bool generator = kind == PINSIGHT_RECORD_GENERATOR_END;
      if (id < 0) {
        // A session that left generator_end out has no such record to write
        // (emit_record says so if one comes).
        if (!generator) missing += (missing.empty() ? "" : ", ") + std::string(kRecordEvents[kind]);
        continue;
      }
      RecordClass &rc = record_classes_[kind];
      rc.id = id;
      const bt_field_class *payload = writer_->payload_class(id);
      bool call = kind == PINSIGHT_RECORD_C_CALL_BEGIN || kind == PINSIGHT_RECORD_C_CALL_END;
      uint64_t count = payload ? bt_field_class_structure_get_member_count(payload) : 0;
      for (uint64_t i = 0; i < count; ++i) {
        const bt_field_class_structure_member *m =
            bt_field_class_structure_borrow_member_by_index_const(payload, i);
        const bt_field_class *fc = bt_field_class_structure_member_borrow_field_class_const(m);
        std::string name = bt_field_class_structure_member_get_name(m);
        Slot slot;
        if (name == "code_id") {
          slot = Slot::kCodeId;
        } else if (name == "python_thread_id") {
          slot = Slot::kPythonThreadId;
        } else if (name == (generator ? "how" : "transition")) {
          slot = Slot::kTransition;
        } else if (call && name == "callable_id") {
          slot = Slot::kCallableId;
        } else if (call && name == "caller_lineno") {
          slot = Slot::kCallerLineno;
        } else if (generator && name == "lifetime_ns") {
          slot = Slot::kLifetime;
        } else if (generator && name == "segments") {
          slot = Slot::kSegments;
        } else if (generator && name == "lineno") {
          slot = Slot::kZero;
        } else if (generator && (name == "qualname" || name == "filename")) {
          if (bt_field_class_get_type(fc) != BT_FIELD_CLASS_TYPE_STRING) {
            throw ReaderError(std::string(kRecordEvents[kind]) + "'s " + name + " is not a string");
          }
          rc.members.emplace_back(Slot::kEmptyString, 1);
          continue;
        } else {
          throw ReaderError(std::string(kRecordEvents[kind]) + " has a member '" + name +
                            "' that the batched payload's records do not hold");
        }
        if (!bt_field_class_type_is(bt_field_class_get_type(fc), BT_FIELD_CLASS_TYPE_INTEGER)) {
          throw ReaderError(std::string(kRecordEvents[kind]) + "'s " + name + " is not an integer");
        }
        rc.members.emplace_back(slot, integer_bytes(fc));
      }
    }
    if (!missing.empty()) throw ReaderError("the trace's metadata lacks " + missing);
  }

  Unbatcher &owner_;
  std::string out_dir_;
  std::unique_ptr<CtfWriter> writer_;
  std::unordered_map<const bt_event_class *, InputClass> input_classes_;
  RecordClass record_classes_[kRecordKinds];
  int64_t out_vpid_ = -1, out_vtid_ = -1;
  std::vector<unsigned> context_bytes_;  // per context member: an integer's size
  bool context_plain_ = false;           // the context is vpid and vtid alone
  std::vector<std::pair<int64_t, unsigned>> context_plan_;
  std::unordered_map<uint64_t, std::unique_ptr<Thread>> threads_;
  uint64_t held_order_ = 0;
  uint64_t events_ = 0;  // written since the last progress note
  std::vector<uint8_t> bytes_;
  std::vector<BlockRecord> records_;
};

Unbatcher::Unbatcher(std::string trace_dir, std::string out_dir)
    : set_(std::make_unique<TraceSet>(std::vector<std::string>{trace_dir})),
      graph_(std::make_unique<TraceGraph>(*set_)),
      converter_(std::make_unique<UnbatchConverter>(*this, std::move(out_dir))) {
  TimeRange range = graph_->time_range();
  begin_ns_ = range.begin_ns;
  end_ns_ = range.end_ns;
}

Unbatcher::~Unbatcher() = default;

bool Unbatcher::run() {
  TraceGraph::Client client;
  client.messages = [this](const bt_message *const *messages, const uint32_t *, uint64_t count) {
    converter_->consume(messages, count);
  };
  client.graph_replaced = [this] { converter_->forget_classes(); };
  if (!graph_->run(std::move(client))) return false;
  converter_->finish();
  return true;
}

void Unbatcher::cancel() { graph_->interrupt(); }

std::vector<Damage> Unbatcher::damages() const {
  std::vector<Damage> all = set_->damages();
  all.insert(all.end(), graph_->damages().begin(), graph_->damages().end());
  return all;
}

Progress Unbatcher::progress() const {
  return {output_events_.load(std::memory_order_relaxed), input_ns_.load(std::memory_order_relaxed),
          begin_ns_, end_ns_};
}

}  // namespace pinsight_reader
