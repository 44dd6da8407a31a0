package nvrtc

// StdHeaders are the few C++ standard headers device code includes, written
// for NVRTC, which ships none of them (nvcc takes them from the host
// compiler): <cstdint>, <cstddef>, <cmath> (its macros; the math functions
// are NVRTC built-ins) and <type_traits> (the traits GoFlash's kernels use;
// NVRTC provides std::move itself). Pass them as program headers; each defines only what device
// code needs.
func StdHeaders() []Header {
	return []Header{
		{"cstdint", stdint},
		{"stdint.h", stdint},
		{"cstddef", stddef},
		{"stddef.h", stddef},
		{"cmath", cmath},
		{"math.h", cmath},
		{"climits", climits},
		{"type_traits", typeTraits},
	}
}

const stdint = `#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t;
}
`

const stddef = `#pragma once
typedef decltype(sizeof(0)) size_t;
typedef decltype((char*)0 - (char*)0) ptrdiff_t;
namespace std { using ::size_t; using ::ptrdiff_t; typedef decltype(nullptr) nullptr_t; }
#ifndef offsetof
#define offsetof(T, m) ((size_t)__INTADDR__(&(((T*)0)->m))) /* EDG's own: NVRTC has no __builtin_offsetof */
#endif
`

// cmath's constants are device intrinsics: NVRTC has no __builtin_huge_valf.
const cmath = `#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
`

const climits = `#pragma once
#ifndef INT_MAX
#define CHAR_BIT 8
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295u
#define LLONG_MAX 9223372036854775807LL
#define LLONG_MIN (-9223372036854775807LL - 1)
#endif
`

const typeTraits = `#pragma once
namespace std {
template <class T, T v> struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  typedef integral_constant type;
  __host__ __device__ constexpr operator value_type() const noexcept { return value; }
  __host__ __device__ constexpr value_type operator()() const noexcept { return value; }
};
template <bool B> using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;
template <class T, class U> struct is_same : false_type {};
template <class T> struct is_same<T, T> : true_type {};
template <class T, class U> inline constexpr bool is_same_v = is_same<T, U>::value;
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T&> { typedef T type; };
template <class T> struct remove_reference<T&&> { typedef T type; };
template <class T> using remove_reference_t = typename remove_reference<T>::type;
}
`
