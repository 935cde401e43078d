// Tensor views and their storage.
#include "runtime/tensor.h"

#include <cstring>

#include "runtime/memory_timeline.h"

namespace runtime {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

Storage::Storage(Allocator& allocator, int64_t bytes, MemoryCategory category)
    : allocator_(allocator),
      data_(allocator.allocate(bytes, category)),
      bytes_(bytes),
      category_(category) {
  if (memory_timeline::recording())
    memory_timeline::detail::allocated(allocator_, data_, bytes_, category_);
}

Storage::~Storage() {
  if (memory_timeline::recording())
    memory_timeline::detail::freed(allocator_, data_, bytes_, category_);
  allocator_.deallocate(data_, bytes_, category_);
}

Tensor Tensor::empty(Allocator& allocator, const Shape& shape, DType dtype,
                     MemoryCategory category) {
  for (int64_t d : shape) TRAINER_ASSERT(d >= 0, "negative dimension in " << shape_string(shape));
  Tensor t;
  t.storage_ =
      std::make_shared<Storage>(allocator, shape_numel(shape) * dtype_size(dtype), category);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(Allocator& allocator, const Shape& shape, DType dtype,
                     MemoryCategory category) {
  Tensor t = empty(allocator, shape, dtype, category);
  t.zero_();
  return t;
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  TRAINER_ASSERT(!shape_.empty() && shape_[0] > 0, "rows of " << shape_string(shape_));
  Shape shape = shape_;
  shape[0] = count;
  return view(first * (numel() / shape_[0]), shape);
}

Tensor Tensor::view(int64_t offset, const Shape& shape) const {
  TRAINER_ASSERT(defined(), "view of an undefined tensor");
  const int64_t end = offset + shape_numel(shape);
  TRAINER_ASSERT(offset >= 0 && end <= numel(),
                 "view [" << offset << ", " << end << ") outside " << shape_string(shape_));
  Tensor t = *this;
  t.offset_bytes_ = offset_bytes_ + offset * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

float* Tensor::f32() const {
  TRAINER_ASSERT(dtype_ == DType::f32, "tensor is " << dtype_name(dtype_) << ", not f32");
  return data<float>();
}

int32_t* Tensor::i32() const {
  TRAINER_ASSERT(dtype_ == DType::i32, "tensor is " << dtype_name(dtype_) << ", not i32");
  return data<int32_t>();
}

uint8_t* Tensor::u8() const {
  TRAINER_ASSERT(dtype_ == DType::u8, "tensor is " << dtype_name(dtype_) << ", not u8");
  return data<uint8_t>();
}

void Tensor::zero_() const {
  TRAINER_ASSERT(device() == DeviceKind::cpu, "zero_ on a device tensor");
  if (numel() > 0) std::memset(raw(), 0, static_cast<size_t>(nbytes()));
}

}  // namespace runtime
