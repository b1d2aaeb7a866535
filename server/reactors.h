// The reactors behind NormService's Normalize and NormalizeStream (and their Echo twins):
// per-call state machines of gRPC's callback API. Each deletes itself in OnDone.
//
// Unary: the Work is enqueued from the handler; the scheduler's completion (or the
// handler itself, for inline work and errors) calls Finish. A cancelled or expired call
// takes its Work out of the queue at once (Scheduler::Cancel), so its buffers are freed
// when gRPC calls OnDone.
//
// Stream: up to ServiceOptions::stream_window requests are read ahead and in flight at
// once; responses are written in request order, one write outstanding at a time. A bad
// request gets a response carrying `error` and the stream goes on. Finish comes after the
// client half-closes and every response is written, or, after a cancel or failed write,
// once no Work of the stream is still in the scheduler.
//
// Thread safety: gRPC and the scheduler call into a reactor from several threads; its
// state is guarded by its mutex, and Start* calls are made outside it.
#ifndef NORMD_SERVER_REACTORS_H_
#define NORMD_SERVER_REACTORS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "normd/v1/normd.pb.h"
#include "server/call_env.h"

namespace normd::server {

// The call's deadline (InfiniteFuture when it has none), and the status that answers a
// queued Work of a call gRPC cancelled: DEADLINE_EXCEEDED once that deadline passed,
// else CANCELLED.
absl::Time CallDeadline(const grpc::CallbackServerContext& context);
absl::Status CancelReason(const grpc::CallbackServerContext& context);

grpc::ServerUnaryReactor* StartUnaryNormalize(const CallEnv& env,
                                              grpc::CallbackServerContext* context,
                                              const v1::NormalizeRequest* request,
                                              v1::NormalizeResponse* response);

// echo: answer each request with EchoInto instead of computing.
grpc::ServerBidiReactor<v1::NormalizeRequest, v1::NormalizeResponse>* StartNormalizeStream(
    const CallEnv& env, grpc::CallbackServerContext* context, bool echo);

}  // namespace normd::server

#endif  // NORMD_SERVER_REACTORS_H_
