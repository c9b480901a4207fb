// vramlab logs / snapshot: streamed downloads.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/file_io.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

void DeclareLogsFlags(FlagSet& flags) {
  flags.Bool("follow", "keep printing what the worker writes until the experiment ends")
      .Alias('f', "follow");
}

absl::StatusOr<int> RunLogs(CommandEnv& env) {
  ASSIGN_OR_RETURN(std::string id, SingleId(env.args(), "logs"));
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  const bool follow = env.args().GetBool("follow");
  if (env.json()) {
    // One DataChunk holding the whole log (bytes are base64 in protobuf JSON).
    vramlab::v1::DataChunk all;
    RETURN_IF_ERROR(client->DownloadLog(
        id, [&](absl::string_view data) { all.mutable_data()->append(data.data(), data.size()); },
        follow));
    env.PrintJson(all);
    return kExitOk;
  }
  // Text is written as it arrives: logs can be long.
  RETURN_IF_ERROR(client->DownloadLog(
      id,
      [&](absl::string_view data) {
        env.out().write(data.data(), static_cast<std::streamsize>(data.size()));
        if (follow) env.out().flush();
      },
      follow));
  env.out().flush();
  return kExitOk;
}

void DeclareSnapshotFlags(FlagSet& flags) {
  flags.Value("output", "FILE", "where to write the pickle (- for stdout)").Alias('o', "output");
}

absl::StatusOr<int> RunSnapshot(CommandEnv& env) {
  ASSIGN_OR_RETURN(std::string id, SingleId(env.args(), "snapshot"));
  const auto output = env.args().Get("output");
  if (!output.has_value() || output->empty()) {
    return absl::InvalidArgumentError("vramlab snapshot needs -o FILE (or -o - for stdout)");
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  // Buffered, then written atomically: a broken download never leaves a truncated pickle.
  std::string contents;
  const absl::Status downloaded = client->DownloadSnapshot(
      id, [&](absl::string_view data) { contents.append(data.data(), data.size()); });
  if (absl::IsNotFound(downloaded) &&
      absl::StrContains(downloaded.message(), "no allocator snapshot")) {
    return absl::NotFoundError(absl::StrCat(
        downloaded.message(),
        ": only a run on a CUDA daemon submitted with --record-history records one (e.g. "
        "'vramlab submit --record-history ...'); CPU runs never do"));
  }
  RETURN_IF_ERROR(downloaded);
  RETURN_IF_ERROR(WriteFileAtomically(*output, contents));
  if (*output == "-") return kExitOk;
  if (env.json()) {
    google::protobuf::Struct result;
    (*result.mutable_fields())["id"].set_string_value(id);
    (*result.mutable_fields())["path"].set_string_value(*output);
    (*result.mutable_fields())["bytes"].set_number_value(static_cast<double>(contents.size()));
    env.PrintJson(result);
  } else {
    env.out() << "wrote " << contents.size() << " bytes to " << *output
              << " (open it at https://pytorch.org/memory_viz)\n";
  }
  return kExitOk;
}

}  // namespace vramlab::client
