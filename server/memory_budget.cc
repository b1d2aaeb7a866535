#include "server/memory_budget.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace normd::server {

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

absl::Status MemoryBudget::Reservation::Grow(int64_t bytes) {
  if (budget_ == nullptr || bytes <= 0) return absl::OkStatus();
  absl::StatusOr<Reservation> more = budget_->Reserve(bytes);
  if (!more.ok()) return more.status();
  bytes_ += more->bytes_;
  more->bytes_ = 0;
  return absl::OkStatus();
}

void MemoryBudget::Reservation::Release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Give(bytes_);
  bytes_ = 0;
}

bool MemoryBudget::TryTake(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ > 0 && used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

void MemoryBudget::Give(int64_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  released_.fetch_add(bytes, std::memory_order_relaxed);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(int64_t bytes) {
  Reservation r;
  r.budget_ = this;
  if (bytes <= 0) return r;
  if (!TryTake(bytes)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "server memory budget (--max-memory) exhausted: this request needs %d bytes, %d of "
        "%d are held by requests in progress; retry later or send smaller requests",
        bytes, used(), limit_));
  }
  r.bytes_ = bytes;
  return r;
}

namespace {

// The first line of `path` as a byte count; 0 when absent, "max" or not a number.
int64_t ReadLimit(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return 0;
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v) || v <= 0) return 0;
  return v;
}

}  // namespace

int64_t DefaultMemoryBudget() {
  const int64_t machine = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  int64_t limit = machine;
  // cgroup v1 writes a huge number (about 2^63, page-rounded) for "no limit".
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t v = ReadLimit(path);
    if (v > 0 && v < limit) limit = v;
  }
  return limit / 2;
}

}  // namespace normd::server
