#include "client/completion.h"

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CompletionOfValueTest, FilesDirectoriesAndChoicesFromTheDeclaration) {
  EXPECT_EQ(CompletionOfValue({"spec", "FILE", "start from this spec"}).kind,
            ValueCompletion::kFile);
  EXPECT_EQ(CompletionOfValue({"weights-dir", "DIR", "HF snapshot"}).kind,
            ValueCompletion::kDirectory);
  const ValueCompletion dtype = CompletionOfValue({"dtype", "T", "bf16|fp32|fp16"});
  EXPECT_EQ(dtype.kind, ValueCompletion::kChoices);
  EXPECT_THAT(dtype.choices, ElementsAre("bf16", "fp32", "fp16"));
  const ValueCompletion format = CompletionOfValue({"format", "F", "text|json|csv (default text)"});
  EXPECT_THAT(format.choices, ElementsAre("text", "json", "csv"));
  // "every:K" is a pattern, not a word to complete.
  EXPECT_EQ(CompletionOfValue({"checkpointing", "MODE", "none|all|every:K"}).kind,
            ValueCompletion::kNone);
  EXPECT_EQ(CompletionOfValue({"steps", "N", "optimizer steps"}).kind, ValueCompletion::kNone);
  // Declared values win over the help text.
  const ValueCompletion preset =
      CompletionOfValue({"preset", "MODEL", "tiny, qwen2.5-0.5b", {"tiny", "qwen2.5-0.5b"}});
  EXPECT_EQ(preset.kind, ValueCompletion::kChoices);
  EXPECT_THAT(preset.choices, ElementsAre("tiny", "qwen2.5-0.5b"));
}

TEST(CompletionScriptTest, BashNamesEveryCommandAndFlag) {
  auto script = CompletionScript("bash");
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_THAT(*script, HasSubstr("complete -F _vramlab vramlab"));
  for (const Command& command : AllCommands()) {
    EXPECT_THAT(*script, HasSubstr(absl::StrCat("    ", command.name, ")\n"))) << command.name;
    const FlagSet flags = CommandFlags(command);
    for (const FlagSet::Flag& flag : flags.flags()) {
      EXPECT_THAT(*script, HasSubstr("--" + flag.name)) << command.name << " --" << flag.name;
    }
  }
  EXPECT_THAT(*script, HasSubstr("--dtype) COMPREPLY=($(compgen -W \"bf16 fp32 fp16\""));
  EXPECT_THAT(*script, HasSubstr("--output|-o|"));
  // --preset completes to every preset of common/spec/model_presets.
  EXPECT_THAT(*script, HasSubstr("--preset) COMPREPLY=($(compgen -W \"qwen2.5-0.5b "));
  EXPECT_THAT(*script, HasSubstr(" tiny\" -- \"$cur\")); return ;;"));
}

TEST(CompletionScriptTest, ZshDescribesCommandsAndFlagValues) {
  auto script = CompletionScript("zsh");
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_THAT(*script, HasSubstr("#compdef vramlab\n"));
  for (const Command& command : AllCommands()) {
    EXPECT_THAT(*script, HasSubstr(absl::StrCat("    '", command.name, ":"))) << command.name;
  }
  EXPECT_THAT(*script, HasSubstr("'--attention=[eager|sdpa]:IMPL:(eager sdpa)'"));
  EXPECT_THAT(*script, HasSubstr("'--addr=[daemon address (env VRAMLAB_ADDR; default "
                                 "127.0.0.1:7433)]:HOST\\:PORT: '"));
  EXPECT_THAT(*script, HasSubstr("'*:experiment id:_vramlab_ids'"));  // compare ID ID...
  EXPECT_THAT(*script, HasSubstr(":MODEL:(qwen2.5-0.5b "));
}

TEST(CompletionScriptTest, UnknownShellNamesTheKnownOnes) {
  auto fish = CompletionScript("fish");
  EXPECT_EQ(fish.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(fish.status().message()), HasSubstr("bash or zsh"));
}

}  // namespace
}  // namespace vramlab::client
