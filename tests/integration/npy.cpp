#include "npy.h"

#include <bit>
#include <cstring>
#include <string_view>

#include "core/files.h"

namespace kipp::npy {
namespace {

static_assert(std::endian::native == std::endian::little, "the reader copies little-endian data as is");

struct Header {
  std::string descr;
  std::vector<size_t> shape;
  size_t data_offset = 0;
};

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 151936), }
// numpy writes the keys in this order, padded with spaces to a 64-byte boundary.
Expected<Header> parse_header(const std::string& bytes, const std::string& path) {
  constexpr std::string_view kMagic = "\x93NUMPY";
  if (bytes.size() < 10 || std::string_view(bytes).substr(0, kMagic.size()) != kMagic)
    return make_error(path + ": not a .npy file (bad magic)");
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t length_bytes = 0;
  if (major == 1) {
    length_bytes = 2;
  } else if (major == 2 || major == 3) {
    length_bytes = 4;
  } else {
    return make_error(path + ": .npy format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (bytes.size() < 8 + length_bytes) return make_error(path + ": truncated header");
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) header_length |= size_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  Header header;
  header.data_offset = 8 + length_bytes + header_length;
  if (header.data_offset > bytes.size()) return make_error(path + ": header runs past the end of the file");
  const std::string_view dict(bytes.data() + 8 + length_bytes, header_length);

  const auto value_after = [&](std::string_view key) -> Expected<std::string_view> {
    const size_t at = dict.find(key);
    if (at == std::string_view::npos) return make_error(path + ": header lacks " + std::string(key));
    std::string_view rest = dict.substr(at + key.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    return rest;
  };

  auto descr = value_after("'descr':");
  if (!descr.ok()) return descr.error();
  if (descr->size() < 2 || descr->front() != '\'') return make_error(path + ": malformed descr");
  const size_t descr_end = descr->find('\'', 1);
  if (descr_end == std::string_view::npos) return make_error(path + ": malformed descr");
  header.descr = std::string(descr->substr(1, descr_end - 1));

  auto order = value_after("'fortran_order':");
  if (!order.ok()) return order.error();
  if (!order->starts_with("False")) return make_error(path + ": Fortran-order arrays are not supported");

  auto shape = value_after("'shape':");
  if (!shape.ok()) return shape.error();
  if (shape->empty() || shape->front() != '(') return make_error(path + ": malformed shape");
  const size_t shape_end = shape->find(')');
  if (shape_end == std::string_view::npos) return make_error(path + ": malformed shape");
  std::string_view dims = shape->substr(1, shape_end - 1);
  while (!dims.empty()) {
    while (!dims.empty() && (dims.front() == ' ' || dims.front() == ',')) dims.remove_prefix(1);
    if (dims.empty()) break;
    size_t dim = 0, digits = 0;
    while (digits < dims.size() && dims[digits] >= '0' && dims[digits] <= '9')
      dim = dim * 10 + static_cast<size_t>(dims[digits++] - '0');
    if (digits == 0) return make_error(path + ": malformed shape " + std::string(shape->substr(0, shape_end + 1)));
    header.shape.push_back(dim);
    dims.remove_prefix(digits);
  }
  return header;
}

template <typename T>
Expected<Array<T>> read_typed(const std::string& path, std::string_view expected_descr) {
  auto bytes = read_text_file(path);
  if (!bytes.ok()) return bytes.error();
  auto header = parse_header(*bytes, path);
  if (!header.ok()) return header.error();
  if (header->descr != expected_descr)
    return make_error(path + ": dtype '" + header->descr + "', expected '" + std::string(expected_descr) + "'");
  size_t count = 1;
  for (size_t dim : header->shape) count *= dim;
  const size_t data_bytes = bytes->size() - header->data_offset;
  if (data_bytes != count * sizeof(T))
    return make_error(path + ": " + std::to_string(data_bytes) + " data bytes, the shape needs " +
                      std::to_string(count * sizeof(T)));
  Array<T> array;
  array.shape = std::move(header->shape);
  array.values.resize(count);
  std::memcpy(array.values.data(), bytes->data() + header->data_offset, data_bytes);
  return array;
}

}  // namespace

Expected<Array<float>> read_float32(const std::string& path) { return read_typed<float>(path, "<f4"); }
Expected<Array<int64_t>> read_int64(const std::string& path) { return read_typed<int64_t>(path, "<i8"); }

}  // namespace kipp::npy
