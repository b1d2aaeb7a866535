// The NormService calls on gRPC's completion-queue API. For each method a listener waits
// on a transport thread's queue; when a call arrives, its object arms the next listener
// and handles the call on that thread. No transport thread waits on queued compute: the
// scheduler's completion (on an executor, or inline on the transport thread for small
// CPU work) finishes the call, and gRPC hands the finish back to the call's own queue.
//
// Unary Normalize: the request becomes a Work for the scheduler. A call the client
// cancels, or whose deadline passes, takes its Work out of the queue at once
// (Scheduler::Cancel), so its buffers are freed as soon as gRPC reports the call done.
// Echo (DiagnosticsService), GetServerInfo and GetDeepNormCoefficients answer on the
// transport thread.
//
// NormalizeStream / EchoStream: up to ServiceOptions::stream_window requests are read
// ahead and in flight at once; responses are written in request order, one write
// outstanding at a time. A bad request gets a response carrying `error` and the stream
// goes on. Finish comes after the client half-closes and every response is written, or,
// after a cancel or failed write, once no Work of the stream is still in the scheduler.
//
// A call object deletes itself once gRPC has reported both its finish and its end
// (AsyncNotifyWhenDone).
//
// Thread safety: every event of a call runs on the one transport thread that polls its
// queue (one thread per queue); the scheduler's completions come from other threads and
// touch only what the call guards (atomics, and the stream's mutex).
#ifndef NORMD_SERVER_CALLS_H_
#define NORMD_SERVER_CALLS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "normd/v1/normd.grpc.pb.h"
#include "server/call_env.h"

namespace normd::server {

// Normalize, NormalizeStream and EchoStream are raw methods: their messages are ByteBuffers
// that the calls parse and serialize themselves (answer_wire.h), so that a large output
// is sent from the buffer the kernel wrote, not from a copy.
using AsyncService = v1::NormService::WithRawMethod_Normalize<
    v1::NormService::WithRawMethod_NormalizeStream<v1::NormService::AsyncService>>;
using DiagnosticsAsyncService =
    v1::DiagnosticsService::WithRawMethod_EchoStream<v1::DiagnosticsService::AsyncService>;

// Where a call's listener waits: the services, and one transport thread's queue.
struct Listener {
  const CallEnv* env;
  AsyncService* service;
  DiagnosticsAsyncService* diagnostics;  // null when the diagnostics service is off
  grpc::ServerCompletionQueue* cq;
};

// Arms listeners for each unary method (unary_calls.cc) and each stream method
// (stream_call.cc) on `at.cq`; the diagnostics methods only when `at.diagnostics` is set.
void ListenUnary(const Listener& at);
void ListenStreams(const Listener& at);

// The call's deadline (InfiniteFuture when it has none), and the status that answers a
// queued Work of a call gRPC reports cancelled: DEADLINE_EXCEEDED once that deadline
// passed, else CANCELLED.
absl::Time CallDeadline(const grpc::ServerContext& context);
absl::Status CancelReason(const grpc::ServerContext& context);

}  // namespace normd::server

#endif  // NORMD_SERVER_CALLS_H_
