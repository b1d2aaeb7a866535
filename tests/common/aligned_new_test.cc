// Our programs' global operator new (common/aligned_new.cc, linked into this test as into
// normd, normbench and normctl): large blocks start on a cache line, wherever the C++
// runtime and protobuf allocate them (a parsed request's tensor bytes above all);
// tensor-sized blocks are advised for transparent huge pages; small ones still work; every
// form frees what it allocated (the ASan suite runs this test too).
#include "normd/common/aligned_new.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "normd/v1/normd.pb.h"

namespace normd {
namespace {

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kLargeBlockAlignment == 0; }

TEST(AlignedNewTest, LargeBlocksStartOnACacheLineInEveryForm) {
  // Sizes glibc's malloc would place 16 bytes past a page (above its mmap threshold) or at
  // any multiple of 16 in its heap, and uneven ones.
  for (size_t n : {kAlignFromBytes, kAlignFromBytes + 1, size_t{100000}, size_t{1} << 20,
                   (size_t{64} << 20) + 12}) {
    std::vector<std::unique_ptr<char[]>> keep;  // several at once, so they are not one block
    for (int k = 0; k < 4; ++k) {
      keep.emplace_back(new char[n]);
      EXPECT_TRUE(Aligned(keep.back().get())) << n;
      keep.back()[n - 1] = 1;  // the whole size is usable
    }
    void* one = ::operator new(n);
    EXPECT_TRUE(Aligned(one)) << n;
    ::operator delete(one);
    void* quiet = ::operator new(n, std::nothrow);
    ASSERT_NE(quiet, nullptr);
    EXPECT_TRUE(Aligned(quiet)) << n;
    ::operator delete(quiet, std::nothrow);
  }
}

TEST(AlignedNewTest, SmallBlocksAndZeroBytesAreUsable) {
  std::vector<std::unique_ptr<int[]>> keep;
  for (size_t n : {size_t{0}, size_t{1}, size_t{24}, size_t{4096}, kAlignFromBytes / 4 - 1}) {
    keep.emplace_back(new int[n + 1]);
    keep.back()[n] = static_cast<int>(n);
  }
  void* zero = ::operator new(0);
  EXPECT_NE(zero, nullptr);
  ::operator delete(zero);
}

TEST(AlignedNewTest, AParsedRequestsTensorBytesStartOnACacheLine) {
  // What the server's parse does: protobuf fills a `bytes` field from the wire.
  v1::Tensor sent;
  sent.set_dtype(v1::DATA_TYPE_F32);
  sent.add_shape(64);
  sent.add_shape(4096);
  sent.mutable_data()->assign(64 * 4096 * 4, '\x01');
  const std::string wire = sent.SerializeAsString();
  for (int k = 0; k < 4; ++k) {
    v1::Tensor parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire));
    ASSERT_EQ(parsed.data().size(), sent.data().size());
    EXPECT_TRUE(Aligned(parsed.data().data()));
  }
}

// The VmFlags of the mapping that holds `at`, from /proc/self/smaps ("" where none does).
std::string VmFlagsAt(uintptr_t at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Also under AddressSanitizer, whose allocator maps such blocks on their own as glibc does.
TEST(AlignedNewTest, TensorSizedBlocksAreAdvisedForHugePages) {
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  for (size_t n : {kHugePageAdviceBytes, (size_t{64} << 20) + 12}) {
    std::unique_ptr<char[]> block(new char[n]);
    const uintptr_t p = reinterpret_cast<uintptr_t>(block.get());
    // It starts on a huge page, so that all its whole huge pages are its own (a 4 MiB block
    // 4 KiB past a boundary would hold only one); the first and the last, before anything
    // touched them.
    EXPECT_EQ(p % kHugePageBytes, 0u) << n;
    const uintptr_t last = p + (n / kHugePageBytes - 1) * kHugePageBytes;
    for (const uintptr_t page : {p, last}) {
      EXPECT_NE(VmFlagsAt(page).find(" hg"), std::string::npos) << n << ": " << VmFlagsAt(page);
    }
    block[n - 1] = 1;
  }
}

}  // namespace
}  // namespace normd
