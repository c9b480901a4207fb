// The anatomy of training memory as text: one experiment measured next to its prediction
// (`show`, `watch`, `report`), and several experiments side by side with the difference of each
// to the first (`compare`).
#ifndef VRAMLAB_CLIENT_ANATOMY_TABLE_H_
#define VRAMLAB_CLIENT_ANATOMY_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::client {

// One component of device memory. The components add up to peak device use: weights, gradients,
// optimizer state, activations, temporary buffers, allocator cache, CUDA context.
struct AnatomyComponent {
  const char* label;  // "optimizer state"
  const char* key;    // "optimizer_state": CSV/SVG/HTML identifier
  const char* color;  // fill in SVG/HTML
  int64_t (*bytes)(const vramlab::v1::MemoryAnatomy&);
  // Adapter categories: a table lists them only when some anatomy it shows has them.
  bool adapter_only = false;
  // The component among the categories alive at a moment (CategoryBytes); null for the allocator
  // cache and the CUDA context.
  int64_t (*category)(const vramlab::v1::CategoryBytes&) = nullptr;
};
const std::vector<AnatomyComponent>& AnatomyComponents();

// The component at the peak moments: its bytes among the categories alive when allocated peaked,
// the allocator cache where reserved peaked; nullopt where the anatomy has no such moment or the
// component has none (the CUDA context).
std::optional<int64_t> AtPeakBytes(const AnatomyComponent& component,
                                   const vramlab::v1::MemoryAnatomy& anatomy);

// Lines under an anatomy table that say what its two measured columns are: when allocated and
// reserved peaked and what the at-peak column sums to. Empty without peak moments.
std::string PeakMomentNote(const vramlab::v1::MemoryAnatomy& anatomy);

// Whether a view of the anatomies `shown` (null entries ignored) lists `component`: always, except
// the adapter categories, which only when one of them has bytes there.
bool IsShown(const AnatomyComponent& component,
             const std::vector<const vramlab::v1::MemoryAnatomy*>& shown);

// Measured vs predicted; either may be null (its column is left out). Sizes human-readable. A
// measured anatomy with peak moments gets two columns: "at peak allocated" (AtPeakBytes) and "max
// over run" (each category's own maximum, what the estimator predicts), then PeakMomentNote().
std::string RenderAnatomyTable(const vramlab::v1::MemoryAnatomy* measured,
                               const vramlab::v1::MemoryAnatomy* predicted);

// "SUCCEEDED", "OOM in backward (step 0, micro-step 1)", "FAILED: worker killed by signal 11".
std::string OutcomeSummary(const vramlab::v1::Experiment& experiment);

// A legend line per experiment (id, name, settings), then one row per anatomy category with a
// column per experiment and a "vs <first id>" column per further experiment, then speed rows.
std::string RenderCompareTable(const std::vector<vramlab::v1::Experiment>& experiments);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_ANATOMY_TABLE_H_
