// libFuzzer target: what normd does with the bytes of one Normalize call, without the
// network. The input is the message a client sends; it is parsed by ParseRequest (as the
// raw Normalize method does) and served by fuzz_service.h's Serve: validation, output
// allocation, the scheduler, the CPU kernel and the answer's serialization, with the
// invariants that file lists. Seeds: tests/fuzz/corpus/request (make_seeds.cc).
#include <cstddef>
#include <cstdint>

#include "grpcpp/support/byte_buffer.h"
#include "server/answer_wire.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  normd::fuzz::Initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer buffer(&slice, 1);
  normd::v1::NormalizeRequest request;
  const absl::Status parsed = normd::server::ParseRequest(&buffer, &request);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.code() == absl::StatusCode::kInvalidArgument, "%s",
               parsed.ToString().c_str());
    return 0;
  }
  normd::fuzz::Serve(request, /*registry=*/nullptr);
  return 0;
}
