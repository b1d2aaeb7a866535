// NORMD_SANITIZED: 1 in builds under AddressSanitizer or ThreadSanitizer (GCC's and
// Clang's spellings), else 0. Their allocators keep freed memory (ASan's quarantine) or
// shadow it, so tests that bound memory or read malloc's figures skip themselves there.
//
// Thread safety: a macro.
#ifndef NORMD_TESTS_SERVER_SANITIZED_H_
#define NORMD_TESTS_SERVER_SANITIZED_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NORMD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NORMD_SANITIZED 1
#endif
#endif
#ifndef NORMD_SANITIZED
#define NORMD_SANITIZED 0
#endif

#endif  // NORMD_TESTS_SERVER_SANITIZED_H_
