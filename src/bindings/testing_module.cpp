// pinsight_python._pinsight_python_testing: hooks for the tests, built only
// with -DPINSIGHT_PYTHON_TESTING=ON (scripts/setup.sh turns it on for the dev
// and test environments); the wheel does not carry it. Parser probes run the
// configuration code linked in here; the tracer's live state is read through
// the product module's capsule (testing_api.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <random>

#include "activation/testing_api.h"
#include "bindings/config_probes.h"
#include "common/compat.h"
#include "tracer/code_info.h"
#include "tracer/pointer_map.h"

namespace py = pybind11;

namespace {

const pinsight::TestingApi &api() {
  static const pinsight::TestingApi *loaded = [] {
    // PyCapsule_Import finds the module as an attribute of the package, bound
    // once it is imported: imported here, not left to the package's root.
    py::module_::import("pinsight_python._pinsight_python");
    auto *found = static_cast<const pinsight::TestingApi *>(
        PyCapsule_Import(pinsight::kTestingApiCapsule, 0));
    if (!found) throw py::error_already_set();
    if (found->version != pinsight::TestingApi::kVersion) {
      throw std::runtime_error(
          "pinsight_python._pinsight_python is not the build this test "
          "module was made with (testing API version mismatch)");
    }
    return found;
  }();
  return *loaded;
}

}  // namespace

PYBIND11_MODULE(_pinsight_python_testing, m) {
  m.doc() = "pinsight-python's test hooks (not part of the product)";
  api();  // fail at import when the product module does not match

  m.def(
      "_debug_stack",
      [] {
        py::list out;
        api().visit_stack(
            [](const pinsight::StackEntryView &entry, void *context) {
              static_cast<py::list *>(context)->append(py::make_tuple(
                  entry.frame, entry.qualname, entry.c_call ? "c_call" : "function", entry.flags));
            },
            &out);
        return out;
      },
      "The calling thread's shadow stack, outermost first: (frame address, qualname, "
      "'function' or 'c_call', flags) tuples.");
  m.def(
      "_debug_current_frame", [] { return api().current_frame(); },
      "The calling thread's current frame, as an address comparable with _debug_stack's.");

  m.def(
      "_debug_python_state_direct", [] { return api().python_state_direct(); },
      "1 when the calling thread's callbacks find its frame through libpython's thread-state "
      "variable directly, 0 through libpython's call, -1 before the thread's first callback.");

  m.def(
      "_debug_generator_entries", [] { return api().generator_entries(); },
      "How many traced generator instances the tracer follows (suspended or running).");

  m.def(
      "_code_counts_past_32_bits",
      [] {
        // CodeInfo's per-begin counts are 32-bit words carried into high words.
        pinsight::CodeInfo info;
        info.executions_low = UINT32_MAX;
        info.traced_low = UINT32_MAX - 1;
        info.count_execution();
        info.count_traced();
        info.count_traced();
        info.count_execution();
        return py::make_tuple(info.executions(), info.traced());
      },
      "(executions, traced) of a CodeInfo counted across 2^32: (2**32 + 1, 2**32).");

  m.def(
      "_pointer_map_check",
      [](uint64_t seed, int operations, int key_space) {
        // Random puts, erases and finds on PointerMap and on std::map side by
        // side; keys are 16-byte-aligned addresses, as objects' are.
        std::mt19937_64 random(seed);
        pinsight::PointerMap<uint64_t> map;
        std::map<const void *, uint64_t> expected;
        int mismatches = 0;
        size_t largest = 0;
        for (int i = 0; i < operations; ++i) {
          auto *key = reinterpret_cast<const void *>(
              0x7f0000000000ull + 16 * (random() % static_cast<uint64_t>(key_space)));
          // put twice as often as erase (by key, or through find's pointer): the table fills
          uint64_t action = random() % 4;
          if (action <= 1) {
            uint64_t value = random();
            map.put(key, value);
            expected[key] = value;
          } else if (action == 2 && random() % 2) {
            bool erased = map.erase(key);
            mismatches += erased != (expected.erase(key) == 1);
          } else if (action == 2) {
            uint64_t *at = map.find(key);
            if (at) map.erase_found(at);
            mismatches += (at != nullptr) != (expected.erase(key) == 1);
          }
          const uint64_t *found = map.find(key);
          auto it = expected.find(key);
          mismatches += (found == nullptr) != (it == expected.end());
          if (found && it != expected.end()) mismatches += *found != it->second;
          mismatches += map.size() != expected.size();
          largest = std::max(largest, map.size());
        }
        size_t seen = 0;
        map.for_each([&](const void *key, uint64_t &value) {
          ++seen;
          auto it = expected.find(key);
          mismatches += it == expected.end() || it->second != value;
        });
        mismatches += seen != expected.size();
        return py::make_tuple(mismatches, largest);
      },
      py::arg("seed"), py::arg("operations"), py::arg("key_space"),
      "(mismatches, the most entries held) of PointerMap against std::map over random "
      "operations.");

  m.def(
      "_unverified_cpython",
      [](unsigned long hexversion, bool free_threaded) {
        return pinsight::compat::unverified_cpython(hexversion, free_threaded);
      },
      py::arg("hexversion"), py::arg("free_threaded"),
      "Why activate() refuses on that CPython (sys.hexversion encoding); '' when verified.");

  m.def(
      "_gil_events_refusal",
      [](bool free_threaded) { return pinsight::compat::gil_events_refusal(free_threaded); },
      py::arg("free_threaded"),
      "Why activate(events=[..., 'gil']) refuses on such a build; '' when it may trace them.");

  pinsight::register_config_probes(m);
}
