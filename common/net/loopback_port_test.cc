#include "common/net/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace vramlab::net {
namespace {

// Whether 127.0.0.1:`port` can be listened on now.
bool CanListen(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = fd >= 0 &&
                  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  listen(fd, 1) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

TEST(LoopbackPortTest, PicksListenablePortsBelowTheEphemeralRangeNeverTheSameTwice) {
  const auto [low, high] = EphemeralPortRange();
  ASSERT_LE(low, high);
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    std::string error;
    const int port = PickFreeLoopbackPort(&error);
    ASSERT_NE(port, 0) << error;
    EXPECT_TRUE(seen.insert(port).second) << port << " handed out twice";
    EXPECT_GE(port, 10000);
    if (low > 10000) EXPECT_LT(port, low) << "inside the ephemeral range " << low << ".." << high;
    EXPECT_TRUE(CanListen(port)) << port;
  }
}

}  // namespace
}  // namespace vramlab::net
