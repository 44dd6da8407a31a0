package attntest

import "math"

// PoisonBits32 is the float32 bit pattern Poison writes: a quiet NaN with a
// recognisable payload, so a check can tell an element nobody wrote from a
// NaN some arithmetic produced.
const PoisonBits32 uint32 = 0x7FC0DEAD

// PoisonBits16 is the fp16 counterpart of PoisonBits32 (a quiet NaN), for
// backends that fill fp16 device buffers before a kernel writes them.
const PoisonBits16 uint16 = 0x7EAD

// PoisonBitsBF16 is the bfloat16 counterpart (a quiet NaN), for bf16 device buffers.
const PoisonBitsBF16 uint16 = 0x7FED

// Poison fills buf with the PoisonBits32 NaN. A backend that writes into
// buffers it did not allocate itself (a device buffer, a reused output)
// poisons them first under test; any element left unwritten then fails the
// suite's finiteness checks and is reported as unwritten.
func Poison(buf []float32) {
	p := math.Float32frombits(PoisonBits32)
	for i := range buf {
		buf[i] = p
	}
}

// IsPoison reports whether x carries the exact PoisonBits32 pattern (or the
// PoisonBits16 or PoisonBitsBF16 pattern widened to float32).
func IsPoison(x float32) bool {
	b := math.Float32bits(x)
	return b == PoisonBits32 || b == math.Float32bits(halfToFloat(PoisonBits16)) || b == uint32(PoisonBitsBF16)<<16
}

// RoundHalf rounds x to the nearest IEEE 754 binary16 value (ties to even,
// overflow to Inf, subnormals kept), returned as a float32.
func RoundHalf(x float32) float32 { return halfToFloat(floatToHalf(x)) }

// RoundBF16 rounds x to the nearest bfloat16 value (the top 16 bits of a
// float32; ties to even, overflow to Inf, NaN stays NaN), returned as a
// float32. Like floatToHalf it does not share code with flashattn's
// Float32ToBF16 (TestBF16AgreesWithFlashattn compares them).
func RoundBF16(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return math.Float32frombits(b | 0x400000) // quiet NaN
	}
	lo := b & 0xffff
	b &^= 0xffff
	if lo > 0x8000 || lo == 0x8000 && b&0x10000 != 0 {
		b += 0x10000 // may carry into the exponent, up to Inf: the correct result
	}
	return math.Float32frombits(b)
}

// floatToHalf and halfToFloat deliberately repeat flashattn's
// Float32ToFP16/FP16ToFloat32: the baseline that judges the GPU must not share
// code with the GPU path's own conversion. TestHalfAgreesWithFlashattn checks
// that the two agree on every binary16 value and every rounding boundary.

func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN (keep NaNs quiet and non-zero)
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // the exponent, rebiased for fp16
	if e >= 0x1f {
		return sign | 0x7c00
	}
	var h, rem, half uint32
	if e <= 0 { // fp16 subnormal (or zero): units of 2^-24
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to 0
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		h, rem, half = mant>>shift, mant&(1<<shift-1), 1<<(shift-1)
	} else {
		h, rem, half = uint32(e)<<10|mant>>13, mant&0x1fff, 0x1000
	}
	// Round to nearest, ties to even; a carry may move into the exponent
	// (up to Inf), which is the correct result.
	if rem > half || rem == half && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0: // zero or subnormal: mant * 2^-24, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}
