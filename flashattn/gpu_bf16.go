package flashattn

import "math"

// Float32ToBF16 returns the bfloat16 bits nearest to f (the top 16 bits of
// its float32 encoding), rounding ties to even as the GPU's cvt.rn.bf16x2.f32:
// values from 0x1.ffp127 up (half a unit beyond the largest finite bf16)
// become Inf, and NaN stays NaN (quiet, sign and top payload bits kept).
// bf16 has float32's exponent range, so nothing finite underflows early.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return uint16(b>>16) | 0x40 // quiet bit set: a payload only in the low bits must not become Inf
	}
	b += 0x7fff + (b>>16)&1 // round to nearest even; a carry may reach the exponent (Inf)
	return uint16(b >> 16)
}

// BF16ToFloat32 returns the float32 value of bfloat16 bits h (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16Finite reports whether bits h are a finite bfloat16 value.
func bf16Finite(h uint16) bool { return h&0x7f80 != 0x7f80 }

// bf16RangeError is the *DataError of element i = v of arg that bfloat16
// cannot hold (NaN, Inf, or a float32 that rounds to Inf): as with fp16, an
// Inf or NaN among the kernels' inputs gives NaN rows.
func bf16RangeError(arg string, s Shape, i int, v any) error {
	return elementError(arg, s, i, v, "the GPU takes bf16 values, finite (below 0x1.ffp127 in magnitude)")
}

// tensorToBits converts t (any strides) to dense BSHD bits of dtype dt, or
// fails at the first element dt cannot hold.
func tensorToBits(arg string, t *Tensor, dt DType) ([]uint16, error) {
	if dt == BF16 {
		return convertTensor(t, func(i int, x float32) (uint16, error) {
			h := Float32ToBF16(x)
			if !bf16Finite(h) {
				return 0, bf16RangeError(arg, t.Shape, i, x)
			}
			return h, nil
		})
	}
	return tensorToFP16(arg, t)
}

// DownloadBF16 copies a bf16 tensor back as dense BSHD bfloat16 bits.
func (t *DeviceTensor) DownloadBF16() ([]uint16, error) { return t.downloadBits(BF16) }
