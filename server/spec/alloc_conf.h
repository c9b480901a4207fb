// Turns an AllocatorConfig into the value of PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, which
// the caching allocator reads once when CUDA starts (hence a fresh worker per experiment).
#ifndef VRAMLAB_SERVER_SPEC_ALLOC_CONF_H_
#define VRAMLAB_SERVER_SPEC_ALLOC_CONF_H_

#include <string>

#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

// common/spec/allocator_conf.h's string for the spec's allocator settings. Expects a validated
// config.
std::string AllocatorConfString(const vramlab::v1::AllocatorConfig& config);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_ALLOC_CONF_H_
