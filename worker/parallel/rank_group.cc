#include "worker/parallel/rank_group.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#ifdef VRAMLAB_WITH_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef VRAMLAB_WITH_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace vramlab::worker {
namespace {

constexpr char kWorldSizeField[] = "parallel.world_size";

// c10d Work objects with the tensors they use and the copies that finish them (rank_group.h).
class C10dPending : public PendingCollective {
 public:
  ~C10dPending() override {
    if (waited_) return;
    try {
      Wait();
    } catch (...) {  // unwinding already; the collective's own error is not this one's to report
    }
  }

  // `work` uses `tensors`; they are held until Wait() returns.
  void Add(c10::intrusive_ptr<c10d::Work> work, std::vector<torch::Tensor> tensors) {
    work_.push_back(std::move(work));
    for (torch::Tensor& t : tensors) held_.push_back(std::move(t));
  }
  // Runs after every Work has been waited for, in the order added.
  void Then(std::function<void()> finish) { finish_.push_back(std::move(finish)); }

  void Wait() override {
    if (waited_) return;
    waited_ = true;
    for (auto& work : work_) work->wait();
    for (auto& finish : finish_) finish();
    finish_.clear();
    work_.clear();
    held_.clear();
  }

 private:
  bool waited_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> work_;
  std::vector<torch::Tensor> held_;
  std::vector<std::function<void()>> finish_;
};

// The collectives of one concrete c10d process group. Templated on the class rather than typed
// by its base, which is c10d::ProcessGroup in LibTorch 1.13 and c10d::Backend from 2.0 on.
template <typename Group>
class C10dRankGroup : public RankGroup {
 public:
  C10dRankGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group, int rank,
                int world_size, std::string name, torch::Device device,
                bool float32_wire_for_bfloat16, bool flat_buffer_collectives)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        world_size_(world_size),
        name_(std::move(name)),
        device_(device),
        float32_wire_for_bfloat16_(float32_wire_for_bfloat16),
        flat_buffer_collectives_(flat_buffer_collectives) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend_name() const override { return name_; }

  void AllReduceSum(const std::vector<torch::Tensor>& tensors) override {
    LaunchAllReduce(tensors)->Wait();
  }

  void ReduceSum(const std::vector<RootedTensor>& tensors) override {
    StartReduceSum(tensors)->Wait();
  }

  std::unique_ptr<PendingCollective> StartAllReduceSum(
      const std::vector<torch::Tensor>& tensors) override {
    return LaunchAllReduce(tensors);
  }

  std::unique_ptr<PendingCollective> StartReduceSum(
      const std::vector<RootedTensor>& tensors) override {
    return LaunchEach(tensors, [this](const RootedTensor& rooted, std::vector<at::Tensor>& wire) {
      c10d::ReduceOptions options;
      options.rootRank = rooted.second;
      return group_->reduce(wire, options);
    });
  }

  void Broadcast(const std::vector<RootedTensor>& tensors) override {
    LaunchEach(tensors, [this](const RootedTensor& rooted, std::vector<at::Tensor>& wire) {
      c10d::BroadcastOptions options;
      options.rootRank = rooted.second;
      return group_->broadcast(wire, options);
    })->Wait();
  }

  std::unique_ptr<PendingCollective> StartAllGather(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    auto pending = std::make_unique<C10dPending>();
    for (const auto& [full, chunk] : full_and_chunk) {
      if (flat_buffer_collectives_) {
        at::Tensor output = full.view({-1});
        at::Tensor input = chunk.view({-1});
        pending->Add(group_->_allgather_base(output, input, c10d::AllgatherOptions{}),
                     {full, chunk});
        continue;
      }
      // Gloo: no bfloat16, but an all-gather only moves bytes, so a float16 view carries it.
      const bool reinterpret = chunk.scalar_type() == torch::kBFloat16;
      const torch::Tensor flat_full = full.view({-1});
      const torch::Tensor flat_chunk = chunk.view({-1});
      const torch::Tensor wire_full = reinterpret ? flat_full.view(torch::kHalf) : flat_full;
      std::vector<at::Tensor> input{reinterpret ? flat_chunk.view(torch::kHalf) : flat_chunk};
      std::vector<std::vector<at::Tensor>> outputs(1);
      const int64_t chunk_elements = chunk.numel();
      for (int r = 0; r < world_size_; ++r)
        outputs[0].push_back(wire_full.narrow(0, r * chunk_elements, chunk_elements));
      pending->Add(group_->allgather(outputs, input, c10d::AllgatherOptions{}), {full, chunk});
    }
    return pending;
  }

  std::unique_ptr<PendingCollective> StartReduceScatterSum(
      const std::vector<std::pair<torch::Tensor, torch::Tensor>>& full_and_chunk) override {
    if (flat_buffer_collectives_) {
      auto pending = std::make_unique<C10dPending>();
      for (const auto& [full, chunk] : full_and_chunk) {
        at::Tensor output = chunk.view({-1});
        at::Tensor input = full.view({-1});
        pending->Add(group_->_reduce_scatter_base(output, input, c10d::ReduceScatterOptions{}),
                     {full, chunk});
      }
      return pending;
    }
    std::vector<torch::Tensor> fulls;
    for (const auto& pair : full_and_chunk) fulls.push_back(pair.first);
    std::unique_ptr<C10dPending> pending = LaunchAllReduce(fulls);
    const int rank = rank_;
    pending->Then([full_and_chunk, rank] {
      for (const auto& [full, chunk] : full_and_chunk) {
        chunk.view({-1}).copy_(full.view({-1}).narrow(0, rank * chunk.numel(), chunk.numel()));
      }
    });
    return pending;
  }

  double MeanOverRanks(double value) override {
    torch::Tensor t =
        torch::full({1}, value, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
    AllReduceSum({t});
    return t.item<double>() / world_size_;
  }

 private:
  static const torch::Tensor& TensorOf(const torch::Tensor& t) { return t; }
  static const torch::Tensor& TensorOf(const RootedTensor& rooted) { return rooted.first; }

  std::unique_ptr<C10dPending> LaunchAllReduce(const std::vector<torch::Tensor>& tensors) {
    return LaunchEach(tensors, [this](const torch::Tensor&, std::vector<at::Tensor>& wire) {
      return group_->allreduce(wire, c10d::AllreduceOptions{});
    });
  }

  // One collective per item, all launched before this returns. `launch(item, wire)` starts the
  // item's collective on `wire`: the item's tensor itself, or, for a bfloat16 tensor on Gloo
  // (LibTorch 1.13's has no bfloat16), a float32 copy whose result the pending collective copies
  // back once waited for (exact for broadcasts; sums are rounded to bfloat16 once, at the end).
  template <typename Item, typename Launch>
  std::unique_ptr<C10dPending> LaunchEach(const std::vector<Item>& items, Launch launch) {
    auto pending = std::make_unique<C10dPending>();
    std::vector<std::pair<torch::Tensor, torch::Tensor>> staged;  // (tensor, its float32 wire copy)
    for (const Item& item : items) {
      const torch::Tensor& tensor = TensorOf(item);
      std::vector<at::Tensor> wire{tensor};
      if (float32_wire_for_bfloat16_ && tensor.scalar_type() == torch::kBFloat16) {
        wire[0] = tensor.to(torch::kFloat32);
        staged.emplace_back(tensor, wire[0]);
      }
      c10::intrusive_ptr<c10d::Work> work = launch(item, wire);
      pending->Add(std::move(work), {tensor, wire[0]});
    }
    if (!staged.empty()) {
      pending->Then([staged] {
        for (const auto& [tensor, wire] : staged) tensor.copy_(wire);
      });
    }
    return pending;
  }

  c10::intrusive_ptr<c10d::Store> store_;  // outlives the group that talks through it
  c10::intrusive_ptr<Group> group_;
  const int rank_;
  const int world_size_;
  const std::string name_;
  const torch::Device device_;
  const bool float32_wire_for_bfloat16_;
  // NCCL: all-gather and reduce-scatter on flat buffers (_allgather_base, _reduce_scatter_base).
  // Gloo (LibTorch 1.13) has neither; StartAllGather and StartReduceScatterSum say what it uses
  // instead.
  const bool flat_buffer_collectives_;
};

}  // namespace

PendingCollective::~PendingCollective() = default;

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
    throw std::invalid_argument("--rendezvous " + text +
                                ": the port must be a number in [1, 65535]");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);  // [IPv6]
  return {host, static_cast<uint16_t>(port)};
}

void CheckRankFlags(const ParallelSpec& parallel, const RankFlags& flags) {
  if (!ParallelActive(parallel)) {
    if (flags.given()) {
      throw SpecError(kWorldSizeField,
                      "--rank and --rendezvous start a rank of a parallel run; this spec's "
                      "world size is " +
                          std::to_string(parallel.world_size));
    }
    return;
  }
  if (flags.rank < 0 || flags.rendezvous.empty()) {
    throw SpecError(kWorldSizeField,
                    "a parallel run's ranks are started with --rank and --rendezvous (world size " +
                        std::to_string(parallel.world_size) + ")");
  }
  if (flags.rank >= parallel.world_size) {
    throw SpecError(kWorldSizeField, "--rank " + std::to_string(flags.rank) + " is not in [0, " +
                                         std::to_string(parallel.world_size) + ")");
  }
}

std::unique_ptr<RankGroup> RankGroup::Join(const RankFlags& flags, int world_size, bool cuda) {
  const RendezvousAddress address = ParseRendezvous(flags.rendezvous);
  // Refused before the store, so that no rank waits for the others only to fail.
#ifndef VRAMLAB_WITH_C10D_NCCL
  if (cuda) {
    throw SpecError(kWorldSizeField,
                    "this worker was built without c10d's NCCL process group; a parallel run on "
                    "CUDA needs it");
  }
#endif
#ifndef VRAMLAB_WITH_C10D_GLOO
  if (!cuda) {
    throw SpecError(kWorldSizeField,
                    "this worker was built without c10d's Gloo process group (its headers, "
                    "gloo/*.h, were not found); a parallel run on the CPU needs it");
  }
#endif
  c10d::TCPStoreOptions options;
  options.port = address.port;
  options.isServer = flags.rank == 0;
  options.numWorkers = static_cast<size_t>(world_size);
  options.waitWorkers = true;
  auto store = c10::make_intrusive<c10d::TCPStore>(address.host, options);
#ifdef VRAMLAB_WITH_C10D_NCCL
  if (cuda) {
    // Each rank's device is its current CUDA device (the launcher gives each rank its own GPU).
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        store, flags.rank, world_size, c10d::ProcessGroupNCCL::Options::create());
    return std::make_unique<C10dRankGroup<c10d::ProcessGroupNCCL>>(
        store, group, flags.rank, world_size, "nccl", torch::Device(torch::kCUDA), false, true);
  }
#endif
#ifdef VRAMLAB_WITH_C10D_GLOO
  if (!cuda) {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create();
    // The ranks' own traffic goes over GLOO_SOCKET_IFNAME's interface where it is set, else over
    // the rendezvous host's address (right for every rank of a run on one host).
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    gloo_options->devices.push_back(
        interface != nullptr && *interface != '\0'
            ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
            : c10d::ProcessGroupGloo::createDeviceForHostname(address.host));
    auto group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, flags.rank, world_size, gloo_options);
    return std::make_unique<C10dRankGroup<c10d::ProcessGroupGloo>>(
        store, group, flags.rank, world_size, "gloo", torch::Device(torch::kCPU), true, false);
  }
#endif
  throw std::logic_error("RankGroup::Join: no process group for this device");  // refused above
}

}  // namespace vramlab::worker
