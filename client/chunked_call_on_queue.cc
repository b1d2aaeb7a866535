// The blocking Client::Normalize of a chunked request (ClientOptions::Chunking): the same
// row chunks over one NormalizeStream as chunked_call.cc, driven by the calling thread on
// a completion queue of its own instead of gRPC's callback threads.
//
// Why the caller's thread: on the callback API every write and read completion is handed
// from the thread that polled the socket to a callback thread (a futex wake, and on a VM
// whose idle cores halt, 50-200 us until the woken core runs), while the caller only
// waits. Here the thread that waits in CompletionQueue::Next also polls the channel's
// socket, so a completion is handled where it was found, as one thread reads and writes a
// plain TCP echo (BENCHMARKS.md, "Large tensors").
#include "chunking.h"
#include "grpcpp/completion_queue.h"
#include "normd/client.h"

namespace normd {
namespace {

enum Tag : intptr_t { kStarted = 1, kWritten, kWritesDone, kRead, kFinished };

void* AsTag(Tag t) { return reinterpret_cast<void*>(t); }

}  // namespace

absl::Status Client::NormalizeChunkedOnQueue(std::shared_ptr<const ChunkSource> source,
                                             const ChunkPlan& plan, const CallOptions& c,
                                             v1::NormalizeResponse* into) {
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  Prepare(&context, c);
  ChunkAssembler assembler(source->whole, plan, into);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      Next().generic->PrepareCall(&context, NormalizeStreamMethod(), &cq);
  call->StartCall(AsTag(kStarted));

  const int window = std::max(options_.chunking.window, 1);
  grpc::ByteBuffer writing, part;
  grpc::Status status;
  absl::Status error;  // a chunk's error: the call is cancelled, and this is its result
  int next = 0;        // chunks written or being written
  bool writing_now = false, reading_now = false, closed = false, broken = false;
  bool finishing = false, finished = false;

  // The next chunk when no write is outstanding and the window has room; the half-close
  // after the last.
  const auto write_next = [&] {
    if (writing_now || closed || broken) return;
    if (next == plan.chunks) {
      closed = writing_now = true;
      call->WritesDone(AsTag(kWritesDone));
    } else if (next - assembler.added() < window) {
      writing_now = true;
      writing = MakeChunk(plan, next++, source);
      call->Write(writing, AsTag(kWritten));
    }
  };
  // Finish once nothing is outstanding and no more answers will be read.
  const auto finish_if_idle = [&] {
    if (finishing || writing_now || reading_now) return;
    finishing = true;
    call->Finish(&status, AsTag(kFinished));
  };

  void* tag;
  bool ok;
  while (!finished && cq.Next(&tag, &ok)) {
    switch (static_cast<Tag>(reinterpret_cast<intptr_t>(tag))) {
      case kStarted:
        if (!ok) {  // the call failed to start: Finish says why
          broken = true;
          finish_if_idle();
          break;
        }
        reading_now = true;
        call->Read(&part, AsTag(kRead));
        write_next();
        break;
      case kWritten:
      case kWritesDone:
        writing_now = false;
        if (!ok) broken = true;  // the stream is over; the read side will see it end
        write_next();
        if (broken || assembler.added() == plan.chunks) finish_if_idle();
        break;
      case kRead:
        reading_now = false;
        if (!ok) {  // the server ended the stream
          broken = true;
          finish_if_idle();
          break;
        }
        if (absl::Status s = assembler.Add(&part); !s.ok()) {
          error = std::move(s);
          broken = true;
          context.TryCancel();
        } else if (assembler.added() < plan.chunks) {
          reading_now = true;
          write_next();
          part.Clear();
          call->Read(&part, AsTag(kRead));
          break;
        }
        part.Clear();
        write_next();
        finish_if_idle();
        break;
      case kFinished:
        finished = true;
        break;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  call.reset();
  if (!error.ok()) return error;
  if (!status.ok()) return StatusFromGrpc(status);
  if (assembler.added() != plan.chunks) {
    return absl::InternalError("the server ended the stream before answering every chunk");
  }
  return absl::OkStatus();
}

}  // namespace normd
