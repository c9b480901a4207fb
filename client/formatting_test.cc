// Text output that people read every day: spec summaries, anatomy and compare tables, tables'
// alignment, durations and percentages.
#include "client/anatomy_table.h"
#include "client/describe.h"
#include "client/experiment_details.h"
#include "client/text_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::v1::Experiment;
using vramlab::v1::MemoryAnatomy;

TEST(SpecSummaryTest, FillsDefaultsAndListsOnlySwitchesThatAreOn) {
  vramlab::v1::ExperimentSpec spec;
  spec.mutable_model()->set_preset("qwen2.5-1.5b");
  EXPECT_EQ(SpecSummary(spec), "qwen2.5-1.5b mb1 acc1 seq512 eager adamw");
  spec.mutable_training()->set_micro_batch_size(4);
  spec.mutable_training()->set_checkpoint_every_k_layers(1);
  spec.mutable_training()->set_loss(vramlab::v1::CHUNKED);
  spec.mutable_training()->set_kernels(vramlab::v1::FUSED);
  spec.mutable_training()->set_attention(vramlab::v1::SDPA);
  spec.mutable_training()->mutable_optimizer()->set_kind(vramlab::v1::ADAMW_FP32_MASTER);
  spec.mutable_memory()->set_device_memory_limit_bytes(int64_t{24} << 30);
  spec.mutable_memory()->mutable_allocator()->set_expandable_segments(true);
  spec.mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  for (int v : {512, 1024, 2048, 4096}) spec.mutable_sweep()->add_values(v);
  // The sweep stands for the field it varies: no "seq512" beside "sweep seq 512..4096".
  EXPECT_EQ(
      SpecSummary(spec),
      "qwen2.5-1.5b mb4 acc1 sdpa adamw-fp32-master ckpt:all loss:chunked kernels:fused expandable "
      "limit 24.00 GiB sweep seq 512..4096 (4)");
}

// A model given by its config (--model-config, a spec's model.config) reads as its family and
// size; a config without model_type is qwen2.
TEST(SpecSummaryTest, AConfigNamesItsFamily) {
  vramlab::v1::ExperimentSpec spec;
  auto* config = spec.mutable_model()->mutable_config();
  config->set_num_hidden_layers(80);
  config->set_hidden_size(8192);
  EXPECT_EQ(SpecSummary(spec), "qwen2 L80 h8192 mb1 acc1 seq512 eager adamw");
  config->set_model_type("llama");
  EXPECT_EQ(SpecSummary(spec), "llama L80 h8192 mb1 acc1 seq512 eager adamw");
}

// An adapter run names its adapter, so that it never reads like the full fine-tune of the same
// shapes: kind, rank and alpha with defaults filled, and the targets when they are not all seven.
TEST(SpecSummaryTest, AnAdapterRunNamesItsAdapter) {
  vramlab::v1::ExperimentSpec spec;
  spec.mutable_model()->set_preset("qwen2.5-7b");
  spec.mutable_training()->set_attention(vramlab::v1::SDPA);
  auto* adapter = spec.mutable_training()->mutable_adapter();
  adapter->set_kind(vramlab::v1::QLORA);
  adapter->set_rank(16);
  adapter->set_alpha(32);
  EXPECT_EQ(SpecSummary(spec), "qwen2.5-7b mb1 acc1 seq512 sdpa adamw qlora r16 a32");
  adapter->set_kind(vramlab::v1::LORA);
  adapter->clear_rank();
  adapter->clear_alpha();
  adapter->add_target_modules(vramlab::v1::Q_PROJ);
  adapter->add_target_modules(vramlab::v1::V_PROJ);
  EXPECT_EQ(SpecSummary(spec), "qwen2.5-7b mb1 acc1 seq512 sdpa adamw lora r8 a8 q,v");
  adapter->set_alpha(0.5);
  EXPECT_THAT(SpecSummary(spec), ::testing::HasSubstr("lora r8 a0.5 q,v"));
}

// A sweep whose variable is left unset sweeps the sequence length: it is described by its
// range, never by the base sequence length it replaces; a search by its bounds and step.
TEST(SpecSummaryTest, SweepsAndSearchesAreDescribedByTheirRange) {
  vramlab::v1::ExperimentSpec spec;
  spec.mutable_model()->set_preset("qwen2.5-1.5b");
  spec.mutable_training()->set_attention(vramlab::v1::SDPA);
  for (int v : {4096, 6144, 8192}) spec.mutable_sweep()->add_values(v);
  EXPECT_EQ(SpecSummary(spec), "qwen2.5-1.5b mb1 acc1 sdpa adamw sweep seq 4096,6144,8192");
  spec.mutable_sweep()->clear_values();
  spec.mutable_sweep()->set_mode(vramlab::v1::SEARCH_MAX);
  spec.mutable_sweep()->set_search_min(32768);
  spec.mutable_sweep()->set_search_max(196608);
  spec.mutable_sweep()->set_search_granularity(4096);
  EXPECT_EQ(SpecSummary(spec),
            "qwen2.5-1.5b mb1 acc1 sdpa adamw search max seq 32768..196608 by 4096");
  spec.mutable_sweep()->set_variable(vramlab::v1::MICRO_BATCH_SIZE);
  spec.mutable_sweep()->set_search_min(1);
  spec.mutable_sweep()->set_search_max(16);
  spec.mutable_sweep()->set_search_granularity(0);
  EXPECT_EQ(SpecSummary(spec), "qwen2.5-1.5b acc1 seq512 sdpa adamw search max mb 1..16");
}

// show's sweep table: each point's measured result next to its predicted verdict and peak,
// then where the prediction said the sweep would stop.
TEST(SweepTableTest, PredictedNextToMeasuredPerPoint) {
  Experiment e;
  for (int v : {4096, 8192}) e.mutable_spec()->mutable_sweep()->add_values(v);
  auto* fit = e.mutable_report()->add_sweep_points();
  fit->set_value(4096);
  fit->mutable_anatomy()->set_peak_allocated_bytes(int64_t{16} << 30);
  auto* oom = e.mutable_report()->add_sweep_points();
  oom->set_sweep_index(1);
  oom->set_value(8192);
  oom->set_oom(true);
  auto& prediction = *e.mutable_prediction();
  prediction.set_limit_bytes(int64_t{24} << 30);
  prediction.set_predicted_first_oom_value(8192);
  for (int v : {4096, 8192}) {
    auto* p = prediction.add_points();
    p->set_value(v);
    p->set_peak_allocated_bytes(int64_t{v / 512} << 30);
    p->set_verdict(v == 4096 ? vramlab::v1::FITS : vramlab::v1::TIGHT);
  }
  const std::string table = RenderSweepTable(e);
  EXPECT_THAT(table, ::testing::MatchesRegex(
                         "(.|\n)*\n +1 +4096 +fits +FITS +16.00 GiB +8.00 GiB (.|\n)*"));
  EXPECT_THAT(table, ::testing::MatchesRegex("(.|\n)*\n +2 +8192 +OOM +TIGHT +16.00 GiB\n(.|\n)*"));
  EXPECT_THAT(table, HasSubstr("predicted first point not to fit: 8192\n"));
}

// A search's report describes its answer, and its latest OOM another point: each stands next to
// that point's prediction (the daemon adds the points a search ran), not the first point's.
TEST(SweepTableTest, ASearchsAnatomyAndOomStandNextToTheirPointsPredictions) {
  Experiment e;
  auto* sweep = e.mutable_spec()->mutable_sweep();
  sweep->set_variable(vramlab::v1::SEQ_LEN);
  sweep->set_mode(vramlab::v1::SEARCH_MAX);
  sweep->set_search_min(512);
  sweep->set_search_max(65536);
  auto* report = e.mutable_report();
  report->set_largest_fitting_value(4096);
  report->mutable_anatomy()->set_peak_allocated_bytes(int64_t{20} << 30);
  report->mutable_anatomy()->set_activations_bytes(int64_t{9} << 30);
  auto* fit = report->add_sweep_points();
  fit->set_value(4096);
  fit->mutable_anatomy()->set_peak_allocated_bytes(int64_t{20} << 30);
  auto* oom = report->add_sweep_points();
  oom->set_sweep_index(1);
  oom->set_value(4608);
  oom->set_oom(true);
  e.mutable_oom()->set_sweep_index(1);
  e.mutable_oom()->mutable_memory()->set_allocated_bytes(int64_t{21} << 30);
  auto& prediction = *e.mutable_prediction();
  prediction.set_limit_bytes(int64_t{24} << 30);
  prediction.mutable_anatomy()->set_peak_allocated_bytes(int64_t{12} << 30);  // at 512
  prediction.mutable_anatomy()->set_activations_bytes(int64_t{1} << 29);
  for (int v : {4096, 4608}) {
    auto* p = prediction.add_points();
    p->set_value(v);
    p->set_peak_allocated_bytes(int64_t{v / 256} << 29);
    p->set_reserved_low_bytes(int64_t{v / 256 + 2} << 29);
    p->set_reserved_high_bytes(int64_t{v / 256 + 4} << 29);
    p->set_verdict(v == 4096 ? vramlab::v1::FITS : vramlab::v1::TIGHT);
    p->set_peak_phase(vramlab::v1::BACKWARD);
    p->mutable_anatomy()->set_peak_allocated_bytes(p->peak_allocated_bytes());
    p->mutable_anatomy()->set_activations_bytes(int64_t{v / 512} << 30);
  }
  const std::string text = RenderExperimentDetails(e);
  EXPECT_THAT(text, HasSubstr("memory anatomy at seq_len 4096:\n")) << text;
  // Activations: measured 9 GiB next to the 8 GiB predicted at 4096 (not the 0.5 GiB at 512).
  EXPECT_THAT(text, ::testing::MatchesRegex(
                        "(.|\n)*\nactivations +9.00 GiB +8.00 GiB +\\+1.00 GiB\n(.|\n)*"))
      << text;
  EXPECT_THAT(text, HasSubstr("predicted peak 8.00 GiB in backward at seq_len 4096; limit 24.00 "
                              "GiB: FITS (reserved 9.00 GiB .. 10.00 GiB)\n"));
  EXPECT_THAT(text, HasSubstr("; predicted 9.00 GiB and 10.00 GiB at seq_len 4608, TIGHT\n"));
  // Without the points' predictions (stored before the daemon added them) the search's OOM has no
  // prediction beside it, and the anatomy keeps the first point's.
  prediction.clear_points();
  const std::string old = RenderExperimentDetails(e);
  EXPECT_THAT(old, HasSubstr("memory anatomy:\n"));
  EXPECT_THAT(old, Not(HasSubstr("; predicted")));
}

TEST(DescribeTest, DurationsPercentagesAndTimestamps) {
  EXPECT_EQ(FormatSeconds(0.1234), "123 ms");
  EXPECT_EQ(FormatSeconds(12.34), "12.3 s");
  EXPECT_EQ(FormatSeconds(245), "4m05s");
  EXPECT_EQ(FormatSeconds(7380), "2h03m");
  EXPECT_EQ(FormatPercent(0.1234), "12.3%");
  google::protobuf::Timestamp t;
  EXPECT_EQ(FormatTimestamp(t), "-");
  t.set_seconds(1796020081);
  EXPECT_EQ(FormatTimestamp(t), "2026-11-30 06:28:01 UTC");
}

TEST(TextTableTest, AlignsByCodePointsAndTrimsTrailingSpace) {
  TextTable table({"name", "size"}, {TextTable::Align::kLeft, TextTable::Align::kRight});
  table.AddRow({"Δ weights", "1.00 GiB"});
  table.AddRow({"x", "2 B"});
  EXPECT_EQ(table.Render(),
            "name           size\n"
            "Δ weights  1.00 GiB\n"
            "x               2 B\n");
}

MemoryAnatomy Anatomy(int64_t weights, int64_t gradients, int64_t optimizer, int64_t activations) {
  MemoryAnatomy a;
  a.set_weights_bytes(weights);
  a.set_gradients_bytes(gradients);
  a.set_optimizer_state_bytes(optimizer);
  a.set_activations_bytes(activations);
  a.set_peak_allocated_bytes(weights + gradients + optimizer + activations);
  a.set_peak_reserved_bytes(weights + gradients + optimizer + activations);
  return a;
}

TEST(AnatomyTableTest, MeasuredNextToPredictedWithDifference) {
  const MemoryAnatomy measured = Anatomy(3 << 20, 3 << 20, 6 << 20, 10 << 20);
  const MemoryAnatomy predicted = Anatomy(3 << 20, 3 << 20, 6 << 20, 8 << 20);
  const std::string table = RenderAnatomyTable(&measured, &predicted);
  EXPECT_THAT(table,
              HasSubstr("category                   measured  predicted  measured-predicted\n"));
  EXPECT_THAT(table,
              HasSubstr("weights                    3.00 MiB   3.00 MiB                 0 B\n"));
  EXPECT_THAT(table,
              HasSubstr("activations               10.00 MiB   8.00 MiB           +2.00 MiB\n"));
  EXPECT_THAT(table,
              HasSubstr("peak allocated            22.00 MiB  20.00 MiB           +2.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("fragmentation                  0.0%\n"));
  const std::string predicted_only = RenderAnatomyTable(nullptr, &predicted);
  EXPECT_THAT(predicted_only, ::testing::StartsWith("category           predicted\n"));
}

Experiment Finished(const std::string& id, int32_t accum, const MemoryAnatomy& anatomy,
                    double step) {
  Experiment e;
  e.set_id(id);
  e.set_state(Experiment::SUCCEEDED);
  e.mutable_spec()->mutable_model()->set_preset("tiny");
  e.mutable_spec()->mutable_training()->set_grad_accum_steps(accum);
  *e.mutable_report()->mutable_anatomy() = anatomy;
  e.mutable_report()->set_median_step_time_seconds(step);
  e.mutable_report()->set_tokens_per_second(1000 / step);
  e.mutable_report()->set_steady_steps(accum + 1);
  e.mutable_report()->set_warmup_steps(1);
  e.mutable_report()->set_warmup_step_time_seconds(step * 3);
  return e;
}

TEST(CompareTableTest, ColumnsPerExperimentAndDifferencesToTheFirst) {
  Experiment oom;
  oom.set_id("exp-3");
  oom.set_state(Experiment::OOM);
  oom.mutable_oom()->set_phase(vramlab::v1::BACKWARD);
  const std::string table = RenderCompareTable(
      {Finished("exp-1", 1, Anatomy(1 << 20, 1 << 20, 2 << 20, 8 << 20), 0.1),
       Finished("exp-2", 4, Anatomy(1 << 20, 1 << 20, 2 << 20, 2 << 20), 0.4), oom});
  EXPECT_THAT(table, HasSubstr("exp-1  -     SUCCEEDED                               tiny mb1 acc1 "
                               "seq512 eager adamw\n"));
  EXPECT_THAT(table, HasSubstr("exp-3  -     OOM in backward (step 0, micro-step 0)"));
  EXPECT_THAT(table, HasSubstr("category                      exp-1     exp-2  exp-3  exp-2 vs "
                               "exp-1  exp-3 vs exp-1\n"));
  EXPECT_THAT(table, HasSubstr("activations                8.00 MiB  2.00 MiB      -       -6.00 "
                               "MiB               -\n"));
  EXPECT_THAT(table, HasSubstr("step time (steady)           100 ms    400 ms      -           "
                               "x4.00               -\n"));
  EXPECT_THAT(table, HasSubstr("steady steps                      2         5      -\n"));
  // An OOM report without the allocator's state shows no made-up zeros.
  EXPECT_THAT(table, HasSubstr("OOM: allocated                    -         -      -\n"));
  EXPECT_THAT(table, HasSubstr("OOM: request                      -         -    0 B\n"));
}

TEST(StepTimeSummaryTest, SaysHowManySteadyStepsTheMedianRestsOn) {
  EXPECT_EQ(StepTimeSummary(0.105, 3, 1, 1.2), "105 ms (median of 3 steady steps)");
  EXPECT_EQ(StepTimeSummary(0.105, 1, 1, 1.2), "105 ms (one steady step)");
  EXPECT_EQ(StepTimeSummary(0, 0, 1, 1.2), "no steady step (the warm-up step took 1.2 s)");
  // A report stored before the warm-up was left out.
  EXPECT_EQ(StepTimeSummary(0.105, 0, 0, 0), "105 ms (median, warm-up step included)");
  EXPECT_EQ(TokensPerSecondSummary(1000, 3, 1), "1000");
  EXPECT_EQ(TokensPerSecondSummary(0, 0, 1), "-");
}

TEST(AnatomyTableTest, AdapterCategoriesAppearOnlyWhenARunHasThem) {
  MemoryAnatomy full = Anatomy(1 << 20, 1 << 20, 2 << 20, 8 << 20);
  EXPECT_THAT(RenderAnatomyTable(&full, nullptr), ::testing::Not(HasSubstr("adapter weights")));
  MemoryAnatomy lora = full;
  lora.set_adapter_weights_bytes(64 << 10);
  lora.set_quantization_constants_bytes(3 << 10);
  const std::string table = RenderAnatomyTable(&lora, nullptr);
  EXPECT_THAT(table, HasSubstr("adapter weights           64.00 KiB\n"));
  EXPECT_THAT(table, HasSubstr("quantization constants     3.00 KiB\n"));
}

TEST(CompareTableTest, AnOomRunShowsItsFiguresAtTheFailureNextToThePrediction) {
  Experiment oom;
  oom.set_id("exp-2");
  oom.set_state(Experiment::OOM);
  oom.mutable_spec()->mutable_sweep()->set_variable(vramlab::v1::SEQ_LEN);
  oom.mutable_spec()->mutable_sweep()->add_values(64);
  oom.mutable_spec()->mutable_sweep()->add_values(128);
  auto* report = oom.mutable_oom();
  report->set_phase(vramlab::v1::BACKWARD);
  report->set_sweep_index(1);
  report->set_requested_bytes(3 << 20);
  report->set_free_bytes(1 << 20);
  report->mutable_memory()->set_allocated_bytes(19 << 20);
  report->mutable_memory()->set_reserved_bytes(19 << 20);
  report->mutable_memory()->set_peak_allocated_bytes(19 << 20);
  report->mutable_memory()->set_peak_reserved_bytes(20 << 20);
  oom.mutable_prediction()->mutable_anatomy()->set_peak_allocated_bytes(22 << 20);
  oom.mutable_prediction()->mutable_anatomy()->set_peak_reserved_bytes(22 << 20);
  const std::string table = RenderCompareTable(
      {Finished("exp-1", 1, Anatomy(1 << 20, 1 << 20, 2 << 20, 8 << 20), 0.1), oom});
  // One sweep-point numbering everywhere a person reads it: from 1.
  EXPECT_THAT(table, HasSubstr("OOM in backward (step 0, micro-step 0, sweep point 2)"));
  EXPECT_THAT(table, HasSubstr("peak allocated            12.00 MiB  19.00 MiB       +7.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("peak reserved             12.00 MiB  20.00 MiB       +8.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("predicted peak allocated          -  22.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("OOM: request                      -   3.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("OOM: free                         -   1.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("OOM: allocated                    -  19.00 MiB\n"));
  EXPECT_THAT(table, HasSubstr("weights                    1.00 MiB          -               -\n"));
}

}  // namespace
}  // namespace vramlab::client
