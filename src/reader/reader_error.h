// The reader's one exception: a failure to open or read the trace, with
// babeltrace2's own causes (bound to Python as _pinsight_reader.ReaderError).
#pragma once

#include <stdexcept>

namespace pinsight_reader {

class ReaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pinsight_reader
