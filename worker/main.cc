// vramlab-worker: runs one experiment and writes its events as JSON lines.
//
//   vramlab-worker --spec FILE|- [--events-fd N]
//                  [--confine-host-paths [--allowed-dir DIR]... [--denied-path PATH]...]
//                  [--kernel-profile FILE] [--save-parameters FILE]
//                  [--rank R --rendezvous HOST:PORT] [--sweep-point INDEX:VALUE]
//
// See worker/README.md for the protocol and the exit codes.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/spec/sweep_order.h"
#include "worker/events/event_sink.h"
#include "worker/memory/allocator_env.h"
#include "worker/memory/device_backend.h"
#include "worker/memory/host_memory_limit.h"
#include "worker/parallel/rank_group.h"
#include "worker/train/run_worker.h"
#include "worker/util/host_files.h"

namespace {

using vramlab::worker::EventSink;
using vramlab::worker::ExperimentSpec;

constexpr char kUsage[] =
    "usage: vramlab-worker --spec FILE|- [--events-fd N]\n"
    "  --spec FILE     ExperimentSpec as protobuf JSON ('-' reads stdin)\n"
    "  --events-fd N   write WorkerEvent JSON lines to fd N instead of stdout\n"
    "  --kernel-profile FILE  record the last step of the first point by kernel (LibTorch's\n"
    "                  profiler) and write FILE as JSON (worker/train/kernel_profile.h)\n"
    "  --save-parameters FILE  write the parameters after the last step to FILE (safetensors)\n"
    "  --rank R --rendezvous HOST:PORT  be rank R of a parallel run (spec parallel.world_size >= "
    "2);\n"
    "                  rank 0 hosts the ranks' TCPStore at PORT (docs/PARALLEL.md)\n"
    "  --sweep-point INDEX:VALUE  run only point INDEX of the spec's sweep, at VALUE (how the\n"
    "                  daemon runs a parallel sweep: each point its own gang of ranks)\n"
    "  --confine-host-paths  read a spec's host files (weights, token ids) only under the\n"
    "                  --allowed-dir directories (repeatable) and never a --denied-path\n"
    "exit codes: 0 succeeded, 1 internal error, 2 invalid spec, 3 out of memory, 4 weights failed "
    "to load\n";

// Internal: set on the re-executed process; the spec file is a temporary to delete after reading.
constexpr char kTemporarySpecFlag[] = "--spec-is-temporary";

struct Args {
  std::string spec_path;
  int events_fd = STDOUT_FILENO;
  bool spec_is_temporary = false;
  std::string kernel_profile_path;
  std::string save_parameters_path;
  vramlab::worker::RankFlags rank_flags;
  std::optional<vramlab::spec_rules::SweepPoint> sweep_point;
  vramlab::worker::HostFileConfinement confinement;
};

bool Fail(std::string* error, const std::string& message) {
  *error = message;
  return false;
}

bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--spec") {
      if (!value(&args->spec_path)) return Fail(error, "--spec needs a value");
    } else if (arg == "--events-fd") {
      if (!value(&text)) return Fail(error, "--events-fd needs a value");
      char* end = nullptr;
      const long fd = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || fd < 0 || fd > 65535 ||
          fcntl(static_cast<int>(fd), F_GETFD) < 0) {
        return Fail(error, "--events-fd " + text + " is not an open file descriptor");
      }
      args->events_fd = static_cast<int>(fd);
    } else if (arg == "--confine-host-paths") {
      args->confinement.confined = true;
    } else if (arg == "--allowed-dir") {
      if (!value(&text)) return Fail(error, "--allowed-dir needs a value");
      args->confinement.allowed_dirs.push_back(text);
    } else if (arg == "--denied-path") {
      if (!value(&text)) return Fail(error, "--denied-path needs a value");
      args->confinement.denied_paths.push_back(text);
    } else if (arg == "--kernel-profile") {
      if (!value(&args->kernel_profile_path)) return Fail(error, "--kernel-profile needs a value");
    } else if (arg == "--save-parameters") {
      if (!value(&args->save_parameters_path))
        return Fail(error, "--save-parameters needs a value");
    } else if (arg == "--rank") {
      if (!value(&text)) return Fail(error, "--rank needs a value");
      char* end = nullptr;
      const long rank = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || rank < 0 || rank > 65535)
        return Fail(error, "--rank " + text + " is not a rank");
      args->rank_flags.rank = static_cast<int32_t>(rank);
    } else if (arg == "--rendezvous") {
      if (!value(&args->rank_flags.rendezvous)) return Fail(error, "--rendezvous needs a value");
      try {
        vramlab::worker::ParseRendezvous(args->rank_flags.rendezvous);
      } catch (const std::invalid_argument& e) {
        return Fail(error, e.what());
      }
    } else if (arg == vramlab::spec_rules::kSweepPointFlag) {
      if (!value(&text)) return Fail(error, arg + " needs a value");
      args->sweep_point = vramlab::spec_rules::ParseSweepPoint(text);
      if (!args->sweep_point.has_value())
        return Fail(error, arg + " " + text + " is not INDEX:VALUE");
    } else if (arg == kTemporarySpecFlag) {
      args->spec_is_temporary = true;
    } else {
      return Fail(error, "unknown argument " + arg);
    }
  }
  if (args->spec_path.empty()) return Fail(error, "--spec is required");
  return true;
}

bool ReadSpecText(const std::string& path, std::string* text) {
  if (path == "-") {
    text->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return !std::cin.bad();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// CUDA reads the allocator settings once, at start. A standalone run whose spec asks for
// settings that the environment does not carry restarts itself with them set, before anything
// touches CUDA. The spec (possibly read from stdin) is handed over in a temporary file.
void ReexecWithAllocatorEnv(const ExperimentSpec& spec, const std::string& spec_text,
                            const Args& args, char** argv) {
  const std::string conf = vramlab::spec_rules::AllocatorConfString(spec.memory.allocator);
  if (conf.empty() || vramlab::worker::AllocatorEnvPresent()) return;
  if (spec.device == vramlab::worker::DeviceKind::kCpu || !vramlab::worker::CudaDeviceAvailable())
    return;
  char path[] = "/tmp/vramlab-worker-spec-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0)
    throw std::runtime_error(
        "cannot create a temporary spec file to re-execute with PYTORCH_CUDA_ALLOC_CONF");
  const bool written =
      write(fd, spec_text.data(), spec_text.size()) == static_cast<ssize_t>(spec_text.size());
  close(fd);
  if (!written) throw std::runtime_error(std::string("cannot write ") + path);
  vramlab::worker::SetAllocatorEnv(conf);
  std::cerr << "vramlab-worker: re-executing with PYTORCH_CUDA_ALLOC_CONF=" << conf << std::endl;
  const std::string events_fd = std::to_string(args.events_fd);
  std::vector<const char*> new_argv = {argv[0],       "--spec",          path,
                                       "--events-fd", events_fd.c_str(), kTemporarySpecFlag};
  // The confinement travels with the run: the new image reads the same host files.
  if (!args.kernel_profile_path.empty())
    new_argv.insert(new_argv.end(), {"--kernel-profile", args.kernel_profile_path.c_str()});
  if (!args.save_parameters_path.empty())
    new_argv.insert(new_argv.end(), {"--save-parameters", args.save_parameters_path.c_str()});
  const std::string rank = std::to_string(args.rank_flags.rank);
  if (args.rank_flags.rank >= 0) new_argv.insert(new_argv.end(), {"--rank", rank.c_str()});
  if (!args.rank_flags.rendezvous.empty())
    new_argv.insert(new_argv.end(), {"--rendezvous", args.rank_flags.rendezvous.c_str()});
  const std::string sweep_point =
      args.sweep_point.has_value() ? vramlab::spec_rules::FormatSweepPoint(*args.sweep_point) : "";
  if (args.sweep_point.has_value())
    new_argv.insert(new_argv.end(), {vramlab::spec_rules::kSweepPointFlag, sweep_point.c_str()});
  if (args.confinement.confined) new_argv.push_back("--confine-host-paths");
  for (const std::string& dir : args.confinement.allowed_dirs)
    new_argv.insert(new_argv.end(), {"--allowed-dir", dir.c_str()});
  for (const std::string& path : args.confinement.denied_paths)
    new_argv.insert(new_argv.end(), {"--denied-path", path.c_str()});
  new_argv.push_back(nullptr);
  execv("/proc/self/exe", const_cast<char* const*>(new_argv.data()));
  unlink(path);
  throw std::runtime_error("cannot re-execute /proc/self/exe to apply the allocator settings");
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that goes away must show up as a failed write, not kill the run with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Args args;
  std::string error;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (!ParseArgs(argc, argv, &args, &error)) {
    std::cerr << "vramlab-worker: " << error << "\n" << kUsage;
    return vramlab::worker::kExitInvalidSpec;
  }
  EventSink sink(args.events_fd);
  try {
    vramlab::worker::ConfineHostFiles(args.confinement);
  } catch (const std::invalid_argument& e) {
    sink.Error({vramlab::worker::ErrorKind::kInvalidSpec, e.what(), ""});
    std::cerr << "vramlab-worker: " << e.what() << std::endl;
    return vramlab::worker::kExitInvalidSpec;
  }
  std::string spec_text;
  if (!ReadSpecText(args.spec_path, &spec_text)) {
    sink.Error(
        {vramlab::worker::ErrorKind::kInvalidSpec, "cannot read spec file " + args.spec_path, ""});
    std::cerr << "vramlab-worker: cannot read spec file " << args.spec_path << std::endl;
    return vramlab::worker::kExitInvalidSpec;
  }
  if (args.spec_is_temporary) unlink(args.spec_path.c_str());

  vramlab::worker::WorkerHooks hooks;
  hooks.kernel_profile_path = args.kernel_profile_path;
  hooks.save_parameters_path = args.save_parameters_path;
  hooks.rank_flags = args.rank_flags;
  hooks.sweep_point = args.sweep_point;
  hooks.before_device = [&](const ExperimentSpec& spec) {
    ReexecWithAllocatorEnv(spec, spec_text, args, argv);
    const int64_t host_limit = vramlab::worker::HostMemoryLimitFromEnvironment();
    if (host_limit > 0 && spec.device == vramlab::worker::DeviceKind::kCpu) {
      std::string why;
      if (!vramlab::worker::LimitDataSegment(host_limit, &why))
        std::cerr << "vramlab-worker: " << why << std::endl;
    }
  };
  return vramlab::worker::RunWorker(spec_text, sink, hooks);
}
