// A hash map from non-null pointers to small values, open addressing with
// linear probing and backward-shift deletion: a lookup reads one slot array,
// usually one cache line, and an insert or erase allocates nothing until the
// table grows. std::unordered_map allocated a node per entry and chased a
// bucket pointer per lookup (and divided by a prime to find the bucket): most of
// a traced generator instance's bookkeeping (GeneratorTable, a lookup per
// resumption), and on 3.14+ a lookup per traced begin (code_registry::beside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pinsight {

template <typename Value>
class PointerMap {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  Value *find(const void *key) {
    if (size_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot &slot = slots_[i];
      if (slot.key == key) return &slot.value;
      if (slot.key == nullptr) return nullptr;
    }
  }

  // Inserts or overwrites `key`'s value.
  void put(const void *key, const Value &value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot &slot = slots_[i];
      if (slot.key == key) {
        slot.value = value;
        return;
      }
      if (slot.key == nullptr) {
        slot.key = key;
        slot.value = value;
        ++size_;
        return;
      }
    }
  }

  // False when `key` is absent.
  bool erase(const void *key) {
    if (size_ == 0) return false;
    size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == nullptr) return false;
      i = (i + 1) & mask_;
    }
    erase_slot(i);
    return true;
  }

  // Erases the entry whose value find() just returned, without probing again.
  void erase_found(Value *found) {
    auto *slot = reinterpret_cast<Slot *>(reinterpret_cast<char *>(found) - offsetof(Slot, value));
    erase_slot(static_cast<size_t>(slot - slots_.data()));
  }

  // Calls f(key, value&) for every entry; f must not change the map.
  template <typename F>
  void for_each(F f) {
    for (Slot &slot : slots_) {
      if (slot.key != nullptr) f(slot.key, slot.value);
    }
  }

 private:
  struct Slot {
    const void *key = nullptr;
    Value value{};
  };

  void erase_slot(size_t i) {
    // Backward shift: every later entry of the run moves up if its home allows,
    // so no tombstone is left for lookups to step over.
    for (size_t j = (i + 1) & mask_; slots_[j].key != nullptr; j = (j + 1) & mask_) {
      size_t h = home(slots_[j].key);
      bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
      if (movable) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = nullptr;
    --size_;
  }

  size_t home(const void *key) const {
    // Fibonacci hashing: the low bits of an object's address are all alike.
    uint64_t h = reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> shift_) & mask_;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot &slot : old) {
      if (slot.key != nullptr) put(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace pinsight
