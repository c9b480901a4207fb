#ifndef VRAMLAB_WORKER_SAFETENSORS_LOAD_ERROR_H_
#define VRAMLAB_WORKER_SAFETENSORS_LOAD_ERROR_H_

#include <stdexcept>
#include <string>

namespace vramlab::worker {

// A weight file that cannot be used; the message names the file and, where one is at fault, the
// tensor.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SAFETENSORS_LOAD_ERROR_H_
