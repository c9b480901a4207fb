// The one way tests start a program: a child process with its arguments and environment, its
// stdout and stderr captured (or sent to files), text on its stdin, a time limit, and a kill.
// Every test that runs a real binary (vramlabd, vramlab, vramlab-worker, vramlab-estimate,
// Prometheus, curl, openssl ...) starts it through here.
//
// Header-only and standard C++ with POSIX only, so that the worker's tests (LibTorch, no Abseil
// or gRPC) use it too. Not thread-safe: one thread drives a ChildProcess.
#ifndef VRAMLAB_TESTS_SUPPORT_CHILD_PROCESS_H_
#define VRAMLAB_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace vramlab::testing {

struct ChildOptions {
  // argv[0] is a path, or a name looked up in PATH (the child's PATH when `env` sets one).
  std::vector<std::string> argv;
  // The child's whole environment when set (nothing of the test's is passed on); unset: the
  // test's own.
  std::optional<std::map<std::string, std::string>> env;
  // Written to the child's stdin, which is then closed; stdin is /dev/null when empty.
  std::string stdin_text;
  // Empty: captured into ChildResult::out. Otherwise the file stdout is written to (truncated).
  std::string stdout_file;
  // Empty: captured into ChildResult::err. Otherwise the file stderr is written to ("/dev/null"
  // discards it). Unused with stderr_with_stdout.
  std::string stderr_file;
  // stderr goes where stdout goes (captured together in ChildResult::out, or into stdout_file).
  bool stderr_with_stdout = false;
  // The child is killed (SIGKILL) when the test process dies, so a crashed test leaves no daemon.
  bool die_with_parent = false;
};

struct ChildResult {
  int exit_code = -1;      // its exit code; -1 when a signal ended it
  int signal = 0;          // the signal that ended it, 0 when it exited
  int wait_status = 0;     // waitpid's status, for callers that report it raw
  bool timed_out = false;  // it ran past Wait's time limit and was killed
  bool killed = false;     // Wait's kill_when asked for the kill
  std::string out;         // what it wrote to stdout (and stderr, with stderr_with_stdout)
  std::string err;         // what it wrote to stderr when captured on its own

  // "exit 3" / "signal 9 (time limit)": for assertion messages.
  std::string Describe() const {
    if (signal == 0) return "exit " + std::to_string(exit_code);
    return "signal " + std::to_string(signal) + (timed_out ? " (time limit)" : "");
  }
};

class ChildProcess {
 public:
  static constexpr std::chrono::milliseconds kNoLimit = std::chrono::milliseconds::max();

  // Starts the child. Throws std::runtime_error when it cannot (no pipe, no fork, a file that
  // cannot be created); a program that cannot be executed ends with exit code 127.
  explicit ChildProcess(const ChildOptions& options) {
    if (options.argv.empty()) throw std::runtime_error("ChildProcess: no argv");
    // Everything the child needs is made before fork: between fork and exec it only calls
    // async-signal-safe functions (the test process may have threads holding locks).
    const std::string program = FindProgram(options);
    std::vector<char*> argv;
    for (const std::string& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    std::vector<char*> envp;
    if (options.env) {
      for (const auto& [key, value] : *options.env) env_strings.push_back(key + "=" + value);
      for (std::string& entry : env_strings) envp.push_back(entry.data());
      envp.push_back(nullptr);
    }
    char* const* child_env = options.env ? envp.data() : environ;

    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, in_pipe[2] = {-1, -1};
    int out_file = -1, err_file = -1;
    auto close_all = [&] {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], in_pipe[0], in_pipe[1],
                     out_file, err_file}) {
        if (fd >= 0) close(fd);
      }
    };
    auto open_file = [&](const std::string& path) {
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        close_all();
        throw std::runtime_error("ChildProcess: cannot create " + path);
      }
      return fd;
    };
    if (options.stdout_file.empty()) {
      if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("ChildProcess: pipe failed");
    } else {
      out_file = open_file(options.stdout_file);
    }
    if (!options.stderr_with_stdout) {
      if (options.stderr_file.empty()) {
        if (pipe2(err_pipe, O_CLOEXEC) != 0) {
          close_all();
          throw std::runtime_error("ChildProcess: pipe failed");
        }
      } else {
        err_file = open_file(options.stderr_file);
      }
    }
    if (!options.stdin_text.empty() && pipe2(in_pipe, O_CLOEXEC) != 0) {
      close_all();
      throw std::runtime_error("ChildProcess: pipe failed");
    }
    const int child_out = out_file >= 0 ? out_file : out_pipe[1];
    const int child_err = options.stderr_with_stdout ? child_out
                          : err_file >= 0            ? err_file
                                                     : err_pipe[1];
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      close_all();
      throw std::runtime_error("ChildProcess: fork failed");
    }
    if (pid_ == 0) {
      if (options.die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
      }
      const int in = in_pipe[0] >= 0 ? in_pipe[0] : open("/dev/null", O_RDONLY);
      dup2(in, STDIN_FILENO);
      dup2(child_out, STDOUT_FILENO);
      dup2(child_err, STDERR_FILENO);
      execve(program.c_str(), argv.data(), child_env);
      _exit(127);
    }
    // The parent keeps the reading ends of the captured streams and the writing end of stdin.
    for (int fd : {out_pipe[1], err_pipe[1], in_pipe[0], out_file, err_file}) {
      if (fd >= 0) close(fd);
    }
    out_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
    in_fd_ = in_pipe[1];
    stdin_text_ = options.stdin_text;
    for (int fd : {out_fd_, err_fd_, in_fd_}) {
      if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    // A child that exits without reading all of its stdin must not end the test with SIGPIPE.
    if (in_fd_ >= 0) signal(SIGPIPE, SIG_IGN);
  }

  // Kills (SIGKILL) and reaps a child still running.
  ~ChildProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      Reap(/*block=*/true);
    }
    for (int fd : {out_fd_, err_fd_, in_fd_}) {
      if (fd >= 0) close(fd);
    }
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Whether it has exited (reaped here, without waiting); its captured output is read meanwhile.
  bool Exited() {
    Pump(std::chrono::milliseconds(0));
    return Reap(/*block=*/false);
  }

  // Sends `signal` unless it has been reaped.
  void Signal(int signal) const {
    if (!reaped_) kill(pid_, signal);
  }

  // Waits up to `limit` for it to exit, reading what it writes and feeding its stdin; nullopt
  // when it still runs then (what it wrote so far is kept for a later call). `kill_when`, asked
  // with its stdout so far after every read and at least every 50 ms, may ask for a SIGKILL
  // (ChildResult::killed); the wait then goes on until it has exited.
  std::optional<ChildResult> WaitFor(
      std::chrono::milliseconds limit,
      const std::function<bool(const std::string& out)>& kill_when = nullptr) {
    const auto start = std::chrono::steady_clock::now();
    while (!Reap(/*block=*/false)) {
      if (kill_when && !result_.killed && kill_when(result_.out)) {
        kill(pid_, SIGKILL);
        result_.killed = true;
      }
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      if (limit != kNoLimit && waited >= limit) return std::nullopt;
      Pump(std::chrono::milliseconds(50));
    }
    // Whatever it wrote before exiting; a grandchild holding the pipe open is not waited for.
    Pump(std::chrono::milliseconds(0));
    return result_;
  }

  // Waits for it to exit; after `limit` it is killed (ChildResult::timed_out).
  ChildResult Wait(std::chrono::milliseconds limit = kNoLimit,
                   const std::function<bool(const std::string& out)>& kill_when = nullptr) {
    if (std::optional<ChildResult> ended = WaitFor(limit, kill_when)) return *ended;
    kill(pid_, SIGKILL);
    result_.timed_out = true;
    Reap(/*block=*/true);
    Pump(std::chrono::milliseconds(0));
    return result_;
  }

 private:
  // argv[0] itself when it names a path; else the first executable of that name in the PATH the
  // child gets; else argv[0] (exec fails: exit code 127).
  static std::string FindProgram(const ChildOptions& options) {
    const std::string& name = options.argv[0];
    if (name.find('/') != std::string::npos) return name;
    std::string path;
    if (options.env) {
      auto it = options.env->find("PATH");
      if (it != options.env->end()) path = it->second;
    } else if (const char* own = std::getenv("PATH")) {
      path = own;
    }
    size_t begin = 0;
    while (begin <= path.size()) {
      size_t end = path.find(':', begin);
      if (end == std::string::npos) end = path.size();
      const std::string candidate =
          (end == begin ? std::string(".") : path.substr(begin, end - begin)) + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      begin = end + 1;
    }
    return name;
  }

  // True once reaped; fills the result's exit fields then.
  bool Reap(bool block) {
    if (reaped_) return true;
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return false;
    reaped_ = true;
    result_.wait_status = status;
    if (r == pid_ && WIFEXITED(status)) {
      result_.exit_code = WEXITSTATUS(status);
    } else if (r == pid_ && WIFSIGNALED(status)) {
      result_.signal = WTERMSIG(status);
    }
    return true;
  }

  // Reads what is there on the captured streams and writes what it can of stdin, waiting up to
  // `timeout` for the first of them to be ready.
  void Pump(std::chrono::milliseconds timeout) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (in_fd_ >= 0) fds.push_back({in_fd_, POLLOUT, 0});
    if (fds.empty()) {
      if (timeout.count() > 0) std::this_thread::sleep_for(timeout);
      return;
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0) return;
    Drain(out_fd_, result_.out);
    Drain(err_fd_, result_.err);
    if (in_fd_ >= 0) {
      while (stdin_written_ < stdin_text_.size()) {
        const ssize_t n =
            write(in_fd_, stdin_text_.data() + stdin_written_, stdin_text_.size() - stdin_written_);
        if (n <= 0) break;
        stdin_written_ += static_cast<size_t>(n);
      }
      if (stdin_written_ == stdin_text_.size() || (errno != EAGAIN && errno != EINTR)) {
        close(in_fd_);
        in_fd_ = -1;
      }
    }
  }

  // Reads `fd` until it would block; closes it (and sets it to -1) at end of file.
  static void Drain(int& fd, std::string& into) {
    if (fd < 0) return;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n > 0) {
        into.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      close(fd);
      fd = -1;
      return;
    }
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int in_fd_ = -1;
  std::string stdin_text_;
  size_t stdin_written_ = 0;
  ChildResult result_;
};

// Starts `options` and waits for it to end (killed after `limit`).
inline ChildResult RunChild(const ChildOptions& options,
                            std::chrono::milliseconds limit = ChildProcess::kNoLimit) {
  ChildProcess child(options);
  return child.Wait(limit);
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_CHILD_PROCESS_H_
