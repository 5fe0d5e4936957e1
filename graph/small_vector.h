// SmallVector<T, N>: a vector of trivially copyable values that keeps up to N of them inside the
// object and moves to the heap only beyond that. Instruction::tasks and Instruction::deps use it:
// almost every instruction has one or two of each, so a lowered program of half a million
// instructions needs no heap block per instruction (allocating and freeing ~900,000 small blocks
// was a third of `simulate`'s time).
//
// The interface is the part of std::vector the project uses: begin/end (pointers), size, empty,
// operator[], at, front, back, data, push_back, assign, clear, ==. It converts implicitly from a
// std::vector<T> and an initializer list, and compares equal to a std::vector<T> with the same
// elements, so `ins.tasks = item;` and `EXPECT_EQ(ins.deps, (std::vector<int>{0, 4}))` read as
// before. Invariant: the elements live in inline_ while capacity_ == N, in heap_ otherwise.
//
// Usage:
//   SmallVector<int, 2> deps = {3, 7};
//   deps.push_back(9);  // moves to the heap
//   for (int d : deps) ...
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace jaxpp {

template <typename T, int N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector copies its elements with memcpy");
  static_assert(N > 0, "SmallVector needs room for at least one inline element");

 public:
  using value_type = T;
  using size_type = size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVector() : heap_(nullptr) {}
  SmallVector(std::initializer_list<T> values) : SmallVector() {
    assign(values.begin(), values.end());
  }
  SmallVector(const std::vector<T>& values) : SmallVector() {  // NOLINT: implicit on purpose
    assign(values.begin(), values.end());
  }
  SmallVector(const SmallVector& other) : SmallVector() { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept : SmallVector() { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) {
    assert(i < size_ && "SmallVector: index out of range");
    return data()[i];
  }
  const T& operator[](size_t i) const {
    assert(i < size_ && "SmallVector: index out of range");
    return data()[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at: index out of range");
    return data()[i];
  }
  const T& front() const { return (*this)[0]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(const T& value) {
    if (size_ == capacity_) grow(2 * capacity_);
    data()[size_++] = value;
  }
  template <typename It>
  void assign(It first, It last) {
    const auto count = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    if (count > capacity_) grow(count);
    if (count <= static_cast<size_t>(N)) {
      // A fixed-bound loop the compiler unrolls: std::copy would call memmove for a few bytes.
      T* out = data();
      for (int i = 0; i < N; ++i, ++first) {
        if (static_cast<size_t>(i) == count) break;
        out[i] = *first;
      }
    } else {
      std::copy(first, last, data());
    }
    size_ = static_cast<uint32_t>(count);
  }
  void clear() { size_ = 0; }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return capacity_ != N; }
  // Moves the elements to a heap block of `capacity` (> capacity_) elements.
  void grow(size_t capacity) {
    T* block = std::allocator<T>().allocate(capacity);
    if (size_ > 0) std::memcpy(block, data(), size_ * sizeof(T));
    release();
    heap_ = block;
    capacity_ = static_cast<uint32_t>(capacity);
  }
  void release() {
    if (on_heap()) std::allocator<T>().deallocate(heap_, capacity_);
    capacity_ = N;
  }
  // Takes other's elements (this holds none); other is left empty.
  void take(SmallVector& other) {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.on_heap()) {
      heap_ = other.heap_;
    } else {
      std::memcpy(inline_, other.inline_, sizeof(inline_));  // a fixed size: no memmove call
    }
    other.size_ = 0;
    other.capacity_ = N;
  }

  union {
    T inline_[N];
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
};

}  // namespace jaxpp
