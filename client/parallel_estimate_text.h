// How `vramlab estimate` shows one rank of a parallel run (MemoryEstimate.parallel) beside the
// one-process prediction: the model states as the sharding lays them out, the gathered
// parameters and communication buffers, the rank's verdict and the world-size search.
#ifndef VRAMLAB_CLIENT_PARALLEL_ESTIMATE_TEXT_H_
#define VRAMLAB_CLIENT_PARALLEL_ESTIMATE_TEXT_H_

#include <string>

#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// Empty when the estimate has no `parallel` part. Otherwise a heading line, a table with the
// columns "one process" and "per rank", the rank's verdict against the limit, and, when a
// world-size search ran, its answer.
std::string RenderParallelEstimate(const vramlab::v1::MemoryEstimate& estimate);

// The estimate's `parallel` part as a one-process estimate of one rank: its anatomy, peak and
// verdict against the estimate's limit, and a sweep's points predicted for one rank, so that the
// one-process views word it alike. The estimate itself when it has no `parallel` part.
vramlab::v1::MemoryEstimate RankAsEstimate(const vramlab::v1::MemoryEstimate& estimate);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_PARALLEL_ESTIMATE_TEXT_H_
