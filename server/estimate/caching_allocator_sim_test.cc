// Replays the allocator traces in testdata/estimator/traces/ (format: that folder's README.md)
// through CachingAllocatorSim and checks every segment the trace says was mapped or released,
// every out-of-memory, and every stated reading.
#include "server/estimate/caching_allocator_sim.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace vramlab::server::estimate {
namespace {

const std::string kTraceDir = std::string(VRAMLAB_SOURCE_DIR) + "/testdata/estimator/traces";

std::vector<std::string> TraceFiles() {
  std::vector<std::string> files;
  if (DIR* dir = opendir(kTraceDir.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 6 && name.substr(name.size() - 6) == ".trace") files.push_back(name);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

AllocatorSimConfig ParseConfig(std::istringstream& words) {
  AllocatorSimConfig config;
  std::string item;
  while (words >> item) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const int64_t value = std::stoll(item.substr(eq + 1));
    if (key == "limit") config.limit = value;
    if (key == "expandable") config.expandable_segments = value != 0;
    if (key == "max_split_size") config.max_split_size = value;
    if (key == "segments_above") {
      config.segment_placement =
          value != 0 ? SegmentPlacement::kAboveEarlier : SegmentPlacement::kBelowEarlier;
    }
  }
  return config;
}

// Replays one trace; every failed expectation is reported with its line. Recorded segments are
// placed at their recorded addresses unless `place_segments` is false: then the simulator's own
// placement decides best fit's ties.
void Replay(const std::string& name, bool place_segments = true) {
  std::ifstream in(kTraceDir + "/" + name);
  ASSERT_TRUE(in) << name;
  std::unique_ptr<CachingAllocatorSim> sim;
  AllocatorSimConfig config;
  std::vector<int64_t> expect_mapped, expect_released;
  std::string line;
  int number = 0, checks = 0;
  auto compare_segments = [&](const SegmentEvents& did, const std::string& where) {
    EXPECT_EQ(did.mapped, expect_mapped) << where << ": segments mapped";
    EXPECT_EQ(did.released, expect_released) << where << ": segments released";
    expect_mapped.clear();
    expect_released.clear();
    ++checks;
  };
  while (std::getline(in, line)) {
    ++number;
    const std::string where = name + ":" + std::to_string(number) + ": " + line;
    std::istringstream words(line);
    std::string op;
    if (!(words >> op) || op[0] == '#') continue;
    if (op == "config") {
      config = ParseConfig(words);
      sim = std::make_unique<CachingAllocatorSim>(config);
      continue;
    }
    if (sim == nullptr) sim = std::make_unique<CachingAllocatorSim>(AllocatorSimConfig{});
    if (op == "segment_alloc" || op == "segment_free") {
      int64_t bytes = 0, address = 0;
      ASSERT_TRUE(words >> bytes) << where;
      (op == "segment_alloc" ? expect_mapped : expect_released).push_back(bytes);
      // A recorded segment's address: placed where the device placed it.
      if (op == "segment_alloc" && words >> address && !config.expandable_segments &&
          place_segments) {
        sim->QueueSegmentAddress(address);
      }
    } else if (op == "alloc") {
      int64_t id = 0, bytes = 0;
      ASSERT_TRUE(words >> id >> bytes) << where;
      SegmentEvents did;
      EXPECT_TRUE(sim->Malloc(id, bytes, &did)) << where << ": ran out of memory";
      compare_segments(did, where);
    } else if (op == "oom") {
      int64_t bytes = 0;
      ASSERT_TRUE(words >> bytes) << where;
      SegmentEvents did;
      EXPECT_FALSE(sim->Malloc(-number, bytes, &did)) << where << ": did not run out of memory";
      compare_segments(did, where);
    } else if (op == "free") {
      int64_t id = 0;
      ASSERT_TRUE(words >> id) << where;
      EXPECT_TRUE(sim->Free(id)) << where << ": not live";
    } else if (op == "empty_cache") {
      SegmentEvents did;
      sim->EmptyCache(&did);
      compare_segments(did, where);
    } else if (op == "check") {
      std::string item;
      while (words >> item) {
        const size_t eq = item.find('=');
        const std::string key = item.substr(0, eq);
        const int64_t value = std::stoll(item.substr(eq + 1));
        if (key == "allocated")
          EXPECT_EQ(sim->allocated(), value) << where;
        else if (key == "reserved")
          EXPECT_EQ(sim->reserved(), value) << where;
        else if (key == "peak_reserved")
          EXPECT_EQ(sim->peak_reserved(), value) << where;
        else if (key == "peak_allocated")
          EXPECT_EQ(sim->peak_allocated(), value) << where;
        else if (key == "inactive_split")
          EXPECT_EQ(sim->inactive_split(), value) << where;
        else
          ADD_FAILURE() << where << ": unknown reading " << key;
        ++checks;
      }
    } else {
      ADD_FAILURE() << where << ": unknown operation " << op;
    }
  }
  EXPECT_TRUE(expect_mapped.empty() && expect_released.empty())
      << name << ": segment lines after the last allocation";
  EXPECT_GT(checks, 0) << name << ": checks nothing";
}

TEST(CachingAllocatorSimTest, EveryCommittedTraceReplays) {
  const std::vector<std::string> files = TraceFiles();
  ASSERT_FALSE(files.empty()) << kTraceDir;
  for (const std::string& name : files) {
    SCOPED_TRACE(name);
    Replay(name);
  }
}

// The estimator's replays know no addresses. Placing each new segment below the earlier ones,
// as the device mostly did, reproduces these recorded runs segment for segment all the same; with
// growing addresses (SegmentPlacement::kAboveEarlier) the whole-model run's ties went the other way
// and its peak reserved came out 2.9 % low. (The LoRA and Qwen3 runs' small pool is placed
// differently without its addresses: the device fits its 2 MiB segments into gaps between large
// ones. Their peak reserved comes out +2 MiB and exact.)
TEST(CachingAllocatorSimTest, RecordedRunsReplayWithoutTheirAddresses) {
  for (const char* name :
       {"recorded_native.trace", "recorded_oom.trace", "recorded_longest_native.trace",
        "recorded_lora8b_native.trace", "recorded_adamw8bit.trace"}) {
    SCOPED_TRACE(name);
    Replay(name, /*place_segments=*/false);
  }
}

TEST(CachingAllocatorSimTest, RoundingRules) {
  EXPECT_EQ(CachingAllocatorSim::RoundSize(1), 512);
  EXPECT_EQ(CachingAllocatorSim::RoundSize(513), 1024);
  EXPECT_EQ(CachingAllocatorSim::SegmentSize(1 << 20), 2 << 20);
  EXPECT_EQ(CachingAllocatorSim::SegmentSize((1 << 20) + 512), 20 << 20);
  EXPECT_EQ(CachingAllocatorSim::SegmentSize((10 << 20) - 512), 20 << 20);
  EXPECT_EQ(CachingAllocatorSim::SegmentSize(10 << 20), 10 << 20);
  EXPECT_EQ(CachingAllocatorSim::SegmentSize((10 << 20) + 512), 12 << 20);
}

}  // namespace
}  // namespace vramlab::server::estimate
