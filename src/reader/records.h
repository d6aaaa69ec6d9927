// The reader's contract with Python: named, typed records (PyStructSequence
// types, as _lsprof and os.stat use), one type per kind of aggregate, declared
// field by field in python/pinsight_python/_pinsight_reader.pyi. A record is a
// tuple too, so two reads compare equal when their figures do, but Python code
// reads its fields by name.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "analysis.h"
#include "damage.h"

namespace pinsight_reader {

// Creates the record types and adds them to the module (once, at import).
void add_record_types(pybind11::module_ &module);

// Aggregates of a completed read (TraceResult); throws ReaderError before that.
pybind11::object result_record(const Analysis &analysis);
// DamagedPart records, one per place a file was skipped.
pybind11::list damage_records(const std::vector<Damage> &damages);
// Analysis::progress() as a Progress record.
pybind11::object progress_record(const Progress &progress);

}  // namespace pinsight_reader
