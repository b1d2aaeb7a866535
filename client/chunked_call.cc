// Client's chunked calls (ClientOptions::Chunking): a large row-wise request sent as row
// chunks over one NormalizeStream, a window of them in flight, and the answers put back
// together in order (chunking.h says why that is bit-identical to one call).
//
// Why a stream of chunks: one gRPC message of 64 MiB is received whole before the server
// parses it, computed whole, then serialized whole before its first byte is sent back, and
// each step runs on one thread. Chunks keep the socket busy in both directions while the
// server computes the chunks that already arrived (BENCHMARKS.md, "Large tensors").
#include "chunking.h"
#include "normd/client.h"

namespace normd {

// One chunked call on gRPC's callback API, its messages written and read by hand
// (chunk_wire.h: no copy of the tensors' bytes into or out of messages). Owns what the
// call reads and writes and deletes itself in OnDone. gRPC allows one read and one write
// outstanding at a time; OnReadDone and OnWriteDone may run at once on different threads,
// so the write side's state is under `mu_`.
class ChunkedCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ChunkedCall(std::shared_ptr<const ChunkSource> source, ChunkPlan plan, int window,
              Client::InfoCallback done, v1::NormalizeResponse* into)
      : source_(std::move(source)),
        plan_(std::move(plan)),
        window_(std::max(window, 1)),
        assembler_(source_->whole, plan_, into),
        done_(std::move(done)) {}

  grpc::ClientContext* context() { return &context_; }
  const std::shared_ptr<CallHandle::State>& handle() { return handle_; }

  // After the stream was bound to this reactor.
  void Start() {
    {
      absl::MutexLock l(&handle_->mu);
      handle_->context = &context_;
    }
    StartRead(&part_);
    {
      absl::MutexLock l(&mu_);
      WriteNext();
    }
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (ok) WriteNext();  // not ok: the call is over, OnDone says why
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone has its status
    absl::Status s = assembler_.Add(&part_);
    part_.Clear();
    if (!s.ok()) {
      error_ = std::move(s);
      context_.TryCancel();
      return;
    }
    {
      absl::MutexLock l(&mu_);
      ++answered_;
      WriteNext();
    }
    if (assembler_.added() < plan_.chunks) StartRead(&part_);
  }

  void OnDone(const grpc::Status& s) override {
    {
      absl::MutexLock l(&handle_->mu);  // a Cancel from now on finds no call
      handle_->context = nullptr;
    }
    const CallInfo info = Client::CallInfoOf(context_);
    absl::StatusOr<v1::NormalizeResponse> result;
    if (!error_.ok()) {
      result = error_;
    } else if (!s.ok()) {
      result = StatusFromGrpc(s);
    } else if (assembler_.added() != plan_.chunks) {
      result = absl::InternalError("the server ended the stream before answering every chunk");
    } else {
      result = assembler_.Take();
    }
    // As Client::StartAsync: the context (and its channel reference) goes before `done`.
    Client::InfoCallback done = std::move(done_);
    delete this;
    done(std::move(result), info);
  }

 private:
  // Writes the next chunk when no write is outstanding and the window has room; half-closes
  // after the last.
  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || closed_) return;
    if (next_ == plan_.chunks) {
      closed_ = true;
      StartWritesDone();
      return;
    }
    if (next_ - answered_ >= window_) return;
    writing_ = true;
    writing_chunk_ = MakeChunk(plan_, next_++, source_);
    StartWrite(&writing_chunk_);
  }

  grpc::ClientContext context_;
  std::shared_ptr<CallHandle::State> handle_ = std::make_shared<CallHandle::State>();
  const std::shared_ptr<const ChunkSource> source_;  // the whole request
  const ChunkPlan plan_;
  const int window_;
  ChunkAssembler assembler_;  // the read side's, one read at a time
  grpc::ByteBuffer part_;     // the read side's
  absl::Status error_;        // a chunk's error, set by the read side before the cancel
  Client::InfoCallback done_;

  absl::Mutex mu_;
  grpc::ByteBuffer writing_chunk_ ABSL_GUARDED_BY(mu_);
  int next_ ABSL_GUARDED_BY(mu_) = 0;      // chunks written or being written
  int answered_ ABSL_GUARDED_BY(mu_) = 0;  // chunks answered
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

std::optional<ChunkPlan> Client::PlanFor(const v1::NormalizeRequest& request) const {
  return PlanChunks(request, options_.chunking.threshold_bytes, options_.chunking.chunk_bytes);
}

bool Client::Chunks(const v1::NormalizeRequest& request) const {
  return PlanFor(request).has_value();
}

CallHandle Client::StartChunked(std::shared_ptr<const ChunkSource> source, ChunkPlan plan,
                                InfoCallback done, const CallOptions& c,
                                v1::NormalizeResponse* into) {
  auto* call = new ChunkedCall(std::move(source), std::move(plan), options_.chunking.window,
                               std::move(done), into);
  CallHandle handle;
  handle.state_ = call->handle();
  Prepare(call->context(), c);
  Next().generic->PrepareBidiStreamingCall(call->context(), NormalizeStreamMethod(),
                                           grpc::StubOptions(), call);
  call->Start();
  return handle;
}

}  // namespace normd
