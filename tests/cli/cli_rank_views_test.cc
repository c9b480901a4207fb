// The real `vramlab` binary on parallel runs: `show`, `ls`, `compare`, `report` and `watch`
// against a stand-in daemon on loopback that answers with the synthesized Experiment protos of
// client/testdata/ranks (a 2-rank SHARD_FULL success, a 2-rank OOM decided by rank 1, a
// one-process run), as the daemon will once it runs parallel runs. The text must be the golden
// files' (client.rank_views_golden_test renders them from the same protos), `--json` the proto's
// JSON, and `watch` must name the rank of each worker line.
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;

const std::string kDir = std::string(VRAMLAB_SOURCE_DIR) + "/client/testdata/ranks/";

Experiment Load(const std::string& name) {
  Experiment experiment;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      ReadWholeFile(kDir + name + ".textproto"), &experiment))
      << name;
  return experiment;
}

// Answers GetExperiment, ListExperiments (in the order given, one page) and WatchExperiment (the
// recorded events of an experiment after the sequence asked for, then the end of the stream).
class StandInDaemon final : public vramlab::v1::VramlabService::Service {
 public:
  StandInDaemon(std::vector<Experiment> experiments,
                std::map<std::string, std::vector<ExperimentEvent>> events)
      : experiments_(std::move(experiments)), events_(std::move(events)) {}

  grpc::Status GetExperiment(grpc::ServerContext*, const vramlab::v1::GetExperimentRequest* request,
                             Experiment* response) override {
    for (const Experiment& e : experiments_) {
      if (e.id() == request->id()) {
        *response = e;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no experiment " + request->id());
  }

  grpc::Status ListExperiments(grpc::ServerContext*, const vramlab::v1::ListExperimentsRequest*,
                               vramlab::v1::ListExperimentsResponse* response) override {
    for (const Experiment& e : experiments_) *response->add_experiments() = e;
    return grpc::Status::OK;
  }

  grpc::Status WatchExperiment(grpc::ServerContext*,
                               const vramlab::v1::WatchExperimentRequest* request,
                               grpc::ServerWriter<ExperimentEvent>* writer) override {
    const auto found = events_.find(request->id());
    if (found == events_.end()) return grpc::Status::OK;
    for (const ExperimentEvent& event : found->second) {
      if (event.sequence() > request->after_sequence()) writer->Write(event);
    }
    return grpc::Status::OK;
  }

 private:
  std::vector<Experiment> experiments_;
  std::map<std::string, std::vector<ExperimentEvent>> events_;
};

// The OOM run's life as the daemon streams it: running, a step of each rank, rank 1's OOM, the
// end.
std::vector<ExperimentEvent> OomRunEvents() {
  std::vector<ExperimentEvent> events(5);
  events[0].mutable_state_change()->set_state(Experiment::RUNNING);
  for (int rank = 0; rank < 2; ++rank) {
    vramlab::v1::WorkerEvent* step = events[1 + rank].mutable_worker_event();
    step->set_rank(rank);
    step->mutable_step()->set_loss(10.93);
    step->mutable_step()->set_peak_allocated_bytes(int64_t{3} << 30);
  }
  events[3].mutable_worker_event()->set_rank(1);
  *events[3].mutable_worker_event()->mutable_oom() = Load("two_rank_oom").oom();
  events[4].mutable_state_change()->set_state(Experiment::OOM);
  events[4].mutable_state_change()->set_reason("rank 1 ran out of memory");
  for (size_t i = 0; i < events.size(); ++i) events[i].set_sequence(static_cast<int64_t>(i) + 1);
  return events;
}

class CliRankViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = std::make_unique<StandInDaemon>(
        std::vector<Experiment>{Load("two_rank_oom"), Load("shard_full_success"),
                                Load("one_process")},
        std::map<std::string, std::vector<ExperimentEvent>>{{"exp-000102", OomRunEvents()}});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    addr_ = "--addr=127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  CliResult Run(std::vector<std::string> args) const {
    args.push_back(addr_);
    return RunCli(args);
  }

  std::unique_ptr<StandInDaemon> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string addr_;
};

TEST_F(CliRankViewsTest, ShowLsCompareAndReportPrintTheGoldenText) {
  const struct {
    std::vector<std::string> args;
    const char* golden;
  } cases[] = {
      {{"show", "exp-000101"}, "show_success.golden"},
      {{"show", "exp-000102"}, "show_failure.golden"},
      {{"ls"}, "ls.golden"},
      {{"compare", "exp-000100", "exp-000101", "exp-000102"}, "compare.golden"},
      {{"report", "exp-000101"}, "report_success.golden"},
  };
  for (const auto& c : cases) {
    const CliResult result = Run(c.args);
    ASSERT_EQ(result.exit_code, 0) << Describe(result);
    EXPECT_EQ(result.out, ReadWholeFile(kDir + c.golden)) << c.golden << "\n" << Describe(result);
  }
}

TEST_F(CliRankViewsTest, ShowJsonIsTheProtosJson) {
  const CliResult result = Run({"show", "--json", "exp-000102"});
  ASSERT_EQ(result.exit_code, 0) << Describe(result);
  Experiment shown;
  ASSERT_TRUE(ParseJson(result.out, shown));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(shown, Load("two_rank_oom")))
      << result.out;
  EXPECT_THAT(result.out, HasSubstr("\"decidingRank\": 1"));
}

TEST_F(CliRankViewsTest, WatchNamesTheRankOfEachWorkerLine) {
  const CliResult result = Run({"watch", "exp-000102"});
  EXPECT_EQ(result.exit_code, 3) << Describe(result);  // OOM
  EXPECT_THAT(result.out, HasSubstr("exp-000102 rank 0: step 1/3 loss 10.9300"));
  EXPECT_THAT(result.out, HasSubstr("exp-000102 rank 1: step 1/3 loss 10.9300"));
  EXPECT_THAT(result.out, HasSubstr("exp-000102 rank 1: OOM in backward (step 0, micro-step 0): "
                                    "tried to allocate 260.00 MiB"));
  // The outcome ends with the per-rank table and the deciding rank.
  EXPECT_THAT(result.out, HasSubstr("ranks: world size 2, sharding full+reshard, slots 2×[0,1]\n"));
  EXPECT_THAT(result.out,
              HasSubstr("deciding rank: 1 on slot 1: OOM in backward (step 0, micro-step 0)\n"));
}

}  // namespace
}  // namespace vramlab::cli_test
