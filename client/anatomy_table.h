// The anatomy of training memory as text: one experiment measured next to its prediction
// (`show`, `watch`, `report`), and several experiments side by side with the difference of each
// to the first (`compare`).
#ifndef VRAMLAB_CLIENT_ANATOMY_TABLE_H_
#define VRAMLAB_CLIENT_ANATOMY_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// One component of device memory. The components add up to peak device use: weights, gradients,
// optimizer state, activations, temporary buffers, allocator cache, CUDA context.
struct AnatomyComponent {
  const char* label;     // "optimizer state"
  const char* key;       // "optimizer_state": CSV/SVG/HTML identifier
  const char* color;     // fill in SVG/HTML
  int64_t (*bytes)(const vramlab::v1::MemoryAnatomy&);
  // Adapter categories: a table lists them only when some anatomy it shows has them.
  bool adapter_only = false;
};
const std::vector<AnatomyComponent>& AnatomyComponents();

// Whether a view of the anatomies `shown` (null entries ignored) lists `component`: always, except
// the adapter categories, which only when one of them has bytes there.
bool IsShown(const AnatomyComponent& component, const std::vector<const vramlab::v1::MemoryAnatomy*>& shown);

// Measured vs predicted; either may be null (its column is left out). Sizes human-readable.
std::string RenderAnatomyTable(const vramlab::v1::MemoryAnatomy* measured,
                               const vramlab::v1::MemoryAnatomy* predicted);

// "SUCCEEDED", "OOM in backward (step 0, micro-step 1)", "FAILED: worker killed by signal 11".
std::string OutcomeSummary(const vramlab::v1::Experiment& experiment);

// A legend line per experiment (id, name, settings), then one row per anatomy category with a
// column per experiment and a "vs <first id>" column per further experiment, then speed rows.
std::string RenderCompareTable(const std::vector<vramlab::v1::Experiment>& experiments);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_ANATOMY_TABLE_H_
