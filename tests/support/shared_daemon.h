// One real daemon for every test of a suite: started before its first test with
// `Suite::DaemonFlags()` (no metrics exporter), stopped after its last; each test gets a stub to
// it, a new one after a restart being the test's to make.
#ifndef VRAMLAB_TESTS_SUPPORT_SHARED_DAEMON_H_
#define VRAMLAB_TESTS_SUPPORT_SHARED_DAEMON_H_

#include <memory>

#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {

template <typename Suite>
class SharedDaemonSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto daemon =
        DaemonHarness::Start({.extra_flags = Suite::DaemonFlags(), .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->NewStub();
  }

  static inline DaemonHarness* daemon_ = nullptr;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_SHARED_DAEMON_H_
