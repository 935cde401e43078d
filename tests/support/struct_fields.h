// for_each_field(args, f): calls f(field) on every field of an aggregate (an operator's argument
// struct), in declaration order, so test code can visit an op's tensors without a second list
// of their names. Fields are counted by aggregate initialisation and bound by structured
// bindings; at most kMaxFields, no base classes, no arrays.
#pragma once

#include <cstddef>
#include <type_traits>

namespace test_support {

namespace detail {

// Converts to any field type; only ever used unevaluated, to count fields.
struct AnyField {
  template <class T>
  operator T() const;  // NOLINT(google-explicit-constructor): that is its job
};

// The number of fields of aggregate T: the most initialisers T{...} accepts.
template <class T, class... Initialisers>
constexpr size_t field_count() {
  if constexpr (requires { T{Initialisers{}..., AnyField{}}; }) {
    return field_count<T, Initialisers..., AnyField>();
  } else {
    return sizeof...(Initialisers);
  }
}

template <class F, class... Fields>
void visit_fields(F&& f, Fields&... fields) {
  (f(fields), ...);
}

}  // namespace detail

inline constexpr size_t kMaxFields = 12;

template <class Args, class F>
void for_each_field(Args& args, F&& f) {
  using T = std::remove_cv_t<Args>;
  static_assert(std::is_aggregate_v<T>, "for_each_field takes an aggregate");
  constexpr size_t n = detail::field_count<T>();
  static_assert(n >= 1 && n <= kMaxFields, "for_each_field: 1 to kMaxFields fields");
  // One structured binding per field count: C++ has no other way to name an aggregate's fields.
  if constexpr (n == 1) {
    auto& [f1] = args;
    detail::visit_fields(f, f1);
  } else if constexpr (n == 2) {
    auto& [f1, f2] = args;
    detail::visit_fields(f, f1, f2);
  } else if constexpr (n == 3) {
    auto& [f1, f2, f3] = args;
    detail::visit_fields(f, f1, f2, f3);
  } else if constexpr (n == 4) {
    auto& [f1, f2, f3, f4] = args;
    detail::visit_fields(f, f1, f2, f3, f4);
  } else if constexpr (n == 5) {
    auto& [f1, f2, f3, f4, f5] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5);
  } else if constexpr (n == 6) {
    auto& [f1, f2, f3, f4, f5, f6] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6);
  } else if constexpr (n == 7) {
    auto& [f1, f2, f3, f4, f5, f6, f7] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7);
  } else if constexpr (n == 8) {
    auto& [f1, f2, f3, f4, f5, f6, f7, f8] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7, f8);
  } else if constexpr (n == 9) {
    auto& [f1, f2, f3, f4, f5, f6, f7, f8, f9] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7, f8, f9);
  } else if constexpr (n == 10) {
    auto& [f1, f2, f3, f4, f5, f6, f7, f8, f9, f10] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10);
  } else if constexpr (n == 11) {
    auto& [f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11);
  } else {
    auto& [f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12] = args;
    detail::visit_fields(f, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12);
  }
}

}  // namespace test_support
