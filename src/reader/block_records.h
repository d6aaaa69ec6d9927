// The batched payload's records (event_block's `records`, laid out as
// format/wire.h says), decoded one by one: shared by the reader's block
// merger and `unbatch`, so that both read a block the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/wire.h"

namespace pinsight_reader {

struct BlockRecord {
  int kind;            // PINSIGHT_RECORD_*
  uint8_t transition;  // frame_transition or c_call_transition
  uint64_t code_id;
  uint64_t callable_id;  // native calls only (0 for a function's records)
  uint64_t line;         // the call site's line, native calls only
  uint64_t lifetime_ns;  // a generator's end only, as its segments
  uint64_t segments;
  uint64_t clock;  // base_clock plus the advances so far
};

class BlockRecordReader {
 public:
  BlockRecordReader(const uint8_t *data, size_t size, uint64_t count, uint64_t base_clock)
      : p_(data), end_(data + size), left_(count), clock_(base_clock) {}

  // The next record; false after the last one, or at a damaged one (a record
  // cut short by the block's end, an unknown kind).
  bool next(BlockRecord &r) {
    if (left_ == 0 || p_ >= end_) return false;
    --left_;
    uint8_t head = *p_++;
    r.kind = head >> 3;
    r.transition = head & 7;
    if (r.kind > PINSIGHT_RECORD_GENERATOR_END) return fail();
    const bool call =
        r.kind == PINSIGHT_RECORD_C_CALL_BEGIN || r.kind == PINSIGHT_RECORD_C_CALL_END;
    uint64_t value = 0;
    if (!varint(&value)) return fail();
    code_ += unzigzag(value);
    r.line = r.lifetime_ns = r.segments = 0;
    if (call) {
      if (!varint(&value)) return fail();
      callable_ += unzigzag(value);
      if (!varint(&r.line)) return fail();
    } else if (r.kind == PINSIGHT_RECORD_GENERATOR_END) {
      if (!varint(&r.lifetime_ns) || !varint(&r.segments)) return fail();
    }
    if (!varint(&value)) return fail();
    clock_ += value;
    r.code_id = code_;
    r.callable_id = call ? callable_ : 0;
    r.clock = clock_;
    return true;
  }

 private:
  bool fail() {
    left_ = 0;
    return false;
  }
  // LEB128; false when the block ends inside it.
  bool varint(uint64_t *value) {
    uint64_t out = 0;
    for (unsigned shift = 0; p_ < end_ && shift < 64; shift += 7) {
      uint8_t byte = *p_++;
      out |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        *value = out;
        return true;
      }
    }
    return false;
  }
  static uint64_t unzigzag(uint64_t v) { return (v >> 1) ^ (~(v & 1) + 1); }

  const uint8_t *p_;
  const uint8_t *end_;
  uint64_t left_;
  uint64_t clock_;
  uint64_t code_ = 0;
  uint64_t callable_ = 0;
};

}  // namespace pinsight_reader
