// Times as google.protobuf.Timestamp with microsecond resolution (protobuf 3.21's
// TimeUtil::GetCurrentTime has whole seconds only, too coarse to order events).
#ifndef VRAMLAB_SERVER_COMMON_TIMESTAMP_H_
#define VRAMLAB_SERVER_COMMON_TIMESTAMP_H_

#include <google/protobuf/timestamp.pb.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace vramlab::server {

// `time` as a Timestamp, to the microsecond.
inline google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  int64_t micros = absl::ToUnixMicros(time);
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(micros / 1000000);
  timestamp.set_nanos(static_cast<int32_t>(micros % 1000000) * 1000);
  return timestamp;
}

inline google::protobuf::Timestamp NowTimestamp() { return ToTimestamp(absl::Now()); }

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_COMMON_TIMESTAMP_H_
