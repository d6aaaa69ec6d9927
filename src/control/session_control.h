// One LTTng session's set-up and tear-down through liblttng-ctl: each call is
// one request to the session daemon (about 0.1-0.5 ms) where the `lttng`
// command costs a process start (2-7 ms) and, on stop, a 200 ms poll period.
// Every failure throws ControlError carrying liblttng-ctl's own words.
//
// Built against Debian 12's headers (LTTng 2.13), it runs with the liblttng-ctl
// it finds: what later versions added (the trace format, 2.15) is looked up in
// that library at run time (ctl_library.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctl_library.h"

namespace pinsight_control {

class ControlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `lttng create --trace-format`: LTTng 2.15 and later write CTF 2 by default;
// earlier versions CTF 1.8 only.
enum class TraceFormat { Default, Ctf18, Ctf2 };

// Where a new session writes: a local directory, a URL (`lttng create
// --set-url`), or separate control and data URLs of a relay daemon.
struct SessionOutput {
  std::string path;      // absolute directory, or empty
  std::string url;       // file://, net://, tcp:// ..., or empty
  std::string ctrl_url;  // with data_url, or empty
  std::string data_url;
  bool snapshot = false;  // flight recorder: written only by record_snapshot()
  TraceFormat trace_format = TraceFormat::Default;
};

struct ChannelSpec {
  std::string name;
  uint64_t subbuf_size = 0;  // bytes, a power of two
  uint64_t num_subbuf = 0;
  bool overwrite = false;
  uint32_t read_timer_us = 0;    // 0: the domain's default
  uint32_t switch_timer_us = 0;  // 0: the domain's default
};

bool daemon_alive();
std::vector<std::string> list_sessions();
void create_session(const std::string &name, const SessionOutput &output);
// The trace formats the loaded liblttng-ctl can ask for ("ctf-1.8", and "ctf-2"
// from LTTng 2.15 on).
std::vector<std::string> trace_formats();
void enable_channel(const std::string &session, const ChannelSpec &channel);
void enable_event(const std::string &session, const std::string &channel,
                  const std::string &pattern);
// `type`: a name of `lttng add-context --type` among those the user-space domain has.
void add_context(const std::string &session, const std::string &channel, const std::string &type);
// Records only processes added next (an empty inclusion set).
void track_no_process(const std::string &session);
// Adding a process already tracked is not an error.
void track_vpids(const std::string &session, const std::vector<int64_t> &pids);
void track_vgid(const std::string &session, int64_t gid);
void start(const std::string &session);
// Stops, then waits until every buffered event is written (polling the daemon
// every `poll_us`; lttng stop polls every 200 ms).
void stop(const std::string &session, uint32_t poll_us);
void destroy_no_wait(const std::string &session);
// Writes the snapshot session's buffers now, as a snapshot named `name` (its
// folder: NAME-YYYYmmdd-HHMMSS-N, LTTng's), under `local_path` when given, else
// to the session's own output (its directory, or its relay daemon). Returns
// once the consumer daemon has written it all.
void record_snapshot(const std::string &session, const std::string &name = "",
                     const std::string &local_path = "");
const std::vector<std::string> &context_types();

}  // namespace pinsight_control
