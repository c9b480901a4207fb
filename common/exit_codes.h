// Exit codes of vramlab-worker: the half of the worker protocol that is not a WorkerEvent. The
// worker returns them and the daemon classifies them (server/supervise/exit_classifier.cc), so both
// include this one header; it has no dependencies, and the daemon still links no LibTorch.
#ifndef VRAMLAB_COMMON_EXIT_CODES_H_
#define VRAMLAB_COMMON_EXIT_CODES_H_

namespace vramlab::worker {

inline constexpr int kExitSucceeded = 0;
inline constexpr int kExitInternalError = 1;
inline constexpr int kExitInvalidSpec = 2;
inline constexpr int kExitOutOfMemory = 3;
inline constexpr int kExitLoadFailed = 4;

}  // namespace vramlab::worker

#endif  // VRAMLAB_COMMON_EXIT_CODES_H_
