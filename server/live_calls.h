// Counts the call objects (calls.h) alive on the transport threads' completion queues,
// unmatched listeners included, so that shutdown closes a queue only once nothing can start
// an operation on it. gRPC aborts the process when an operation starts on a closed queue,
// and Server::Shutdown returns before the calls it stopped have seen their last events: a
// stream whose read fails after it still owes gRPC a Finish, and a listener matched just
// before it arms the next listener (which gRPC then fails, the queue being open).
//
// Thread safety: every method may be called from any thread.
#ifndef NORMD_SERVER_LIVE_CALLS_H_
#define NORMD_SERVER_LIVE_CALLS_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace normd::server {

class LiveCalls {
 public:
  // Held by a call object for its whole life: declared as its first member, so that it
  // goes after everything else the object holds (its ServerContext releases the call).
  class Token {
   public:
    explicit Token(LiveCalls* calls);  // null: not counted
    ~Token();
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    LiveCalls* const calls_;
  };

  // True once no call object is alive; false if `timeout` passed first.
  bool AwaitNone(absl::Duration timeout);
  int64_t count() const;

 private:
  mutable absl::Mutex mu_;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_LIVE_CALLS_H_
