#include "server/live_calls.h"

namespace normd::server {

LiveCalls::Token::Token(LiveCalls* calls) : calls_(calls) {
  if (calls_ == nullptr) return;
  absl::MutexLock l(&calls_->mu_);
  ++calls_->live_;
}

LiveCalls::Token::~Token() {
  if (calls_ == nullptr) return;
  absl::MutexLock l(&calls_->mu_);
  --calls_->live_;
}

bool LiveCalls::AwaitNone(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](int64_t* live) { return *live == 0; }, &live_),
                              timeout);
}

int64_t LiveCalls::count() const {
  absl::MutexLock l(&mu_);
  return live_;
}

}  // namespace normd::server
