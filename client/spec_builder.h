// Turns `vramlab submit` / `vramlab estimate` flags into an ExperimentSpec: an optional --spec
// file (protobuf text format or canonical JSON) first, then every flag given on top of it.
#ifndef VRAMLAB_CLIENT_SPEC_BUILDER_H_
#define VRAMLAB_CLIENT_SPEC_BUILDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/flag_set.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::client {

// Declares the spec flags (--spec, --preset, --micro-batch, ...) on `flags`.
void AddSpecFlags(FlagSet& flags);

// Parses a spec in canonical JSON (text starting with '{') or protobuf text format. Unknown
// fields are rejected. INVALID_ARGUMENT names `origin` (a file name) and the parser's complaint.
absl::StatusOr<vramlab::v1::ExperimentSpec> ParseSpecText(absl::string_view text,
                                                          absl::string_view origin);

// Reads and parses a spec file ("-" is stdin).
absl::StatusOr<vramlab::v1::ExperimentSpec> LoadSpecFile(const std::string& path);

// The spec from --spec (if given) with every other spec flag applied on top. INVALID_ARGUMENT
// names the offending flag.
absl::StatusOr<vramlab::v1::ExperimentSpec> BuildSpec(const ParsedArgs& args);

// Applies an allocator setting list such as "expandable_segments:True,max_split_size_mb:128" to
// `config`: known keys go to their fields, the rest to `extra` verbatim.
absl::Status ApplyAllocConf(absl::string_view text, vramlab::v1::AllocatorConfig& config);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_SPEC_BUILDER_H_
