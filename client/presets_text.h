// `vramlab presets`: every model preset (common/spec/model_presets.h) with its family, shapes and
// exact parameter count, as text or JSON.
#ifndef VRAMLAB_CLIENT_PRESETS_TEXT_H_
#define VRAMLAB_CLIENT_PRESETS_TEXT_H_

#include <string>

namespace vramlab::client {

// One row per preset, in ModelPresets()'s order, under a header line; counts with thousands
// separators.
std::string PresetsText();
// {"presets": [{"name": ..., "modelType": ..., "parameterCount": "N", ...}, ...]}; int64 values as
// strings, as protobuf's JSON writes them.
std::string PresetsJson();

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_PRESETS_TEXT_H_
