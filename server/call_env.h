// What every NormService call needs from the server: the scheduler and the transport
// limits, plus the step shared by unary and streaming calls that turns a request into a
// Work (validation, output allocation, queue accounting) and a finished Work's result
// into the response's backend and timing fields.
//
// Thread safety: CallEnv is immutable after construction (the Scheduler is thread-safe);
// the functions are stateless.
#ifndef NORMD_SERVER_CALL_ENV_H_
#define NORMD_SERVER_CALL_ENV_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "normd/scheduling/scheduler.h"
#include "normd/v1/normd.pb.h"
#include "server/auth.h"
#include "server/live_calls.h"
#include "server/memory_budget.h"
#include "server/metrics/metrics.h"
#include "server/shared_memory.h"
#include "server/tensor_checks.h"

namespace normd::server {

struct ServiceOptions {
  Limits limits;
  int64_t max_message_bytes = 0;
  // Requests of one NormalizeStream in flight at once (read ahead of their responses).
  int stream_window = 64;
  std::string cuda_absent_reason;  // for GetServerInfo when there is no CUDA backend
};

struct CallEnv {
  Scheduler* scheduler = nullptr;
  metrics::Metrics* metrics = nullptr;            // every answered request is recorded here
  const TokenAuthenticator* auth = nullptr;       // null: no token required
  SharedMemoryRegistry* shared_memory = nullptr;  // null: --no-shared-memory
  MemoryBudget* memory = nullptr;                 // null: no budget (tests)
  LiveCalls* live_calls = nullptr;                // the call objects; null: not counted
  ServiceOptions options;
};

// Validates `request` and builds its Work, with outputs allocated in `response` (which
// must outlive the Work). `done` is left for the caller to set. On error the response
// holds only the request id.
absl::StatusOr<std::unique_ptr<Work>> MakeWork(const CallEnv& env,
                                               const v1::NormalizeRequest& request,
                                               v1::NormalizeResponse* response, absl::Time deadline,
                                               const std::atomic<bool>* cancelled);

// The budget's reservation for a request whose message is `message_bytes` long, taken
// before it is parsed: the parsed copy and, until MakeWork says exactly, as much again for
// its outputs. OK without a budget.
absl::Status ReserveFor(MemoryBudget* budget, size_t message_bytes,
                        MemoryBudget::Reservation* reservation);

// Fills response.backend and response.timing from a Work that ran; `start` is when the
// call received the request.
void SetTiming(const WorkResult& result, absl::Time start, v1::NormalizeResponse* response);

// Echo: the request's input as the response's output, same id.
void EchoInto(const v1::NormalizeRequest& request, v1::NormalizeResponse* response);

}  // namespace normd::server

#endif  // NORMD_SERVER_CALL_ENV_H_
