#include "normd/common/channel_args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace normd {

absl::StatusOr<ChannelArgs> ParseChannelArgs(absl::string_view text) {
  ChannelArgs out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int value = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtoi(kv[1], &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected NAME=INTEGER items, comma-separated, got '", item, "'"));
    }
    out.emplace_back(std::string(kv[0]), value);
  }
  return out;
}

}  // namespace normd
