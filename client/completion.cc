#include "client/completion.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"

namespace vramlab::client {
namespace {

// What the positional arguments of a command complete to, read from its usage line: "ID" to
// experiment ids ("ID...", "[ID...]" as well), a bare "a|b" word to those words.
struct PositionalCompletion {
  bool ids = false;
  std::vector<std::string> choices;
};

PositionalCompletion CompletionOfPositionals(const Command& command) {
  PositionalCompletion result;
  std::vector<std::string> words = absl::StrSplit(command.usage, ' ', absl::SkipEmpty());
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "ID" || words[i] == "ID..." || words[i] == "[ID...]") result.ids = true;
    // "bash|zsh", but not the value of an optional flag ("[--format text|json]").
    if (absl::StrContains(words[i], '|') && !absl::StartsWith(words[i], "[") &&
        !absl::StartsWith(words[i - 1], "[")) {
      result.choices = absl::StrSplit(words[i], '|');
    }
  }
  return result;
}

// The spellings of a flag on a command line: --name, and -x for its alias.
std::vector<std::string> Spellings(const FlagSet& flags, const FlagSet::Flag& flag) {
  std::vector<std::string> spellings = {absl::StrCat("--", flag.name)};
  for (const auto& [alias, name] : flags.aliases()) {
    if (name == flag.name) spellings.push_back(absl::StrCat("-", std::string(1, alias)));
  }
  return spellings;
}

// ---- bash ----

// `case $prev in ... esac` arms that complete the value after each value flag of `flags`.
std::string BashValueArms(const FlagSet& flags) {
  std::vector<std::string> files, directories, free_form;
  std::string arms;
  for (const FlagSet::Flag& flag : flags.flags()) {
    if (flag.value_name.empty()) continue;
    const std::vector<std::string> spellings = Spellings(flags, flag);
    const ValueCompletion value = CompletionOfValue(flag);
    switch (value.kind) {
      case ValueCompletion::kFile:
        files.insert(files.end(), spellings.begin(), spellings.end());
        break;
      case ValueCompletion::kDirectory:
        directories.insert(directories.end(), spellings.begin(), spellings.end());
        break;
      case ValueCompletion::kChoices:
        absl::StrAppend(&arms, "        ", absl::StrJoin(spellings, "|"),
                        ") COMPREPLY=($(compgen -W \"", absl::StrJoin(value.choices, " "),
                        "\" -- \"$cur\")); return ;;\n");
        break;
      case ValueCompletion::kNone:
        free_form.insert(free_form.end(), spellings.begin(), spellings.end());
        break;
    }
  }
  if (!files.empty()) {
    absl::StrAppend(
        &arms, "        ", absl::StrJoin(files, "|"),
        ") compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n");
  }
  if (!directories.empty()) {
    absl::StrAppend(
        &arms, "        ", absl::StrJoin(directories, "|"),
        ") compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n");
  }
  if (!free_form.empty()) {
    absl::StrAppend(&arms, "        ", absl::StrJoin(free_form, "|"), ") return ;;\n");
  }
  return arms;
}

std::string AllSpellings(const FlagSet& flags) {
  std::vector<std::string> all;
  for (const FlagSet::Flag& flag : flags.flags()) {
    for (std::string& spelling : Spellings(flags, flag)) all.push_back(std::move(spelling));
  }
  return absl::StrJoin(all, " ");
}

std::string BashScript() {
  const FlagSet leading = LeadingFlags();
  // The flags that name the daemon are collected for _vramlab_ids; the other value flags before
  // the command are skipped with their value.
  const std::vector<std::string> connection_flags = {"--addr", "--token", "--ca-cert", "--config"};
  std::vector<std::string> other_value_flags;
  for (const FlagSet::Flag& flag : leading.flags()) {
    const std::string spelling = "--" + flag.name;
    if (!flag.value_name.empty() && std::find(connection_flags.begin(), connection_flags.end(),
                                              spelling) == connection_flags.end()) {
      other_value_flags.push_back(spelling);
    }
  }
  const std::string commands = absl::StrJoin(CommandNames(), " ");
  std::string out = absl::StrCat(
      "# bash completion for vramlab (printed by 'vramlab completion bash'). Install one of:\n"
      "#   vramlab completion bash > ~/.local/share/bash-completion/completions/vramlab\n"
      "#   echo 'source <(vramlab completion bash)' >> ~/.bashrc\n"
      "\n"
      "# The experiment ids 'vramlab ls' prints, asking the daemon named by the arguments.\n"
      "_vramlab_ids() {\n"
      "  command vramlab ls --timeout 2s \"$@\" 2>/dev/null | awk 'NR > 1 { print $1 }'\n"
      "}\n"
      "\n"
      "_vramlab() {\n"
      "  # The line up to the cursor, split at blanks only (COMP_WORDS also splits at '=' and "
      "':').\n"
      "  local -a words\n"
      "  read -ra words <<< \"${COMP_LINE:0:COMP_POINT}\"\n"
      "  [[ ${COMP_LINE:0:COMP_POINT} == *[[:blank:]] ]] && words+=(\"\")\n"
      "  local cur=${words[-1]} prev=${words[-2]}\n"
      "  # --flag=value: complete the value after '=' (bash replaces only the part after it).\n"
      "  if [[ $cur == --*=* ]]; then prev=${cur%%=*}; cur=${cur#*=}; fi\n"
      "  local command=\"\" i\n"
      "  local -a connection=()\n"
      "  for ((i = 1; i < ${#words[@]} - 1; i++)); do\n"
      "    case ${words[i]} in\n"
      "      ",
      absl::StrJoin(connection_flags, "=*|"),
      "=*) connection+=(\"${words[i]}\") ;;\n"
      "      ",
      absl::StrJoin(connection_flags, "|"),
      ") connection+=(\"${words[i]}=${words[i+1]}\"); ((i++)) ;;\n"
      "      ",
      absl::StrJoin(other_value_flags, "|"),
      ") ((i++)) ;;\n"
      "      -*) ;;\n"
      "      *) [[ -z $command ]] && command=${words[i]} ;;\n"
      "    esac\n"
      "  done\n"
      "  local flags\n"
      "  case $command in\n"
      "    \"\")\n"
      "      case $prev in\n",
      BashValueArms(leading),
      "      esac\n"
      "      flags=\"",
      AllSpellings(leading), "\" ;;\n");
  for (const Command& command : AllCommands()) {
    const FlagSet flags = CommandFlags(command);
    absl::StrAppend(&out, "    ", command.name, ")\n      case $prev in\n", BashValueArms(flags),
                    "      esac\n      flags=\"", AllSpellings(flags), "\" ;;\n");
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "  if [[ $cur == -* ]]; then\n"
                  "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
                  "    return\n"
                  "  fi\n"
                  "  case $command in\n"
                  "    \"\"|help) COMPREPLY=($(compgen -W \"",
                  commands, "\" -- \"$cur\")) ;;\n");
  for (const Command& command : AllCommands()) {
    const PositionalCompletion positionals = CompletionOfPositionals(command);
    if (positionals.ids) {
      absl::StrAppend(&out, "    ", command.name,
                      ") COMPREPLY=($(compgen -W \"$(_vramlab_ids \"${connection[@]}\")\" -- "
                      "\"$cur\")) ;;\n");
    } else if (!positionals.choices.empty()) {
      absl::StrAppend(&out, "    ", command.name, ") COMPREPLY=($(compgen -W \"",
                      absl::StrJoin(positionals.choices, " "), "\" -- \"$cur\")) ;;\n");
    }
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "}\n"
                  "complete -F _vramlab vramlab\n");
  return out;
}

// ---- zsh ----

// `text` inside a single-quoted word: quotes closed and reopened.
std::string ZshQuoted(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"'", "'\\''"}});
}

// The explanation of an _arguments spec ("--flag[EXPLANATION]"), brackets escaped.
std::string ZshExplanation(absl::string_view text) {
  return ZshQuoted(absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"[", "\\["}, {"]", "\\]"}}));
}

// The message of an _arguments spec (":MESSAGE:action"), colons escaped.
std::string ZshMessage(absl::string_view text) {
  return ZshQuoted(absl::StrReplaceAll(text, {{"\\", "\\\\"}, {":", "\\:"}}));
}

// One _arguments spec per spelling of each flag of `flags`, each on a line ending in " \\".
std::string ZshFlagSpecs(const FlagSet& flags) {
  std::string specs;
  for (const FlagSet::Flag& flag : flags.flags()) {
    for (const std::string& spelling : Spellings(flags, flag)) {
      const bool is_long = absl::StartsWith(spelling, "--");
      absl::StrAppend(&specs, "    '", spelling);
      if (flag.value_name.empty()) {
        absl::StrAppend(&specs, "[", ZshExplanation(flag.help), "]' \\\n");
        continue;
      }
      const ValueCompletion value = CompletionOfValue(flag);
      std::string action = " ";
      if (value.kind == ValueCompletion::kFile) action = "_files";
      if (value.kind == ValueCompletion::kDirectory) action = "_files -/";
      if (value.kind == ValueCompletion::kChoices) {
        action = absl::StrCat("(", absl::StrJoin(value.choices, " "), ")");
      }
      absl::StrAppend(&specs, is_long ? "=" : "", "[", ZshExplanation(flag.help),
                      "]:", ZshMessage(flag.value_name), ":", action, "' \\\n");
    }
  }
  return specs;
}

std::string ZshScript() {
  std::string out =
      "#compdef vramlab\n"
      "# zsh completion for vramlab (printed by 'vramlab completion zsh'). Install one of:\n"
      "#   vramlab completion zsh > \"${fpath[1]}/_vramlab\"   # a directory in $fpath; then "
      "compinit\n"
      "#   echo 'source <(vramlab completion zsh)' >> ~/.zshrc # after compinit\n"
      "\n"
      "# The experiment ids 'vramlab ls' prints, asking the daemon named on the command line.\n"
      "_vramlab_ids() {\n"
      "  local -a line connection ids\n"
      "  local i\n"
      "  line=(${(z)BUFFER})\n"
      "  for ((i = 2; i <= $#line; i++)); do\n"
      "    case $line[i] in\n"
      "      (--addr|--token|--ca-cert|--config) connection+=(\"$line[i]=$line[i+1]\"); ((i++)) "
      ";;\n"
      "      (--addr=*|--token=*|--ca-cert=*|--config=*) connection+=($line[i]) ;;\n"
      "    esac\n"
      "  done\n"
      "  ids=(${(f)\"$(command vramlab ls --timeout 2s $connection 2>/dev/null | "
      "awk 'NR > 1 { print $1 }')\"})\n"
      "  _describe -t ids 'experiment id' ids\n"
      "}\n"
      "\n"
      "_vramlab() {\n"
      "  local curcontext=$curcontext state line\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const Command& command : AllCommands()) {
    absl::StrAppend(&out, "    '", command.name, ":", ZshQuoted(command.summary), "'\n");
  }
  absl::StrAppend(&out, "    'help:show the help of vramlab or of one command'\n  )\n",
                  "  _arguments -C \\\n", ZshFlagSpecs(LeadingFlags()),
                  "    '1:command:->command' \\\n"
                  "    '*::argument:->argument'\n"
                  "  case $state in\n"
                  "    command) _describe -t commands 'vramlab command' commands ;;\n"
                  "    argument)\n"
                  "      case $words[1] in\n"
                  "        help) _arguments '1:command:(",
                  absl::StrJoin(CommandNames(), " "), ")' ;;\n");
  for (const Command& command : AllCommands()) {
    const PositionalCompletion positionals = CompletionOfPositionals(command);
    std::string positional_spec;
    if (positionals.ids) {
      positional_spec = absl::StrContains(command.usage, "ID...")
                            ? "'*:experiment id:_vramlab_ids'"
                            : "'1:experiment id:_vramlab_ids'";
    } else if (!positionals.choices.empty()) {
      positional_spec =
          absl::StrCat("'1:argument:(", absl::StrJoin(positionals.choices, " "), ")'");
    }
    absl::StrAppend(&out, "        ", command.name, ")\n          _arguments \\\n",
                    ZshFlagSpecs(CommandFlags(command)), "    ", positional_spec, " ;;\n");
  }
  absl::StrAppend(
      &out,
      "      esac ;;\n"
      "  esac\n"
      "}\n"
      "\n"
      "# Autoloaded from $fpath the file is the function's body; sourced, it registers it.\n"
      "if [[ $funcstack[1] == _vramlab ]]; then\n"
      "  _vramlab \"$@\"\n"
      "else\n"
      "  compdef _vramlab vramlab\n"
      "fi\n");
  return out;
}

}  // namespace

ValueCompletion CompletionOfValue(const FlagSet::Flag& flag) {
  ValueCompletion value;
  if (!flag.completions.empty()) {
    value.kind = ValueCompletion::kChoices;
    value.choices = flag.completions;
  } else if (flag.value_name == "FILE") {
    value.kind = ValueCompletion::kFile;
  } else if (flag.value_name == "DIR") {
    value.kind = ValueCompletion::kDirectory;
  } else {
    const std::string first_word(flag.help.substr(0, flag.help.find(' ')));
    if (absl::StrContains(first_word, '|') && !absl::StrContains(first_word, ':')) {
      value.kind = ValueCompletion::kChoices;
      value.choices = absl::StrSplit(first_word, '|');
    }
  }
  return value;
}

absl::StatusOr<std::string> CompletionScript(absl::string_view shell) {
  if (shell == "bash") return BashScript();
  if (shell == "zsh") return ZshScript();
  return absl::InvalidArgumentError(
      absl::StrCat("vramlab completion: unknown shell \"", shell, "\" (bash or zsh)"));
}

}  // namespace vramlab::client
