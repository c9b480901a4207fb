#include "client/spec_builder.h"

#include <cstdio>
#include <fstream>

#include "client/commands.h"
#include "common/spec/resolve_spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::ExperimentSpec;

absl::StatusOr<ExperimentSpec> Build(const std::vector<std::string>& argv) {
  FlagSet flags("submit", "test");
  AddSpecFlags(flags);
  auto parsed = flags.Parse(argv);
  if (!parsed.ok()) return parsed.status();
  return BuildSpec(*parsed);
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(BuildSpecTest, TheLabReportsSadPathFromFlags) {
  auto spec = Build({"--preset", "qwen2.5-1.5b", "--micro-batch", "4", "--accum", "1", "--seq-len",
                     "512", "--attention", "eager", "--optimizer", "adamw", "--memory-limit",
                     "24GiB", "--name", "sad path"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "sad path");
  EXPECT_EQ(spec->model().preset(), "qwen2.5-1.5b");
  EXPECT_EQ(spec->training().micro_batch_size(), 4);
  EXPECT_EQ(spec->training().grad_accum_steps(), 1);
  EXPECT_EQ(spec->training().seq_len(), 512);
  EXPECT_EQ(spec->training().attention(), vramlab::v1::EAGER);
  EXPECT_EQ(spec->training().optimizer().kind(), vramlab::v1::ADAMW);
  EXPECT_EQ(spec->memory().device_memory_limit_bytes(), int64_t{24} << 30);
  EXPECT_FALSE(spec->has_sweep());
}

TEST(BuildSpecTest, EveryMemorySwitch) {
  auto spec = Build({"--checkpointing",
                     "every:2",
                     "--loss",
                     "chunked",
                     "--loss-chunk",
                     "256",
                     "--kernels",
                     "fused",
                     "--optimizer",
                     "adamw-8bit",
                     "--offload",
                     "--optimizer-in-backward",
                     "--delayed-update",
                     "--dtype",
                     "fp32",
                     "--alloc-conf",
                     "expandable_segments:True,max_split_size_mb:128,"
                     "garbage_collection_threshold:0.6,roundup_power2_divisions:4",
                     "--priority",
                     "high",
                     "--time-limit",
                     "1h30m",
                     "--sample-interval",
                     "5",
                     "--record-history"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& t = spec->training();
  EXPECT_EQ(t.checkpoint_every_k_layers(), 2);
  EXPECT_EQ(t.loss(), vramlab::v1::CHUNKED);
  EXPECT_EQ(t.loss_chunk_tokens(), 256);
  EXPECT_EQ(t.kernels(), vramlab::v1::FUSED);
  EXPECT_EQ(t.optimizer().kind(), vramlab::v1::ADAMW_8BIT);
  EXPECT_TRUE(t.optimizer().offload_to_cpu());
  EXPECT_TRUE(t.optimizer().in_backward());
  EXPECT_TRUE(t.optimizer().delayed_update());
  EXPECT_EQ(t.dtype(), vramlab::v1::FLOAT32);
  const auto& a = spec->memory().allocator();
  EXPECT_TRUE(a.expandable_segments());
  EXPECT_EQ(a.max_split_size_mb(), 128);
  EXPECT_DOUBLE_EQ(a.garbage_collection_threshold(), 0.6);
  EXPECT_EQ(a.extra(), "roundup_power2_divisions:4");
  EXPECT_EQ(spec->priority(), vramlab::v1::PRIORITY_HIGH);
  EXPECT_EQ(spec->time_limit_seconds(), 5400);
  EXPECT_EQ(spec->memory().sample_interval_ms(), 5);
  EXPECT_TRUE(spec->memory().record_history());
}

TEST(BuildSpecTest, CheckpointingSpellings) {
  EXPECT_EQ(Build({"--checkpointing", "all"})->training().checkpoint_every_k_layers(), 1);
  EXPECT_EQ(Build({"--checkpointing", "none"})->training().checkpoint_every_k_layers(), 0);
  EXPECT_FALSE(Build({"--checkpointing", "every:0"}).ok());
  EXPECT_FALSE(Build({"--checkpointing", "sometimes"}).ok());
}

TEST(BuildSpecTest, SweepsAndSearches) {
  auto list = Build({"--sweep-seq-lens", "512,1024,2048"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->sweep().variable(), vramlab::v1::SEQ_LEN);
  EXPECT_EQ(list->sweep().mode(), vramlab::v1::LIST);
  EXPECT_THAT(list->sweep().values(), ::testing::ElementsAre(512, 1024, 2048));

  auto batches = Build({"--sweep-batches", "1,2,4"});
  EXPECT_EQ(batches->sweep().variable(), vramlab::v1::MICRO_BATCH_SIZE);

  auto search = Build({"--search-max-seq", "512:32768:512"});
  ASSERT_TRUE(search.ok()) << search.status();
  EXPECT_EQ(search->sweep().mode(), vramlab::v1::SEARCH_MAX);
  EXPECT_EQ(search->sweep().search_min(), 512);
  EXPECT_EQ(search->sweep().search_max(), 32768);
  EXPECT_EQ(search->sweep().search_granularity(), 512);
  EXPECT_FALSE(search->sweep().plain_bisection());

  auto plain = Build({"--search-max-seq", "512:32768:512", "--plain-bisection"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->sweep().plain_bisection());
  auto plain_without_search = Build({"--sweep-seq-lens", "512", "--plain-bisection"});
  ASSERT_FALSE(plain_without_search.ok());
  EXPECT_EQ(plain_without_search.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plain_without_search.status().message()), HasSubstr("--plain-bisection"));

  EXPECT_FALSE(Build({"--search-max-seq", "4096:512"}).ok());
  EXPECT_FALSE(Build({"--sweep-seq-lens", "512,abc"}).ok());
  auto both = Build({"--sweep-seq-lens", "512", "--sweep-batches", "1"});
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("exclude each other"));
}

TEST(BuildSpecTest, ErrorsNameTheFlag) {
  for (const auto& [argv, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--micro-batch", "0"}, "--micro-batch"},
           {{"--seq-len", "long"}, "--seq-len"},
           {{"--attention", "flash"}, "--attention"},
           {{"--optimizer", "adam"}, "--optimizer"},
           {{"--memory-limit", "lots"}, "--memory-limit"},
           {{"--alloc-conf", "expandable_segments"}, "--alloc-conf"},
           {{"--alloc-conf", "garbage_collection_threshold:2"}, "--alloc-conf"},
           {{"--time-limit", "soon"}, "--time-limit"},
           {{"--priority", "urgent"}, "--priority"}}) {
    auto spec = Build(argv);
    ASSERT_FALSE(spec.ok()) << argv[0];
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(flag));
  }
}

TEST(BuildSpecTest, LoraAndQloraFlags) {
  auto lora =
      Build({"--preset", "qwen2.5-7b", "--lora", "r=16,alpha=32,dropout=0.05,targets=q,k,v,down"});
  ASSERT_TRUE(lora.ok()) << lora.status();
  const vramlab::v1::AdapterSpec& a = lora->training().adapter();
  EXPECT_EQ(a.kind(), vramlab::v1::LORA);
  EXPECT_EQ(a.rank(), 16);
  EXPECT_EQ(a.alpha(), 32);
  EXPECT_EQ(a.dropout(), 0.05);
  ASSERT_EQ(a.target_modules_size(), 4);
  EXPECT_EQ(a.target_modules(0), vramlab::v1::Q_PROJ);
  EXPECT_EQ(a.target_modules(3), vramlab::v1::DOWN_PROJ);
  EXPECT_EQ(a.dtype(), vramlab::v1::DTYPE_UNSPECIFIED);

  auto all = Build({"--lora", "r=16,alpha=32,targets=all"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->training().adapter().target_modules_size(), 0);  // empty means all seven

  auto qlora = Build({"--qlora", "r=16,alpha=32,dtype=bf16,targets=gate_proj,up_proj"});
  ASSERT_TRUE(qlora.ok()) << qlora.status();
  EXPECT_EQ(qlora->training().adapter().kind(), vramlab::v1::QLORA);
  EXPECT_EQ(qlora->training().adapter().dtype(), vramlab::v1::BFLOAT16);
  EXPECT_EQ(qlora->training().adapter().target_modules_size(), 2);

  auto defaults = Build({"--lora", "default"});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->training().adapter().kind(), vramlab::v1::LORA);
  EXPECT_EQ(defaults->training().adapter().rank(), 0);  // the daemon's default (8)
}

TEST(BuildSpecTest, BadAdapterFlagsNameTheFlag) {
  for (const auto& [argv, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--lora", "r=0"}, "--lora r"},
           {{"--lora", "r=sixteen"}, "--lora r"},
           {{"--lora", "alpha=-1"}, "alpha must be > 0"},
           {{"--lora", "dropout=1"}, "dropout must be in [0, 1)"},
           {{"--lora", "targets=q,lm_head"}, "unknown target \"lm_head\""},
           {{"--qlora", "rank=4,bias=all"}, "unknown key \"bias\""},
           {{"--qlora", "16"}, "\"16\" is not key=value"},
           {{"--lora", "r=4", "--qlora", "r=4"}, "exclude each other"}}) {
    auto spec = Build(argv);
    ASSERT_FALSE(spec.ok()) << argv[1];
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(words)) << argv[1];
  }
}

TEST(BuildSpecTest, FlagsOverrideASpecFileInJson) {
  const std::string path = WriteTemp("spec.json", R"({
    "name": "from file",
    "model": {"preset": "qwen2.5-1.5b"},
    "training": {"microBatchSize": 4, "gradAccumSteps": 1, "seqLen": 512},
    "memory": {"deviceMemoryLimitBytes": "25769803776"}
  })");
  auto spec = Build({"--spec", path, "--micro-batch", "1", "--accum", "4"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "from file");
  EXPECT_EQ(spec->training().micro_batch_size(), 1);
  EXPECT_EQ(spec->training().grad_accum_steps(), 4);
  EXPECT_EQ(spec->training().seq_len(), 512);
  EXPECT_EQ(spec->memory().device_memory_limit_bytes(), int64_t{24} << 30);
}

TEST(BuildSpecTest, ReadsProtobufTextFormat) {
  const std::string path = WriteTemp("spec.txtpb", R"(
    name: "text"
    model { preset: "tiny" }
    training { micro_batch_size: 2 attention: SDPA }
  )");
  auto spec = Build({"--spec", path});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "text");
  EXPECT_EQ(spec->training().attention(), vramlab::v1::SDPA);
}

TEST(BuildSpecTest, BadSpecFilesSayWhereAndWhy) {
  auto unknown_json = ParseSpecText(R"({"training": {"microBatch": 4}})", "a.json");
  EXPECT_EQ(unknown_json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown_json.status().message()), HasSubstr("a.json"));
  auto bad_text = ParseSpecText("training { micro_batch_size: \"four\" }", "b.txtpb");
  EXPECT_THAT(std::string(bad_text.status().message()), HasSubstr("b.txtpb: "));
  EXPECT_THAT(std::string(bad_text.status().message()), HasSubstr("line 1"));
  auto missing = Build({"--spec", "/nonexistent/spec.json"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/spec.json"));
}

// Every ready-made experiment in experiments/ must parse and pass the daemon's rules for the
// device it is written for (seed: a GPU, cpu: the CPU), so the README's commands work.
TEST(ReadyMadeExperimentsTest, EverySpecFileParsesAndIsValid) {
  int parsed = 0;
  for (const char* dir : {"/experiments/seed/", "/experiments/cpu/"}) {
    spec_rules::ResolveContext context;
    context.device = std::string(dir) == "/experiments/seed/" ? plain::DeviceKind::kCuda
                                                              : plain::DeviceKind::kCpu;
    const std::string listing_path = ::testing::TempDir() + "/listing";
    const std::string command =
        std::string("ls ") + VRAMLAB_SOURCE_DIR + dir + "*.json > " + listing_path + " 2>/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << dir;
    std::ifstream listing(listing_path);
    for (std::string path; std::getline(listing, path);) {
      auto spec = LoadSpecFile(path);
      EXPECT_TRUE(spec.ok()) << spec.status();
      if (!spec.ok()) continue;
      plain::ExperimentSpec resolved = plain::FromProto(*spec);
      const std::optional<spec_rules::SpecProblem> problem =
          spec_rules::ResolveAndValidate(resolved, context);
      EXPECT_FALSE(problem.has_value()) << path << ": " << problem->Text();
      ++parsed;
    }
  }
  EXPECT_GE(parsed, 10);
}

}  // namespace
}  // namespace vramlab::client
