// A real vramlabd under hostile requests from a signed-in client: extreme values in the fields of
// every request, oversized ids and filters, bodies that are not the method's message, names that
// would spoof a listing. Each is answered with a clear status, and throughout the daemon stays
// responsive (ls answers in under a second), its CPU idle and its memory bounded.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/metrics/raw_http_client.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

constexpr int64_t kMiB = int64_t{1} << 20;

// Resident memory of `pid` in bytes (VmRSS), -1 if unknown.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return -1;
}

// CPU time `pid` has used, user and system, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the command name, which is in parentheses and may hold spaces.
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

// How long one ListExperiments takes, or a failure.
absl::StatusOr<absl::Duration> TimeList(vramlab::v1::VramlabService::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  vramlab::v1::ListExperimentsRequest request;
  vramlab::v1::ListExperimentsResponse response;
  const absl::Time start = absl::Now();
  grpc::Status status = stub.ListExperiments(&context, request, &response);
  if (!status.ok()) return ToAbsl(status);
  return absl::Now() - start;
}

// Reads a server stream to its end; its status.
template <typename Message, typename Reader>
grpc::Status Drain(Reader& reader) {
  Message message;
  while (reader->Read(&message)) {
  }
  return reader->Finish();
}

class DaemonAbuseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A worker that exits at once: experiments end quickly (FAILED, no report), which is all a
    // finished experiment needs to be here.
    auto daemon = DaemonHarness::Start(
        {.extra_flags = {"--cpu-slots=1", "--worker-path=/bin/true"}, .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    auto stub = daemon_->NewStub();
    auto submitted = Submit(*stub, TinySpec());
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    auto ended = WaitForFinalState(*stub, submitted->id());
    ASSERT_TRUE(ended.ok()) << ended.status();
    finished_id_ = new std::string(ended->id());
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete finished_id_;
  }

  static DaemonHarness* daemon_;
  static std::string* finished_id_;
};

DaemonHarness* DaemonAbuseTest::daemon_ = nullptr;
std::string* DaemonAbuseTest::finished_id_ = nullptr;

// Fifty watches of a finished experiment from the largest sequence there is end at once, leave
// no thread spinning, and ls stays fast meanwhile.
TEST_F(DaemonAbuseTest, WatchesFromTheLargestSequenceEndAtOnceAndLeaveTheDaemonIdle) {
  constexpr int kWatchers = 50;
  std::atomic<int> ended_ok{0};
  std::vector<std::string> failures(kWatchers);
  std::vector<std::thread> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.emplace_back([i, &ended_ok, &failures] {
      auto stub = daemon_->NewStub();
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      vramlab::v1::WatchExperimentRequest request;
      request.set_id(*finished_id_);
      // Every extreme the field has: the largest, one below, and far past the last event.
      const int64_t values[] = {std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::max() - 1, int64_t{1} << 62};
      request.set_after_sequence(values[i % 3]);
      auto reader = stub->WatchExperiment(&context, request);
      vramlab::v1::ExperimentEvent event;
      int events = 0;
      while (reader->Read(&event)) ++events;
      grpc::Status status = reader->Finish();
      if (status.ok() && events == 0) {
        ++ended_ok;
      } else {
        failures[i] = status.error_message() + " events=" + std::to_string(events);
      }
    });
  }
  for (std::thread& watcher : watchers) watcher.join();
  EXPECT_EQ(ended_ok.load(), kWatchers) << failures[0];

  // Nothing left running: the daemon's CPU over a second is that of an idle daemon.
  const double before = CpuSeconds(daemon_->pid());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(CpuSeconds(daemon_->pid()) - before, 0.2);
  auto stub = daemon_->NewStub();
  auto took = TimeList(*stub);
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_LT(*took, absl::Seconds(1));

  grpc::ClientContext context;
  vramlab::v1::WatchExperimentRequest negative;
  negative.set_id(*finished_id_);
  negative.set_after_sequence(std::numeric_limits<int64_t>::min());
  auto reader = stub->WatchExperiment(&context, negative);
  grpc::Status status = Drain<vramlab::v1::ExperimentEvent>(reader);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "after_sequence: must be >= 0");
}

// A states filter of millions of values is refused before the store sees it; six at once leave
// the daemon's memory where it was.
TEST_F(DaemonAbuseTest, AHugeStatesFilterIsRefusedAndLeavesMemoryBounded) {
  auto stub = daemon_->NewStub();
  vramlab::v1::ListExperimentsRequest huge;
  for (int i = 0; i < 2'000'000; ++i) huge.add_states(Experiment::SUCCEEDED);
  const int64_t before = ResidentBytes(daemon_->pid());
  ASSERT_GT(before, 0);
  std::vector<std::thread> callers;
  std::vector<grpc::Status> statuses(6);
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&, i] {
      auto own = daemon_->NewStub();
      grpc::ClientContext context;
      vramlab::v1::ListExperimentsResponse response;
      statuses[i] = own->ListExperiments(&context, huge, &response);
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (const grpc::Status& status : statuses) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "states: at most 16 values, got 2000000");
  }
  const int64_t after = ResidentBytes(daemon_->pid());
  RecordProperty("rss_before_mib", static_cast<int>(before / kMiB));
  RecordProperty("rss_after_mib", static_cast<int>(after / kMiB));
  EXPECT_LT(after - before, 32 * kMiB)
      << "RSS " << before / kMiB << " -> " << after / kMiB << " MiB";

  // Repeats of the same state are one filter value; every state at once is fine.
  vramlab::v1::ListExperimentsRequest repeated;
  for (int i = 0; i < 16; ++i) repeated.add_states(Experiment::FAILED);
  grpc::ClientContext context;
  vramlab::v1::ListExperimentsResponse response;
  ASSERT_TRUE(stub->ListExperiments(&context, repeated, &response).ok());
  EXPECT_EQ(response.experiments_size(), 1);

  vramlab::v1::ListExperimentsRequest long_owner;
  long_owner.set_owner(std::string(100'000, 'o'));
  grpc::ClientContext owner_context;
  grpc::Status owner = stub->ListExperiments(&owner_context, long_owner, &response);
  EXPECT_EQ(owner.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(owner.error_message(), "owner: at most 256 bytes, got 100000");

  vramlab::v1::ListExperimentsRequest token;
  token.set_page_token(std::string(100'000, '9'));
  grpc::ClientContext token_context;
  EXPECT_EQ(stub->ListExperiments(&token_context, token, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  vramlab::v1::ListExperimentsRequest page;
  page.set_page_size(std::numeric_limits<int32_t>::max());
  grpc::ClientContext page_context;
  EXPECT_TRUE(stub->ListExperiments(&page_context, page, &response).ok());
}

// Every request that takes an id answers an oversized, empty or binary one with INVALID_ARGUMENT
// naming the field, in a short message that does not echo it.
TEST_F(DaemonAbuseTest, OversizedAndBinaryIdsAreRefusedWithoutBeingEchoed) {
  auto stub = daemon_->NewStub();
  const std::string big(100'000, 'x');
  struct Case {
    std::string id;
    std::string message;
  };
  const std::vector<Case> cases = {
      {big, "id: at most 64 bytes, got 100000"},
      {"", "id: required"},
      {std::string("exp-\0\n\x7f", 7), "id: printable ASCII only (an id looks like exp-000042)"}};
  for (const Case& c : cases) {
    std::vector<grpc::Status> statuses;
    {
      grpc::ClientContext context;
      vramlab::v1::GetExperimentRequest request;
      request.set_id(c.id);
      Experiment response;
      statuses.push_back(stub->GetExperiment(&context, request, &response));
    }
    {
      grpc::ClientContext context;
      vramlab::v1::CancelExperimentRequest request;
      request.set_id(c.id);
      Experiment response;
      statuses.push_back(stub->CancelExperiment(&context, request, &response));
    }
    {
      grpc::ClientContext context;
      vramlab::v1::WatchExperimentRequest request;
      request.set_id(c.id);
      auto reader = stub->WatchExperiment(&context, request);
      statuses.push_back(Drain<vramlab::v1::ExperimentEvent>(reader));
    }
    {
      grpc::ClientContext context;
      vramlab::v1::GetMemorySnapshotRequest request;
      request.set_id(c.id);
      auto reader = stub->GetMemorySnapshot(&context, request);
      statuses.push_back(Drain<vramlab::v1::DataChunk>(reader));
    }
    {
      grpc::ClientContext context;
      vramlab::v1::GetExperimentLogRequest request;
      request.set_id(c.id);
      auto reader = stub->GetExperimentLog(&context, request);
      statuses.push_back(Drain<vramlab::v1::DataChunk>(reader));
    }
    for (const grpc::Status& status : statuses) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
      EXPECT_EQ(status.error_message(), c.message);
    }
  }
}

// Bytes that are not the method's message are the client's error, not the daemon's.
TEST_F(DaemonAbuseTest, MalformedBodiesAreInvalidArgument) {
  const std::vector<std::string> methods = {
      "SubmitExperiment", "GetExperiment",  "ListExperiments",   "CancelExperiment",
      "UpdateExperiment", "HoldExperiment", "ReleaseExperiment", "DeleteExperiment",
      "EstimateMemory",   "GetServerInfo",  "WatchExperiment",   "GetExperimentLog"};
  const std::vector<std::string> bodies = {std::string("\xff\xff\xff\xff\x0f", 5),
                                           std::string(1000, '\x0a'),
                                           std::string("\x0a\x05"
                                                       "ab",
                                                       4)};
  for (const std::string& method : methods) {
    for (const std::string& body : bodies) {
      auto result = RawUnaryCall(daemon_->channel(), "/vramlab.v1.VramlabService/" + method, body);
      ASSERT_FALSE(result.ok()) << method;
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
          << method << ": " << result.status();
      EXPECT_THAT(std::string(result.status().message()),
                  HasSubstr("request: the message does not parse as the request of "
                            "/vramlab.v1.VramlabService/" +
                            method));
    }
  }
  // A string field that is not UTF-8 is named: GetExperimentRequest.id (field 1), 0xff.
  auto bad_id = RawUnaryCall(daemon_->channel(), "/vramlab.v1.VramlabService/GetExperiment",
                             std::string("\x0a\x02\xff\xfe", 4));
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_id.status().message(),
            "request: vramlab.v1.GetExperimentRequest.id: not valid UTF-8 (a string field must be "
            "UTF-8 text)");
  // The daemon's log holds none of protobuf's lines about them.
  EXPECT_THAT(daemon_->ReadLog(), ::testing::Not(HasSubstr("invalid UTF-8")));
}

// A name that reorders a listing, or is not UTF-8, is refused naming the field.
TEST_F(DaemonAbuseTest, NamesThatWouldSpoofAListingAreRefused) {
  auto stub = daemon_->NewStub();
  vramlab::v1::ExperimentSpec spec = TinySpec();
  spec.set_name("run\xE2\x80\xAEgpj.exe");  // U+202E RIGHT-TO-LEFT OVERRIDE
  auto bidi = Submit(*stub, spec);
  EXPECT_EQ(bidi.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bidi.status().message(),
            "spec.name: contains a bidirectional formatting character (U+202E at byte 3)");
  auto request_id = Submit(*stub, TinySpec(), "", "req\xE2\x81\xA6");
  EXPECT_EQ(request_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(request_id.status().message()), HasSubstr("request_id: contains a bidi"));

  // Invalid UTF-8 cannot leave a conforming client; sent raw, it is named by its field.
  vramlab::v1::SubmitExperimentRequest request;
  *request.mutable_spec() = TinySpec();
  request.mutable_spec()->set_name("NAME");
  std::string bytes = request.SerializeAsString();
  bytes.replace(bytes.find("NAME"), 4,
                "N\xff\xfe"
                "E");
  auto raw = RawUnaryCall(daemon_->channel(), "/vramlab.v1.VramlabService/SubmitExperiment", bytes);
  EXPECT_EQ(raw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(raw.status().message()),
              HasSubstr("vramlab.v1.ExperimentSpec.name: not valid UTF-8"));
}

// FLOAT16 on a CPU daemon is refused at submit instead of failing inside the worker.
TEST_F(DaemonAbuseTest, Float16OnTheCpuIsRefusedAtSubmit) {
  auto stub = daemon_->NewStub();
  vramlab::v1::ExperimentSpec spec = TinySpec();
  spec.mutable_training()->set_dtype(vramlab::v1::FLOAT16);
  auto submitted = Submit(*stub, spec);
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(submitted.status().message(),
            "spec.training.dtype: FLOAT16 needs a CUDA device; use FLOAT32 or BFLOAT16 on the CPU");
}

// Extreme numbers in the numeric fields of a submitted spec are each refused with a status naming
// the field; the daemon keeps serving and queues none of them.
TEST_F(DaemonAbuseTest, ExtremeNumbersInTheSpecAreRefusedNamingTheField) {
  auto stub = daemon_->NewStub();
  using Set = void (*)(vramlab::v1::ExperimentSpec&, int64_t);
  struct Field {
    const char* path;
    bool int64;
    Set set;
  };
  const std::vector<Field> fields = {
      {"spec.training.seq_len", false,
       [](auto& s, int64_t v) { s.mutable_training()->set_seq_len(static_cast<int32_t>(v)); }},
      {"spec.training.micro_batch_size", false,
       [](auto& s, int64_t v) {
         s.mutable_training()->set_micro_batch_size(static_cast<int32_t>(v));
       }},
      {"spec.training.steps", false,
       [](auto& s, int64_t v) { s.mutable_training()->set_steps(static_cast<int32_t>(v)); }},
      {"spec.training.grad_accum_steps", false,
       [](auto& s, int64_t v) {
         s.mutable_training()->set_grad_accum_steps(static_cast<int32_t>(v));
       }},
      {"spec.time_limit_seconds", false,
       [](auto& s, int64_t v) { s.set_time_limit_seconds(static_cast<int32_t>(v)); }},
      {"spec.parallel.world_size", false,
       [](auto& s, int64_t v) { s.mutable_parallel()->set_world_size(static_cast<int32_t>(v)); }},
      {"spec.sweep.values", false,
       [](auto& s, int64_t v) {
         s.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
         s.mutable_sweep()->add_values(static_cast<int32_t>(v));
       }},
      {"spec.memory.device_memory_limit_bytes", true,
       [](auto& s, int64_t v) { s.mutable_memory()->set_device_memory_limit_bytes(v); }},
  };
  for (const Field& field : fields) {
    const int64_t low =
        field.int64 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
    const int64_t high =
        field.int64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
    for (int64_t value : {low, int64_t{-1}, high}) {
      vramlab::v1::ExperimentSpec spec = TinySpec();
      field.set(spec, value);
      auto submitted = Submit(*stub, spec);
      ASSERT_FALSE(submitted.ok()) << field.path << " = " << value << " was queued";
      EXPECT_THAT(submitted.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                   absl::StatusCode::kFailedPrecondition))
          << submitted.status();
      EXPECT_THAT(std::string(submitted.status().message()), HasSubstr(field.path))
          << field.path << " = " << value;
    }
  }
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.queue_depth() + info.running(), 0);
  auto took = TimeList(*stub);
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_LT(*took, absl::Seconds(1));
}

// Idle TCP connections and clients that trickle the HTTP/2 preface a byte at a time and
// reconnect, on the gRPC port: each costs the daemon a descriptor, no thread, so ls keeps
// answering in under a second throughout.
TEST_F(DaemonAbuseTest, IdleAndTricklingConnectionsOnTheGrpcPortDoNotDelayCalls) {
  const int port = daemon_->grpc_port();
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectLoopback(port, "127.0.0." + std::to_string(2 + i % 50));
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> reconnects{0};
  std::vector<std::thread> tricklers;
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  for (int t = 0; t < 40; ++t) {
    tricklers.emplace_back([&, t] {
      while (!stop) {
        const int fd = ConnectLoopback(port, "127.0.1." + std::to_string(1 + t));
        if (fd < 0) return;
        for (size_t i = 0; i < preface.size() - 1 && !stop; ++i) {
          if (!SendAll(fd, preface.substr(i, 1))) break;
          absl::SleepFor(absl::Milliseconds(100));
        }
        close(fd);
        ++reconnects;
      }
    });
  }
  auto stub = daemon_->NewStub();
  absl::Duration slowest;
  int calls = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(4); absl::Now() < end; ++calls) {
    auto took = TimeList(*stub);
    ASSERT_TRUE(took.ok()) << took.status();
    slowest = std::max(slowest, *took);
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop = true;
  for (std::thread& trickler : tricklers) trickler.join();
  for (int fd : idle) close(fd);
  EXPECT_LT(slowest, absl::Seconds(1));
  EXPECT_GT(calls, 10);
  EXPECT_GT(reconnects.load(), 0);
  RecordProperty("slowest_ls_ms", static_cast<int>(absl::ToInt64Milliseconds(slowest)));
}

}  // namespace
}  // namespace vramlab::testing
