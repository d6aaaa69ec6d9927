#include "session_control.h"

#include <lttng/lttng.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>

namespace pinsight_control {
namespace {

// The names `lttng add-context --type` takes for the user-space domain.
const std::vector<std::pair<std::string, lttng_event_context_type>> kContextTypes = {
    {"vpid", LTTNG_EVENT_CONTEXT_VPID},
    {"vtid", LTTNG_EVENT_CONTEXT_VTID},
    {"procname", LTTNG_EVENT_CONTEXT_PROCNAME},
    {"pthread_id", LTTNG_EVENT_CONTEXT_PTHREAD_ID},
    {"ip", LTTNG_EVENT_CONTEXT_IP},
    {"cgroup_ns", LTTNG_EVENT_CONTEXT_CGROUP_NS},
    {"ipc_ns", LTTNG_EVENT_CONTEXT_IPC_NS},
    {"mnt_ns", LTTNG_EVENT_CONTEXT_MNT_NS},
    {"net_ns", LTTNG_EVENT_CONTEXT_NET_NS},
    {"pid_ns", LTTNG_EVENT_CONTEXT_PID_NS},
    {"time_ns", LTTNG_EVENT_CONTEXT_TIME_NS},
    {"user_ns", LTTNG_EVENT_CONTEXT_USER_NS},
    {"uts_ns", LTTNG_EVENT_CONTEXT_UTS_NS},
    {"vuid", LTTNG_EVENT_CONTEXT_VUID},
    {"veuid", LTTNG_EVENT_CONTEXT_VEUID},
    {"vsuid", LTTNG_EVENT_CONTEXT_VSUID},
    {"vgid", LTTNG_EVENT_CONTEXT_VGID},
    {"vegid", LTTNG_EVENT_CONTEXT_VEGID},
    {"vsgid", LTTNG_EVENT_CONTEXT_VSGID},
};

[[noreturn]] void fail(const std::string &what, int code) {
  // liblttng-ctl returns -LTTNG_ERR_*; lttng_strerror takes either sign.
  throw ControlError(what + ": " + lttng_strerror(code < 0 ? code : -code));
}

void check(const std::string &what, int ret) {
  if (ret < 0) fail(what, ret);
}

lttng_domain user_space_domain() {
  lttng_domain domain{};
  domain.type = LTTNG_DOMAIN_UST;
  domain.buf_type = LTTNG_BUFFER_PER_UID;  // `lttng enable-channel --userspace`'s default
  return domain;
}

struct HandleDeleter {
  void operator()(lttng_handle *h) const { lttng_destroy_handle(h); }
};
using Handle = std::unique_ptr<lttng_handle, HandleDeleter>;

Handle handle_of(const std::string &session) {
  lttng_domain domain = user_space_domain();
  Handle handle(lttng_create_handle(session.c_str(), &domain));
  if (!handle) throw ControlError("session " + session + ": cannot make a liblttng-ctl handle");
  return handle;
}

void copy_name(char *dst, size_t size, const std::string &src, const std::string &what) {
  if (src.size() >= size) {
    throw ControlError(what + " '" + src + "' is longer than LTTng's " + std::to_string(size - 1) +
                       " characters");
  }
  std::memcpy(dst, src.c_str(), src.size() + 1);
}

struct TrackerDeleter {
  void operator()(lttng_process_attr_tracker_handle *h) const {
    lttng_process_attr_tracker_handle_destroy(h);
  }
};
using Tracker = std::unique_ptr<lttng_process_attr_tracker_handle, TrackerDeleter>;

Tracker tracker_of(const std::string &session, lttng_process_attr attr) {
  lttng_process_attr_tracker_handle *raw = nullptr;
  const lttng_error_code code =
      lttng_session_get_tracker_handle(session.c_str(), LTTNG_DOMAIN_UST, attr, &raw);
  if (code != LTTNG_OK) fail("session " + session + ": tracker", -static_cast<int>(code));
  return Tracker(raw);
}

void check_tracker(const std::string &what, lttng_process_attr_tracker_handle_status status) {
  if (status == LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_OK ||
      status == LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_EXISTS) {
    return;
  }
  const char *why = "error";
  switch (status) {
    case LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_SESSION_DOES_NOT_EXIST:
      why = "no such session";
      break;
    case LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_COMMUNICATION_ERROR:
      why = "cannot reach the session daemon";
      break;
    case LTTNG_PROCESS_ATTR_TRACKER_HANDLE_STATUS_INVALID_TRACKING_POLICY:
      why = "the tracker does not track a set of values";
      break;
    default:
      break;
  }
  throw ControlError(what + ": " + why);
}

// An inclusion set, emptied the first time: only the values added next are recorded.
void include_set(const std::string &session, lttng_process_attr_tracker_handle *tracker) {
  lttng_tracking_policy policy;
  check_tracker("session " + session + ": tracking policy",
                lttng_process_attr_tracker_handle_get_tracking_policy(tracker, &policy));
  if (policy != LTTNG_TRACKING_POLICY_INCLUDE_SET) {
    check_tracker("session " + session + ": tracking policy",
                  lttng_process_attr_tracker_handle_set_tracking_policy(
                      tracker, LTTNG_TRACKING_POLICY_INCLUDE_SET));
  }
}

// lttng_session_descriptor_set_trace_format() and its enum, LTTng 2.15's
// (lttng/session-descriptor.h), found in the loaded liblttng-ctl.
constexpr const char *kSetTraceFormat = "lttng_session_descriptor_set_trace_format";
enum LttngTraceFormat : int { kTraceFormatCtf18 = 1, kTraceFormatCtf2 = 2 };
using SetTraceFormat = int (*)(lttng_session_descriptor *, int);

void set_trace_format(const std::string &what, lttng_session_descriptor *descriptor,
                      TraceFormat format) {
  if (format == TraceFormat::Default) return;
  auto set = reinterpret_cast<SetTraceFormat>(ctl_function(kSetTraceFormat));
  if (set == nullptr) {
    // Before 2.15, every trace is CTF 1.8.
    if (format == TraceFormat::Ctf18) return;
    throw ControlError(what + ": CTF 2 needs LTTng 2.15 or later; this liblttng-ctl (" +
                       ctl_library().path + ", " + ctl_library().version() +
                       ") writes CTF 1.8 only");
  }
  const int status =
      set(descriptor, format == TraceFormat::Ctf2 ? kTraceFormatCtf2 : kTraceFormatCtf18);
  if (status != LTTNG_SESSION_DESCRIPTOR_STATUS_OK) {
    throw ControlError(what + ": liblttng-ctl refused the trace format");
  }
}

}  // namespace

bool daemon_alive() { return lttng_session_daemon_alive() == 1; }

std::vector<std::string> list_sessions() {
  lttng_session *sessions = nullptr;
  const int count = lttng_list_sessions(&sessions);
  check("listing the sessions", count);
  std::vector<std::string> names;
  names.reserve(count);
  for (int i = 0; i < count; ++i) names.emplace_back(sessions[i].name);
  std::free(sessions);
  return names;
}

void create_session(const std::string &name, const SessionOutput &output) {
  const std::string what = "creating the session " + name;
  // A descriptor for every kind of output (what `lttng create` sends): the trace
  // format is a property of the descriptor.
  lttng_session_descriptor *descriptor = nullptr;
  std::string describes;
  if (!output.ctrl_url.empty()) {
    descriptor = output.snapshot
                     ? lttng_session_descriptor_snapshot_network_create(
                           name.c_str(), output.ctrl_url.c_str(), output.data_url.c_str())
                     : lttng_session_descriptor_network_create(
                           name.c_str(), output.ctrl_url.c_str(), output.data_url.c_str());
    describes = "URLs " + output.ctrl_url + " and " + output.data_url;
  } else {
    constexpr std::string_view kFile = "file://";
    const std::string url = output.url.empty() ? "file://" + output.path : output.url;
    if (url.compare(0, kFile.size(), kFile) == 0) {
      const std::string path = url.substr(kFile.size());
      descriptor = output.snapshot
                       ? lttng_session_descriptor_snapshot_local_create(name.c_str(), path.c_str())
                       : lttng_session_descriptor_local_create(name.c_str(), path.c_str());
      describes = "path " + path;
    } else {  // net://HOST[:CTRL[:DATA]], both ports in one URL
      descriptor =
          output.snapshot
              ? lttng_session_descriptor_snapshot_network_create(name.c_str(), url.c_str(), nullptr)
              : lttng_session_descriptor_network_create(name.c_str(), url.c_str(), nullptr);
      describes = "URL " + url;
    }
  }
  if (descriptor == nullptr) throw ControlError(what + ": invalid " + describes);
  std::unique_ptr<lttng_session_descriptor, void (*)(lttng_session_descriptor *)> owned(
      descriptor, lttng_session_descriptor_destroy);
  set_trace_format(what, descriptor, output.trace_format);
  const lttng_error_code code = lttng_create_session_ext(descriptor);
  if (code != LTTNG_OK) fail(what, -static_cast<int>(code));
}

std::vector<std::string> trace_formats() {
  if (ctl_function(kSetTraceFormat) == nullptr) return {"ctf-1.8"};
  return {"ctf-1.8", "ctf-2"};
}

void enable_channel(const std::string &session, const ChannelSpec &spec) {
  lttng_domain domain = user_space_domain();
  lttng_channel *channel = lttng_channel_create(&domain);  // the domain's default attributes
  if (channel == nullptr) throw ControlError("session " + session + ": cannot make a channel");
  std::unique_ptr<lttng_channel, void (*)(lttng_channel *)> owned(channel, lttng_channel_destroy);
  copy_name(channel->name, sizeof channel->name, spec.name, "channel name");
  channel->enabled = 1;
  channel->attr.overwrite = spec.overwrite ? 1 : 0;
  if (spec.subbuf_size != 0) channel->attr.subbuf_size = spec.subbuf_size;
  if (spec.num_subbuf != 0) channel->attr.num_subbuf = spec.num_subbuf;
  if (spec.read_timer_us != 0) channel->attr.read_timer_interval = spec.read_timer_us;
  if (spec.switch_timer_us != 0) channel->attr.switch_timer_interval = spec.switch_timer_us;
  check("session " + session + ": enabling the channel " + spec.name,
        lttng_enable_channel(handle_of(session).get(), channel));
}

void enable_event(const std::string &session, const std::string &channel,
                  const std::string &pattern) {
  std::unique_ptr<lttng_event, void (*)(lttng_event *)> event(lttng_event_create(),
                                                              lttng_event_destroy);
  if (!event) throw ControlError("session " + session + ": cannot make an event rule");
  copy_name(event->name, sizeof event->name, pattern, "event name");
  event->type = LTTNG_EVENT_TRACEPOINT;
  event->loglevel_type = LTTNG_EVENT_LOGLEVEL_ALL;
  event->loglevel = -1;
  check("session " + session + ": enabling the events " + pattern,
        lttng_enable_event_with_exclusions(handle_of(session).get(), event.get(), channel.c_str(),
                                           nullptr, 0, nullptr));
}

const std::vector<std::string> &context_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto &entry : kContextTypes) out.push_back(entry.first);
    return out;
  }();
  return names;
}

void add_context(const std::string &session, const std::string &channel, const std::string &type) {
  const auto found = std::find_if(kContextTypes.begin(), kContextTypes.end(),
                                  [&](const auto &entry) { return entry.first == type; });
  if (found == kContextTypes.end()) {
    std::string known;
    for (const auto &entry : kContextTypes) known += (known.empty() ? "" : ", ") + entry.first;
    throw ControlError("context type '" + type + "': expected one of " + known);
  }
  lttng_event_context context{};
  context.ctx = found->second;
  check("session " + session + ": adding the context " + type,
        lttng_add_context(handle_of(session).get(), &context, nullptr, channel.c_str()));
}

void track_no_process(const std::string &session) {
  Tracker tracker = tracker_of(session, LTTNG_PROCESS_ATTR_VIRTUAL_PROCESS_ID);
  check_tracker("session " + session + ": tracking no process",
                lttng_process_attr_tracker_handle_set_tracking_policy(
                    tracker.get(), LTTNG_TRACKING_POLICY_INCLUDE_SET));
}

void track_vpids(const std::string &session, const std::vector<int64_t> &pids) {
  Tracker tracker = tracker_of(session, LTTNG_PROCESS_ATTR_VIRTUAL_PROCESS_ID);
  include_set(session, tracker.get());
  for (const int64_t pid : pids) {
    check_tracker("session " + session + ": tracking the process " + std::to_string(pid),
                  lttng_process_attr_virtual_process_id_tracker_handle_add_pid(
                      tracker.get(), static_cast<pid_t>(pid)));
  }
}

void track_vgid(const std::string &session, int64_t gid) {
  Tracker tracker = tracker_of(session, LTTNG_PROCESS_ATTR_VIRTUAL_GROUP_ID);
  include_set(session, tracker.get());
  check_tracker("session " + session + ": tracking the group " + std::to_string(gid),
                lttng_process_attr_virtual_group_id_tracker_handle_add_gid(
                    tracker.get(), static_cast<gid_t>(gid)));
}

void start(const std::string &session) {
  check("starting the session " + session, lttng_start_tracing(session.c_str()));
}

void stop(const std::string &session, uint32_t poll_us) {
  const int ret = lttng_stop_tracing_no_wait(session.c_str());
  if (ret < 0 && ret != -LTTNG_ERR_TRACE_ALREADY_STOPPED)
    fail("stopping the session " + session, ret);
  // The consumer daemon is still writing what the buffers hold: the trace is
  // complete once the daemon says nothing is pending.
  for (;;) {
    const int pending = lttng_data_pending(session.c_str());
    check("waiting for the session " + session + "'s data", pending);
    if (pending == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
  }
}

void destroy_no_wait(const std::string &session) {
  check("destroying the session " + session, lttng_destroy_session_no_wait(session.c_str()));
}

void record_snapshot(const std::string &session, const std::string &name,
                     const std::string &local_path) {
  const std::string what = "recording a snapshot of the session " + session;
  if (name.empty() && local_path.empty()) {
    check(what, lttng_snapshot_record(session.c_str(), nullptr, 0));
    return;
  }
  std::unique_ptr<lttng_snapshot_output, void (*)(lttng_snapshot_output *)> output(
      lttng_snapshot_output_create(), lttng_snapshot_output_destroy);
  if (!output) throw ControlError(what + ": cannot make a snapshot output");
  if (!name.empty())
    check(what + " named " + name, lttng_snapshot_output_set_name(name.c_str(), output.get()));
  if (!local_path.empty()) {
    check(what + " into " + local_path,
          lttng_snapshot_output_set_local_path(local_path.c_str(), output.get()));
  } else {
    // The session's own output (a relay daemon's URLs), under this name: an
    // output given to lttng_snapshot_record replaces the session's whole.
    lttng_snapshot_output_list *list = nullptr;
    check(what + ": its outputs", lttng_snapshot_list_output(session.c_str(), &list));
    std::unique_ptr<lttng_snapshot_output_list, void (*)(lttng_snapshot_output_list *)> owned(
        list, lttng_snapshot_output_list_destroy);
    const lttng_snapshot_output *own = lttng_snapshot_output_list_get_next(list);
    if (own == nullptr) throw ControlError(what + ": the session has no snapshot output");
    check(what, lttng_snapshot_output_set_ctrl_url(lttng_snapshot_output_get_ctrl_url(own),
                                                   output.get()));
    check(what, lttng_snapshot_output_set_data_url(lttng_snapshot_output_get_data_url(own),
                                                   output.get()));
  }
  check(what, lttng_snapshot_record(session.c_str(), output.get(), 0));
}

}  // namespace pinsight_control
