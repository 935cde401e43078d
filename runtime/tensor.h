// Tensor: a typed, shaped view of reference-counted device storage. Storage goes
// back to its allocator (under the category it was requested with) when the last
// view of it is gone. Views share storage; there is no implicit copy of data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace runtime {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);

class Storage {
 public:
  Storage(Allocator& allocator, int64_t bytes, MemoryCategory category);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  MemoryCategory category() const { return category_; }
  DeviceKind device() const { return allocator_.device(); }

 private:
  Allocator& allocator_;
  void* data_;
  int64_t bytes_;
  MemoryCategory category_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: no storage

  // Uninitialized memory of the given shape.
  static Tensor empty(Allocator& allocator, const Shape& shape, DType dtype,
                      MemoryCategory category);
  static Tensor zeros(Allocator& allocator, const Shape& shape, DType dtype,
                      MemoryCategory category);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int index) const { return shape_.at(static_cast<size_t>(index)); }
  int64_t numel() const { return shape_numel(shape_); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  DeviceKind device() const { return storage_->device(); }
  MemoryCategory category() const { return storage_->category(); }

  // A view of `shape` starting `offset` elements into this tensor's data.
  Tensor view(int64_t offset, const Shape& shape) const;
  Tensor reshape(const Shape& shape) const { return view(0, shape); }
  // Rows [first, first + count) along the first dimension, the other dimensions unchanged.
  Tensor rows(int64_t first, int64_t count) const;

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  float* f32() const;
  int32_t* i32() const;
  uint8_t* u8() const;

  // Sets every byte to zero (host tensors only; device backends bring their own).
  void zero_() const;

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
};

// t.rows(first, count), or an undefined tensor when `t` is undefined: the rows of an optional
// per-row input (document starts, which are empty for one document per sequence).
inline Tensor optional_rows(const Tensor& t, int64_t first, int64_t count) {
  return t.defined() ? t.rows(first, count) : Tensor();
}

}  // namespace runtime
