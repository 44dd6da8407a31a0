package flashattn

import (
	"fmt"
	"math"
)

// Float32ToFP16 returns the IEEE 754 binary16 bits nearest to f, rounding
// ties to even (the GPU's cvt.rn.f16.f32): values from 65520 up become
// +Inf, values at or below 2^-25 become zero, the range between keeps its
// precision as subnormals, and NaN stays NaN (quiet, sign and top payload
// bits kept).
func Float32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13) // quiet bit set: never becomes Inf
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // binary16 biased exponent
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal result: the significand with its implicit bit, shifted
		// so that one unit is 2^-24, rounded to nearest even.
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry out of the mantissa bumps the exponent; 0x7c00 is Inf
	}
	return sign | uint16(h)
}

// FP16ToFloat32 returns the float32 value of binary16 bits h (exact: every
// binary16 value is a float32 value; NaN payloads are kept).
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// fp16Max is the largest finite binary16 value. Float32 values from 65520
// up (half a unit beyond it) round to Inf.
const fp16Max = 65504

// fp16Finite reports whether x converts to a finite binary16 value: not
// NaN, not infinite, below 65520 in magnitude.
func fp16Finite(h uint16) bool { return h&0x7c00 != 0x7c00 }

// fp16RangeError is the *DataError of element (b, n, h, x) = v of arg that
// binary16 cannot hold: the GPU path takes finite values below 65520 in
// magnitude, because an Inf or NaN among its inputs gives NaN rows (and
// -Inf log-sum-exps) where the float32 CPU path answers finitely.
func fp16RangeError(arg string, s Shape, i int, v any) error {
	return elementError(arg, s, i, v, "the GPU takes fp16 values, finite and below 65520 in magnitude")
}

// elementError is the *DataError of dense BSHD element i = v of arg, with why.
func elementError(arg string, s Shape, i int, v any, why string) error {
	d := i % s.D
	h := i / s.D % s.H
	n := i / (s.D * s.H) % s.N
	b := i / (s.D * s.H * s.N)
	return &DataError{Arg: arg, Reason: fmt.Sprintf("element (%d, %d, %d, %d) is %v: %s", b, n, h, d, v, why)}
}

// tensorToFP16 converts t (any strides) to dense BSHD binary16 bits, or
// fails with fp16RangeError at the first element binary16 cannot hold.
func tensorToFP16(arg string, t *Tensor) ([]uint16, error) {
	return convertTensor(t, func(i int, x float32) (uint16, error) {
		h := Float32ToFP16(x)
		if !fp16Finite(h) {
			return 0, fp16RangeError(arg, t.Shape, i, x)
		}
		return h, nil
	})
}

// convertTensor converts t (any strides) to dense BSHD 16-bit elements with
// conv (given the dense index), stopping at its first error.
func convertTensor(t *Tensor, conv func(i int, x float32) (uint16, error)) ([]uint16, error) {
	s := t.Shape
	out := make([]uint16, s.Numel())
	var err error
	if t.IsContiguous() {
		for i, x := range t.Data[:len(out)] {
			if out[i], err = conv(i, x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	i := 0
	row := make([]float32, s.D)
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				t.rowInto(row, b, n, h)
				for _, x := range row {
					if out[i], err = conv(i, x); err != nil {
						return nil, err
					}
					i++
				}
			}
		}
	}
	return out, nil
}

// checkFP16 is tensorToFP16's range check without the conversion's
// buffer: Auto uses it to run such inputs on the CPU instead.
func checkFP16(arg string, t *Tensor) error {
	s := t.Shape
	row := make([]float32, s.D)
	i := 0
	for b := 0; b < s.B; b++ {
		for n := 0; n < s.N; n++ {
			for h := 0; h < s.H; h++ {
				t.rowInto(row, b, n, h)
				for _, x := range row {
					if !fp16Finite(Float32ToFP16(x)) {
						return fp16RangeError(arg, s, i, x)
					}
					i++
				}
			}
		}
	}
	return nil
}
