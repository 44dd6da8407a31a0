package flashattn

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP16RoundTripEveryValue(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := FP16ToFloat32(h)
		want := h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want |= 0x200 // a signalling NaN comes back quiet
		}
		if back := Float32ToFP16(f); back != want {
			t.Fatalf("%#04x -> %v -> %#04x, want %#04x", h, f, back, want)
		}
	}
}

func TestFP16KnownValues(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800},
		{65504, 0x7bff}, {65519.996, 0x7bff}, {65520, 0x7c00}, {1e9, 0x7c00}, {-1e9, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{0x1p-14, 0x0400}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.000002p-25, 0x0001}, {0x1.8p-24, 0x0002},
		{0x1p-26, 0x0000}, {-0x1p-24, 0x8001}, {0x1.ff8p-15, 0x03ff},
		{1 + 0x1p-11, 0x3c00}, {1 + 0x1p-11 + 0x1p-20, 0x3c01}, {1 + 3*0x1p-11, 0x3c02}, // ties to even
		{0.1, 0x2e66}, {3.14159265, 0x4248},
	} {
		if got := Float32ToFP16(c.f); got != c.h {
			t.Errorf("Float32ToFP16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	for _, nan := range []float32{float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000)} {
		h := Float32ToFP16(nan)
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
			t.Errorf("NaN %#08x -> %#04x, not a NaN", math.Float32bits(nan), h)
		}
		if !math.IsNaN(float64(FP16ToFloat32(h))) {
			t.Errorf("%#04x does not decode to NaN", h)
		}
	}
}

// Between every two neighbouring binary16 values, the midpoint rounds to the
// one with an even mantissa and anything off the midpoint rounds to the
// nearer one. This covers every rounding boundary, subnormals and overflow
// included (the neighbour above 65504 is the value 65536 that rounds to Inf).
func TestFP16RoundingAtEveryBoundary(t *testing.T) {
	for h := uint16(0); h < 0x7c00; h++ {
		lo := float64(FP16ToFloat32(h))
		hi := 65536.0
		if h+1 < 0x7c00 {
			hi = float64(FP16ToFloat32(h + 1))
		}
		mid := float32((lo + hi) / 2) // exact: 12 significant bits
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		for _, sign := range []uint16{0, 0x8000} {
			neg := func(f float32) float32 {
				if sign != 0 {
					return -f
				}
				return f
			}
			if got := Float32ToFP16(neg(mid)); got != even|sign {
				t.Fatalf("midpoint %g of %#04x and next: got %#04x, want %#04x", neg(mid), h, got, even|sign)
			}
			below := math.Nextafter32(mid, 0)
			above := math.Nextafter32(mid, float32(math.Inf(1)))
			if got := Float32ToFP16(neg(below)); got != h|sign {
				t.Fatalf("just below midpoint of %#04x: got %#04x", h, got)
			}
			if got := Float32ToFP16(neg(above)); got != (h+1)|sign {
				t.Fatalf("just above midpoint of %#04x: got %#04x", h, got)
			}
		}
	}
}

// Random float32 values convert to the nearest binary16 value.
func TestFP16RandomNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		h := Float32ToFP16(f)
		got := float64(FP16ToFloat32(h))
		if math.IsInf(got, 0) {
			if math.Abs(float64(f)) < 65520 {
				t.Fatalf("%g became Inf", f)
			}
			continue
		}
		err := math.Abs(got - float64(f))
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7fff >= 0x7c00 || (h&0x7fff == 0 && nb == h-1) {
				continue
			}
			if e2 := math.Abs(float64(FP16ToFloat32(nb)) - float64(f)); e2 < err {
				t.Fatalf("%g -> %#04x (%g), but %#04x (%g) is nearer", f, h, got, nb, FP16ToFloat32(nb))
			}
		}
	}
}

func TestTensorToFP16Strided(t *testing.T) {
	// A (B=2, N=3, H=2, D=4) view of a packed buffer with a padded row.
	s := Shape{2, 3, 2, 4}
	st := Strides{3 * 20, 20, 8, 1}
	data := make([]float32, 2*3*20)
	for i := range data {
		data[i] = float32(i) * 0.5
	}
	v, err := FromStrided(s, st, data)
	if err != nil {
		t.Fatal(err)
	}
	bits, err := tensorToFP16("v", v)
	if err != nil {
		t.Fatal(err)
	}
	dense := v.Contiguous()
	for i, x := range dense.Data {
		if bits[i] != Float32ToFP16(x) {
			t.Fatalf("element %d: %#04x, want %#04x", i, bits[i], Float32ToFP16(x))
		}
	}
}
