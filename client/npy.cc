#include "npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace normd {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// Value of 'key' in the header dict, up to the next top-level comma or brace. A header that
// ends early (a file cut short, or not written by NumPy) is INVALID_ARGUMENT.
absl::StatusOr<std::string> DictValue(const std::string& header, const std::string& key,
                                      const std::string& what) {
  const size_t k = header.find("'" + key + "'");
  const size_t colon = k == std::string::npos ? k : header.find(':', k);
  if (colon == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(what, ": .npy header has no '", key, "'"));
  size_t p = colon + 1;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t end = p;
  if (p < header.size() && (header[p] == '(' || header[p] == '\'')) {
    end = header.find(header[p] == '(' ? ')' : '\'', p + 1);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": .npy header's '", key, "' is not closed"));
    }
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  return header.substr(p, end - p);
}

}  // namespace

absl::StatusOr<HostTensor> ParseNpy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a .npy file"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": .npy format version ", major, " not supported (expected 1, 2 or 3)"));
  }
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12)
      return absl::InvalidArgumentError(absl::StrCat(what, ": truncated .npy header"));
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  if (bytes.size() < offset + header_len)
    return absl::InvalidArgumentError(absl::StrCat(what, ": truncated .npy header"));
  const std::string header = bytes.substr(offset, header_len);
  absl::StatusOr<std::string> descr = DictValue(header, "descr", what);
  absl::StatusOr<std::string> fortran = DictValue(header, "fortran_order", what);
  absl::StatusOr<std::string> shape_text = DictValue(header, "shape", what);
  for (const auto* s : {&descr, &fortran, &shape_text}) {
    if (!s->ok()) return s->status();
  }
  if (*fortran != "False")
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Fortran-order arrays are not supported"));
  HostTensor t;
  std::string inner(absl::StripSuffix(absl::StripPrefix(*shape_text, "("), ")"));
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": bad shape ", *shape_text));
    }
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": bad shape ", *shape_text));
    t.shape.push_back(d);
  }
  if (t.shape.empty()) t.shape.push_back(1);  // a 0-d array travels as [1]
  const std::string data = bytes.substr(offset + header_len);
  // The element count. The dims other than zeros must multiply within 2^48 (far more
  // elements than a file holds), so that no product here or in HostTensor::numel()
  // overflows even when a zero dim makes the tensor empty.
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : t.shape) {
    if (d == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(nonzero, d, &nonzero) || nonzero > (int64_t{1} << 48)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", *shape_text, " too large"));
    }
  }
  const int64_t n = empty ? 0 : nonzero;
  if (*descr == "'<f4'" || *descr == "'<f2'") {
    t.dtype = *descr == "'<f4'" ? DType::kF32 : DType::kF16;
    if (static_cast<int64_t>(data.size()) != n * ElementSize(t.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", n * ElementSize(t.dtype),
                                                     " data bytes, got ", data.size()));
    }
    t.bytes = data;
    return t;
  }
  if (*descr == "'<f8'") {
    if (static_cast<int64_t>(data.size()) != n * 8) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": expected ", n * 8, " data bytes, got ", data.size()));
    }
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, data.data() + 8 * i, 8);
      values[i] = static_cast<float>(d);
    }
    return HostTensor::FromFloats(DType::kF32, t.shape, values);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": dtype ", *descr, " not supported (expected <f2, <f4 or <f8)"));
}

std::string SerializeNpy(const HostTensor& t) {
  HostTensor f32;
  const HostTensor* src = &t;
  if (t.dtype == DType::kBF16) {
    f32 = HostTensor::FromFloats(DType::kF32, t.shape, t.ToFloats());
    src = &f32;
  }
  std::string shape = absl::StrJoin(src->shape, ", ");
  if (src->shape.size() == 1) shape += ",";
  std::string header = absl::StrCat("{'descr': '", src->dtype == DType::kF16 ? "<f2" : "<f4",
                                    "', 'fortran_order': False, 'shape': (", shape, "), }");
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out += src->bytes;
  return out;
}

absl::StatusOr<HostTensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseNpy(ss.str(), path);
}

absl::Status WriteNpy(const std::string& path, const HostTensor& t) {
  std::ofstream out(path, std::ios::binary);
  const std::string bytes = SerializeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace normd
