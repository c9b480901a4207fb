// vramlabd: the vramlab daemon. Flags and operations: docs/DAEMON.md.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "server/api/grpc_server.h"
#include "server/api/vramlab_service.h"
#include "server/auth/authenticator.h"
#include "server/config/gpu_discovery.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"
#include "server/spec/command_spec.h"
#include "server/spec/host_paths.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7433", "gRPC address, HOST:PORT (port 0 picks one)");
ABSL_FLAG(std::string, data_dir, "", "directory of the database, logs and snapshots (required)");
ABSL_FLAG(std::string, metrics_listen, "", "Prometheus /metrics address; empty: no exporter");
ABSL_FLAG(std::string, device, "cuda", "cuda (one slot per GPU) or cpu");
ABSL_FLAG(std::string, gpus, "", "GPU indices to use, e.g. 0,1; empty: every GPU");
ABSL_FLAG(int, cpu_slots, 1, "experiments run at once with --device cpu");
ABSL_FLAG(std::string, auth_tokens, "", "file of 'TOKEN USER ROLE' lines (mode 600)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for TLS");
ABSL_FLAG(bool, insecure, false, "allow a non-loopback listen address without --auth-tokens");
ABSL_FLAG(std::string, worker_path, "", "vramlab-worker binary; empty: next to vramlabd");
ABSL_FLAG(int, max_queued_per_user, 100, "queued experiments one user may have");
ABSL_FLAG(int, max_queued_total, 1000, "queued experiments in all");
ABSL_FLAG(absl::Duration, default_time_limit, absl::Hours(1), "time limit of a spec with none");
ABSL_FLAG(absl::Duration, max_time_limit, absl::Hours(24), "largest time limit a spec may ask");
ABSL_FLAG(bool, requeue_interrupted, false,
          "requeue experiments interrupted by a crash or shutdown when the daemon starts");
ABSL_FLAG(bool, enable_fault_injection, false, "accept spec.fault (tests only)");
ABSL_FLAG(absl::Duration, cancel_grace_period, absl::Seconds(10), "SIGTERM to SIGKILL");
ABSL_FLAG(absl::Duration, shutdown_grace_period, absl::Seconds(10),
          "how long running experiments may go on after SIGTERM before they are interrupted");
ABSL_FLAG(std::vector<std::string>, allowed_dir, {},
          "directory under which specs may name host files (model.weights_dir, "
          "training.data.token_ids_file); repeatable; none: specs may name no host path");
ABSL_FLAG(bool, allow_commands, false,
          "run submitters' own programs (spec.command) as --command-user; needs the tokens "
          "file's ,commands role with --auth-tokens");
ABSL_FLAG(std::string, command_user, "",
          "unprivileged user commands run as (never root, never the daemon's own user)");
ABSL_FLAG(std::string, probe_dir, "",
          "directory of the Python probe (sitecustomize.py, vramlab_probe/); empty: next to "
          "vramlabd (../probe, then ../share/vramlab/probe)");
ABSL_FLAG(int, max_seq_len, 131072, "largest training.seq_len accepted");
ABSL_FLAG(int, max_steps, 10000, "largest training.steps accepted");
ABSL_FLAG(int, max_sweep_points, 64, "most sweep.values accepted");
ABSL_FLAG(int64_t, max_log_bytes, 8 << 20, "size cap of each experiment's worker log");
ABSL_FLAG(int, max_worker_events_per_second, 5000, "event rate above which a worker is killed");
// Exporter and authentication hardening (docs/DAEMON.md, "Limits on clients").
ABSL_FLAG(int, metrics_max_connections, 256,
          "metrics connections open at once; a new one beyond it closes the oldest idle one");
ABSL_FLAG(int, metrics_max_connections_per_address, 32,
          "metrics connections open at once from one IP address; a new one beyond it closes that "
          "address's oldest idle one");
ABSL_FLAG(absl::Duration, metrics_request_timeout, absl::Seconds(5),
          "a metrics client that has not sent its request by then is disconnected, and a response "
          "not written by then is abandoned");
// No effect: one thread serves every metrics connection. Still accepted, with a warning, so that
// existing command lines and unit files keep working.
ABSL_FLAG(int, metrics_threads, 0,
          "no effect: one thread serves every metrics connection (see --metrics-max-connections)");
ABSL_FLAG(int, auth_max_failures, 10,
          "failed authentications from one address within --auth-failure-window before it is "
          "refused; 0: no limit");
ABSL_FLAG(int, auth_max_failures_total, 100,
          "failed authentications from all addresses together within --auth-failure-window "
          "after which only addresses that authenticated within the last 24h are served; 0: no "
          "limit");
ABSL_FLAG(absl::Duration, auth_failure_window, absl::Minutes(1),
          "see --auth-max-failures and --auth-max-failures-total");

// Store checks and durability (docs/DAEMON.md, "Data directory and durability").
ABSL_FLAG(absl::Duration, store_check_timeout, absl::Seconds(60),
          "time bound of the database integrity check (PRAGMA quick_check) at start");
ABSL_FLAG(std::string, fail_store_writes_while_exists, "",
          "tests only: every store write fails as on a full disk while this file exists");

// Retention (docs/DAEMON.md, "Retention").
ABSL_FLAG(double, retain_days, 0,
          "delete finished experiments that ended more than this many days ago; 0: keep them");
ABSL_FLAG(int64_t, max_store_bytes, 0,
          "while the store (database and experiment files) exceeds this, delete the oldest "
          "finished experiment; 0: no bound");
ABSL_FLAG(absl::Duration, retention_interval, absl::Minutes(1),
          "how often the retention policy is applied");
ABSL_FLAG(std::string, kill_during_delete_while_exists, "",
          "tests only: while this file exists a deletion kills the daemon (SIGKILL) at the stage "
          "the file names (before-commit, before-files)");

namespace vramlab::server {
namespace {

std::string DefaultWorkerPath() {
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "vramlab-worker";
  return (self.parent_path() / "vramlab-worker").string();
}

std::string DefaultProbeDir() {
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "probe";
  for (const char* relative : {"../probe", "../share/vramlab/probe"}) {
    auto dir = self.parent_path() / relative;
    if (std::filesystem::exists(dir / "sitecustomize.py", error)) {
      return std::filesystem::weakly_canonical(dir, error).string();
    }
  }
  return (self.parent_path() / "../probe").string();
}

std::string HostOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

absl::StatusOr<EngineOptions> OptionsFromFlags() {
  EngineOptions options;
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (options.data_dir.empty()) return absl::InvalidArgumentError("--data-dir is required");
  options.worker_path = absl::GetFlag(FLAGS_worker_path);
  if (options.worker_path.empty()) options.worker_path = DefaultWorkerPath();
  if (access(options.worker_path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("worker not executable: ", options.worker_path));
  }
  std::string device = absl::GetFlag(FLAGS_device);
  if (device == "cpu") {
    options.device = vramlab::v1::CPU;
    int slots = absl::GetFlag(FLAGS_cpu_slots);
    if (slots < 1 || slots > 256) return absl::InvalidArgumentError("--cpu-slots: 1..256");
    options.slots = CpuSlots(slots);
  } else if (device == "cuda") {
    options.device = vramlab::v1::CUDA;
    auto gpus = DiscoverGpus();
    if (!gpus.ok()) return gpus.status();
    auto selected = SelectGpus(*gpus, absl::GetFlag(FLAGS_gpus));
    if (!selected.ok()) return selected.status();
    options.slots = *selected;
  } else {
    return absl::InvalidArgumentError("--device: cuda or cpu");
  }
  options.max_queued_per_user = absl::GetFlag(FLAGS_max_queued_per_user);
  options.max_queued_total = absl::GetFlag(FLAGS_max_queued_total);
  if (options.max_queued_per_user < 1 || options.max_queued_total < 1) {
    return absl::InvalidArgumentError("--max-queued-per-user and --max-queued-total: at least 1");
  }
  auto seconds = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Seconds(d), INT_MAX));
  };
  options.default_time_limit_seconds = seconds(absl::GetFlag(FLAGS_default_time_limit));
  options.max_time_limit_seconds = seconds(absl::GetFlag(FLAGS_max_time_limit));
  if (options.default_time_limit_seconds < 1 ||
      options.max_time_limit_seconds < options.default_time_limit_seconds) {
    return absl::InvalidArgumentError("--default-time-limit must be >= 1s and <= --max-time-limit");
  }
  options.requeue_interrupted = absl::GetFlag(FLAGS_requeue_interrupted);
  options.shutdown_grace_period = absl::GetFlag(FLAGS_shutdown_grace_period);
  options.spec_limits.max_seq_len = absl::GetFlag(FLAGS_max_seq_len);
  options.spec_limits.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.spec_limits.max_sweep_points = absl::GetFlag(FLAGS_max_sweep_points);
  options.spec_limits.allow_fault_injection = absl::GetFlag(FLAGS_enable_fault_injection);
  options.spec_limits.device = options.device;
  options.spec_limits.host_devices = static_cast<int32_t>(options.slots.size());
  auto host_paths = HostPathPolicy::Create(
      absl::GetFlag(FLAGS_allowed_dir),
      {options.data_dir, absl::GetFlag(FLAGS_auth_tokens), absl::GetFlag(FLAGS_tls_key)});
  if (!host_paths.ok()) return host_paths.status();
  options.host_paths = *std::move(host_paths);
  if (absl::GetFlag(FLAGS_allow_commands)) {
    std::string probe_dir = absl::GetFlag(FLAGS_probe_dir);
    if (probe_dir.empty()) probe_dir = DefaultProbeDir();
    auto commands = CommandPolicy::Create(absl::GetFlag(FLAGS_command_user), probe_dir);
    if (!commands.ok()) return commands.status();
    options.commands = *std::move(commands);
    if (options.device == vramlab::v1::CUDA) {
      // A job whose probe says nothing (not Python, or never imports torch) is measured from the
      // driver instead; without NVML such a job reports nothing, and the daemon still runs.
      auto reader = OpenNvmlReader();
      if (reader.ok()) {
        options.gpu_memory_reader = *std::move(reader);
      } else {
        std::fprintf(stderr,
                     "vramlabd: command jobs without a probe report get no driver's view: %s\n",
                     std::string(reader.status().message()).c_str());
      }
    }
  } else if (!absl::GetFlag(FLAGS_command_user).empty()) {
    return absl::InvalidArgumentError("--command-user has no effect without --allow-commands");
  }
  options.worker_limits.max_log_bytes = absl::GetFlag(FLAGS_max_log_bytes);
  options.worker_limits.max_events_per_second = absl::GetFlag(FLAGS_max_worker_events_per_second);
  options.worker_limits.cancel_grace_period =
      absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_cancel_grace_period));
  options.store.quick_check_limit = absl::GetFlag(FLAGS_store_check_timeout);
  options.store.write_fault_file = absl::GetFlag(FLAGS_fail_store_writes_while_exists);
  options.store.delete_fault_file = absl::GetFlag(FLAGS_kill_during_delete_while_exists);
  const double retain_days = absl::GetFlag(FLAGS_retain_days);
  // The bound keeps the cutoff a representable time (about 27 000 years).
  if (!(retain_days >= 0 && retain_days <= 1e7)) {
    return absl::InvalidArgumentError("--retain-days: must be 0 .. 10000000 (0: keep everything)");
  }
  options.retention.retain = absl::Hours(24) * retain_days;
  options.retention.max_store_bytes = absl::GetFlag(FLAGS_max_store_bytes);
  if (options.retention.max_store_bytes < 0) {
    return absl::InvalidArgumentError("--max-store-bytes: must be >= 0 (0: no bound)");
  }
  options.retention.interval = absl::GetFlag(FLAGS_retention_interval);
  if (options.retention.interval < absl::Milliseconds(100) ||
      options.retention.interval > absl::Hours(24)) {
    return absl::InvalidArgumentError("--retention-interval: must be 100ms .. 24h");
  }
  return options;
}

int Run() {
  // Termination signals are taken by sigwait below; every thread created after this inherits the
  // mask (workers get it cleared in spawn.cc).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // The store, logs, specs and snapshots are the users' data: readable by the daemon's user
  // alone (files 0600, directories 0700), whatever umask the daemon was started with.
  umask(0077);

  std::string listen = absl::GetFlag(FLAGS_listen);
  std::string tokens_path = absl::GetFlag(FLAGS_auth_tokens);
  if (tokens_path.empty() && !IsLoopbackListenAddress(listen) && !absl::GetFlag(FLAGS_insecure)) {
    std::fprintf(stderr,
                 "vramlabd: refusing to listen on %s without --auth-tokens (anyone could run "
                 "experiments); pass --insecure to do it anyway\n",
                 listen.c_str());
    return 2;
  }
  Authenticator authenticator;
  if (!tokens_path.empty()) {
    auto tokens = LoadTokenFile(tokens_path);
    if (!tokens.ok()) {
      std::fprintf(stderr, "vramlabd: %s\n", std::string(tokens.status().message()).c_str());
      return 2;
    }
    authenticator = Authenticator(std::move(*tokens));
  }
  auto options = OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "vramlabd: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  options->auth_enabled = authenticator.enabled();

  if (absl::GetFlag(FLAGS_metrics_threads) != 0) {
    std::fprintf(stderr,
                 "vramlabd: --metrics-threads has no effect: one thread serves every metrics "
                 "connection (see --metrics-max-connections)\n");
  }
  std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  std::unique_ptr<Metrics> metrics;
  if (metrics_listen.empty()) {
    metrics = Metrics::CreateUnexposed();
  } else {
    MetricsHttpOptions http;
    http.listen_address = metrics_listen;
    http.max_connections = absl::GetFlag(FLAGS_metrics_max_connections);
    http.max_connections_per_address = absl::GetFlag(FLAGS_metrics_max_connections_per_address);
    http.request_timeout = absl::GetFlag(FLAGS_metrics_request_timeout);
    auto started = Metrics::Start(http);
    if (!started.ok()) {
      std::fprintf(stderr, "vramlabd: metrics: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    metrics = std::move(*started);
  }

  auto engine = Engine::Create(*options, metrics.get());
  if (!engine.ok()) {
    std::fprintf(stderr, "vramlabd: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  if (absl::Status started = (*engine)->Start(); !started.ok()) {
    std::fprintf(stderr, "vramlabd: %s\n", std::string(started.message()).c_str());
    return 1;
  }
  AuthThrottle auth_throttle({.max_failures = absl::GetFlag(FLAGS_auth_max_failures),
                              .max_failures_total = absl::GetFlag(FLAGS_auth_max_failures_total),
                              .window = absl::GetFlag(FLAGS_auth_failure_window)});
  VramlabServiceImpl service(engine->get(), &authenticator, &auth_throttle, metrics.get());
  GrpcServerOptions grpc_options;
  grpc_options.listen_address = listen;
  grpc_options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  grpc_options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  if (authenticator.enabled()) grpc_options.auth_throttle = &auth_throttle;
  auto server = StartGrpcServer(grpc_options, &service);
  if (!server.ok()) {
    std::fprintf(stderr, "vramlabd: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::string metrics_address =
      metrics->port() > 0 ? absl::StrCat(HostOf(metrics_listen), ":", metrics->port()) : "off";
  // Parsed by tests and scripts: keep the format.
  std::fprintf(stderr, "vramlabd: listening grpc=%s:%d metrics=%s\n", HostOf(listen).c_str(),
               server->port, metrics_address.c_str());
  std::fprintf(stderr, "vramlabd: %zu %s slot(s), data dir %s, worker %s, auth %s, tls %s\n",
               options->slots.size(), options->device == vramlab::v1::CUDA ? "GPU" : "CPU",
               options->data_dir.c_str(), options->worker_path.c_str(),
               authenticator.enabled() ? "on" : "off",
               grpc_options.tls_cert_path.empty() ? "off" : "on");

  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "vramlabd: %s received, shutting down\n", strsignal(received));
  server->server->GetHealthCheckService()->SetServingStatus(false);
  (*engine)->Shutdown();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  std::fprintf(stderr, "vramlabd: stopped\n");
  return 0;
}

// `--allowed-dir` may be given several times; Abseil keeps only the last value of a flag, so the
// occurrences are joined into one comma-separated list first. Returns the new argument vector
// (its strings point into `argv` or `storage`).
std::vector<char*> JoinRepeatedAllowedDirs(int argc, char** argv, std::string* storage) {
  constexpr absl::string_view kFlag = "--allowed_dir";
  std::vector<char*> args = {argv[0]};
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      args.insert(args.end(), argv + i, argv + argc);
      break;
    }
    if (arg == kFlag && i + 1 < argc) {
      dirs.push_back(argv[++i]);
    } else if (absl::StartsWith(arg, absl::StrCat(kFlag, "="))) {
      dirs.push_back(std::string(arg.substr(kFlag.size() + 1)));
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!dirs.empty()) {
    *storage = absl::StrCat(kFlag, "=", absl::StrJoin(dirs, ","));
    args.insert(args.begin() + 1, storage->data());
  }
  return args;
}

// Flags are documented with dashes (--data-dir); Abseil names them with underscores.
void DashesToUnderscores(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;
    if (std::strncmp(argv[i], "--", 2) != 0) continue;
    for (char* c = argv[i] + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

}  // namespace
}  // namespace vramlab::server

namespace {

void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    std::fprintf(stderr, "vramlabd: warning: cannot raise the descriptor limit: %s\n",
                 std::strerror(errno));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A request's large buffers (a repeated field of a million values parses into several MiB)
  // are mapped and unmapped on their own, so that memory goes back to the system when the request
  // ends. glibc's default threshold rises after such frees until it serves them from the heap,
  // which then keeps what a burst of hostile requests took.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // Every client connection holds a descriptor until its handshake times out: the soft limit
  // (1024 under many service managers) goes up to the hard one, so that idle connections cannot
  // leave the daemon without descriptors for its store, logs and workers.
  RaiseDescriptorLimit();
  absl::SetProgramUsageMessage("vramlabd --data-dir DIR [--listen HOST:PORT] [flags]");
  // Every flag is defined here, in main.cc: --help lists them (Abseil's default matches flags by
  // the program's name and found none).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  vramlab::server::DashesToUnderscores(argc, argv);
  std::string allowed_dirs;
  std::vector<char*> args = vramlab::server::JoinRepeatedAllowedDirs(argc, argv, &allowed_dirs);
  args.push_back(nullptr);
  absl::ParseCommandLine(static_cast<int>(args.size()) - 1, args.data());
  return vramlab::server::Run();
}
