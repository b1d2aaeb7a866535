// gRPC channel arguments written as text, `NAME=INTEGER` comma-separated
// ("grpc.http2.max_frame_size=1048576,grpc.http2.lookahead_bytes=4194304"): what normd's
// --grpc-args and the benchmarks' client flags take, for transport tuning and its A/B
// measurements. Parsing only; the caller hands the pairs to gRPC. Thread-safe (pure).
#ifndef NORMD_COMMON_CHANNEL_ARGS_H_
#define NORMD_COMMON_CHANNEL_ARGS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace normd {

using ChannelArgs = std::vector<std::pair<std::string, int>>;

// INVALID_ARGUMENT naming the item when one is not NAME=INTEGER (32-bit).
absl::StatusOr<ChannelArgs> ParseChannelArgs(absl::string_view text);

}  // namespace normd

#endif  // NORMD_COMMON_CHANNEL_ARGS_H_
