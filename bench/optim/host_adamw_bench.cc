// The host AdamW step of CPU offload: AdamWUpdate's ATen ops against the one-pass loop
// (worker/optim/host_adamw.h), per element count and dtype, median of repeats; and for
// fp32-master offload of bf16 parameters, the loop between an upcast and a rounding copy against
// the master form that does all three in one pass. Then the one-pass loops per host thread count
// (how the offloaded step scales with the cores it gets).
//   vramlab-host-adamw-bench [MILLIONS_OF_ELEMENTS] [REPEATS] [THREADS,...]
//   (default 64, 5, and 1, 2, 4, ... up to LibTorch's intra-op thread count)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/optim/adamw_math.h"
#include "worker/optim/host_adamw.h"

namespace {

using vramlab::worker::optim_internal::AdamWHyper;

template <typename Fn>
double MedianSeconds(int repeats, Fn fn) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn(r + 1);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// "1,2,4" -> {1, 2, 4}; empty: powers of two up to `max_threads`, and `max_threads` itself.
std::vector<int> ThreadCounts(const char* list, int max_threads) {
  std::vector<int> counts;
  if (list != nullptr) {
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) counts.push_back(std::max(1, std::atoi(item.c_str())));
    return counts;
  }
  for (int t = 1; t < max_threads; t *= 2) counts.push_back(t);
  counts.push_back(max_threads);
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = (argc > 1 ? std::atoll(argv[1]) : 64) * 1000000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  std::printf("%lld elements, %d threads, median of %d\n", static_cast<long long>(n),
              at::get_num_threads(), repeats);
  std::printf("| dtype | ATen ops (s) | one pass (s) | speed-up |\n|---|---|---|---|\n");
  for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::Tensor p = torch::randn({n}).to(dtype), g = (torch::randn({n}) * 1e-2).to(dtype);
    torch::Tensor m = torch::zeros({n}, dtype), v = torch::zeros({n}, dtype);
    const AdamWHyper hyper;
    const double aten = MedianSeconds(repeats, [&](int step) {
      vramlab::worker::optim_internal::AdamWUpdate(hyper, step, p, g, m, v);
    });
    const double fused = MedianSeconds(repeats, [&](int step) {
      vramlab::worker::optim_internal::HostAdamW(hyper, step, p, g, m, v);
    });
    std::printf("| %s | %.3f | %.3f | %.1fx |\n", dtype == torch::kFloat ? "fp32" : "bf16", aten,
                fused, aten / fused);
  }
  std::printf(
      "\n| fp32 master, bf16 gradient and parameter | upcast + loop + copy (s) | one pass (s) | "
      "speed-up |\n"
      "|---|---|---|---|\n");
  torch::Tensor master = torch::randn({n}), g = (torch::randn({n}) * 1e-2).to(torch::kBFloat16);
  torch::Tensor m = torch::zeros({n}), v = torch::zeros({n}), p = master.to(torch::kBFloat16);
  const AdamWHyper hyper;
  const double three_passes = MedianSeconds(repeats, [&](int step) {
    vramlab::worker::optim_internal::HostAdamW(hyper, step, master, g.to(torch::kFloat), m, v);
    p.copy_(master);
  });
  const double one_pass = MedianSeconds(repeats, [&](int step) {
    vramlab::worker::optim_internal::HostAdamWMaster(hyper, step, master, g, m, v, p);
  });
  std::printf("| %lld M elements | %.3f | %.3f | %.1fx |\n", static_cast<long long>(n / 1000000),
              three_passes, one_pass, three_passes / one_pass);

  // Bytes each loop reads and writes per element: bf16 p, m, v read and written, g read (14);
  // fp32 master form with bf16 gradient and parameter: master, m, v read and written, g read,
  // p written (28).
  std::printf(
      "\n| threads | bf16 loop (s) | bf16 GB/s | fp32 master, bf16 p/g (s) | master GB/s |\n"
      "|---|---|---|---|---|\n");
  torch::Tensor pb = torch::randn({n}).to(torch::kBFloat16),
                gb = (torch::randn({n}) * 1e-2).to(torch::kBFloat16);
  torch::Tensor mb = torch::zeros({n}, torch::kBFloat16), vb = torch::zeros({n}, torch::kBFloat16);
  for (int threads : ThreadCounts(argc > 3 ? argv[3] : nullptr, at::get_num_threads())) {
    at::set_num_threads(threads);
    const double bf16 = MedianSeconds(repeats, [&](int step) {
      vramlab::worker::optim_internal::HostAdamW(hyper, step, pb, gb, mb, vb);
    });
    const double master_pass = MedianSeconds(repeats, [&](int step) {
      vramlab::worker::optim_internal::HostAdamWMaster(hyper, step, master, g, m, v, p);
    });
    std::printf("| %d | %.3f | %.1f | %.3f | %.1f |\n", threads, bf16, 14.0 * n / bf16 / 1e9,
                master_pass, 28.0 * n / master_pass / 1e9);
  }
  return 0;
}
