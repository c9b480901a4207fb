#include "worker/parallel/rank_group.h"

#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef VRAMLAB_WITH_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef VRAMLAB_WITH_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace vramlab::worker {
namespace {

constexpr char kWorldSizeField[] = "parallel.world_size";

// The collectives of one concrete c10d process group. Templated on the class rather than typed
// by its base, which is c10d::ProcessGroup in LibTorch 1.13 and c10d::Backend from 2.0 on.
template <typename Group>
class C10dRankGroup : public RankGroup {
 public:
  C10dRankGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group, int rank, int world_size,
                std::string name, torch::Device device)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        world_size_(world_size),
        name_(std::move(name)),
        device_(device) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return name_; }

  void AllReduceSum(const std::vector<torch::Tensor>& tensors) override {
    LaunchEachThenWait(tensors, [this](const torch::Tensor& t) {
      std::vector<at::Tensor> one{t};
      return group_->allreduce(one, c10d::AllreduceOptions{});
    });
  }

  void ReduceSum(const std::vector<RootedTensor>& tensors) override {
    LaunchEachThenWait(tensors, [this](const RootedTensor& rooted) {
      std::vector<at::Tensor> one{rooted.first};
      c10d::ReduceOptions options;
      options.rootRank = rooted.second;
      return group_->reduce(one, options);
    });
  }

  void Broadcast(const std::vector<RootedTensor>& tensors) override {
    LaunchEachThenWait(tensors, [this](const RootedTensor& rooted) {
      std::vector<at::Tensor> one{rooted.first};
      c10d::BroadcastOptions options;
      options.rootRank = rooted.second;
      return group_->broadcast(one, options);
    });
  }

  double MeanOverRanks(double value) override {
    torch::Tensor t = torch::full({1}, value, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
    AllReduceSum({t});
    return t.item<double>() / world_size_;
  }

 private:
  // One collective per item, all launched before the first is waited for.
  template <typename Item, typename Launch>
  static void LaunchEachThenWait(const std::vector<Item>& items, Launch launch) {
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    for (const Item& item : items) pending.push_back(launch(item));
    for (auto& work : pending) work->wait();
  }

  c10::intrusive_ptr<c10d::Store> store_;  // outlives the group that talks through it
  c10::intrusive_ptr<Group> group_;
  const int rank_;
  const int world_size_;
  const std::string name_;
  const torch::Device device_;
};

}  // namespace

RankGroup::~RankGroup() = default;

RendezvousAddress ParseRendezvous(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw std::invalid_argument("--rendezvous " + text + " is not HOST:PORT");
  }
  const std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 1 || port > 65535) {
    throw std::invalid_argument("--rendezvous " + text + ": the port must be a number in [1, 65535]");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [IPv6]
  return {host, static_cast<uint16_t>(port)};
}

void CheckRankFlags(const SpecParallel& parallel, const RankFlags& flags) {
  if (!parallel.active()) {
    if (flags.given()) {
      throw SpecError(kWorldSizeField, "--rank and --rendezvous start a rank of a parallel run; this spec's "
                                       "world size is " + std::to_string(parallel.world_size));
    }
    return;
  }
  if (flags.rank < 0 || flags.rendezvous.empty()) {
    throw SpecError(kWorldSizeField, "a parallel run's ranks are started with --rank and --rendezvous (world size " +
                                         std::to_string(parallel.world_size) + ")");
  }
  if (flags.rank >= parallel.world_size) {
    throw SpecError(kWorldSizeField, "--rank " + std::to_string(flags.rank) + " is not in [0, " +
                                         std::to_string(parallel.world_size) + ")");
  }
}

std::unique_ptr<RankGroup> RankGroup::Join(const RankFlags& flags, int world_size, bool cuda) {
  const RendezvousAddress address = ParseRendezvous(flags.rendezvous);
  c10d::TCPStoreOptions options;
  options.port = address.port;
  options.isServer = flags.rank == 0;
  options.numWorkers = static_cast<size_t>(world_size);
  options.waitWorkers = true;
  auto store = c10::make_intrusive<c10d::TCPStore>(address.host, options);
  if (cuda) {
#ifdef VRAMLAB_WITH_C10D_NCCL
    // Each rank's device is its current CUDA device (the launcher gives each rank its own GPU).
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, flags.rank, world_size,
                                                             c10d::ProcessGroupNCCL::Options::create());
    return std::make_unique<C10dRankGroup<c10d::ProcessGroupNCCL>>(store, group, flags.rank, world_size, "nccl",
                                                                   torch::Device(torch::kCUDA));
#else
    throw SpecError(kWorldSizeField, "this worker was built without c10d's NCCL process group; a parallel run on "
                                     "CUDA needs it");
#endif
  }
#ifdef VRAMLAB_WITH_C10D_GLOO
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  // The ranks' own traffic goes over GLOO_SOCKET_IFNAME's interface where it is set, else over
  // the rendezvous host's address (right for every rank of a run on one host).
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  gloo_options->devices.push_back(interface != nullptr && *interface != '\0'
                                      ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                                      : c10d::ProcessGroupGloo::createDeviceForHostname(address.host));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, flags.rank, world_size, gloo_options);
  return std::make_unique<C10dRankGroup<c10d::ProcessGroupGloo>>(store, group, flags.rank, world_size, "gloo",
                                                                 torch::Device(torch::kCPU));
#else
  throw SpecError(kWorldSizeField, "this worker was built without c10d's Gloo process group (its headers, "
                                   "gloo/*.h, were not found); a parallel run on the CPU needs it");
#endif
}

}  // namespace vramlab::worker
