#include "server/auth/token_file.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/auth/flag_file.h"

namespace vramlab::server {

absl::StatusOr<TokenTable> ParseTokenFile(const std::string& content) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth tokens line ", line_number, ": expected \"TOKEN USER ROLE\""));
    }
    absl::string_view role = fields[2];
    const bool commands = absl::ConsumeSuffix(&role, ",commands");
    if (role != "user" && role != "admin") {
      return absl::InvalidArgumentError(
          absl::StrCat("auth tokens line ", line_number,
                       ": role must be user or admin, optionally with ,commands (user,commands)"));
    }
    if (fields[0].size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth tokens line ", line_number, ": token shorter than 16 characters"));
    }
    Principal principal{std::string(fields[1]), role == "admin", commands};
    if (!table.emplace(std::string(fields[0]), principal).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth tokens line ", line_number, ": duplicate token"));
    }
  }
  if (table.empty()) return absl::InvalidArgumentError("auth tokens file has no tokens");
  return table;
}

absl::StatusOr<TokenTable> LoadTokenFile(const std::string& path) {
  auto content = ReadFlagFile("--auth-tokens", path, {.owner_only = true});
  if (!content.ok()) return content.status();
  return ParseTokenFile(*content);
}

}  // namespace vramlab::server
