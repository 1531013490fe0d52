#pragma once
// Result<T>: a value or an Error. C++20 has no std::expected, so this is the
// small one Kiln uses everywhere an operation can fail in an expected way.
//
//   Result<Node> r = store.get_node(id);
//   if (!r) return r.error();
//   use(*r);

#include <cassert>
#include <optional>
#include <utility>
#include <variant>

#include "common/error.h"

namespace kiln {

template <typename T>
class [[nodiscard]] Result {
 public:
  // Default: an internal error. Exists because Asio's co_spawn completion
  // needs a default-constructible value; real code always assigns one.
  Result() : v_(Error(Code::kInternal, "result not set")) {}
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }
  Error&& take_error() { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : e_(std::move(error)) {}
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(!ok()); return *e_; }
  Error&& take_error() { assert(!ok()); return std::move(*e_); }

 private:
  std::optional<Error> e_;
};

using Status = Result<void>;
inline Status ok_status() { return Status(); }

}  // namespace kiln
