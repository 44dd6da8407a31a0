package flashattn

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBF16RoundTripEveryValue(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToFloat32(h)
		want := h
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			want |= 0x40 // a signalling NaN comes back quiet
		}
		if back := Float32ToBF16(f); back != want {
			t.Fatalf("%#04x -> %v -> %#04x, want %#04x", h, f, back, want)
		}
	}
}

// Rounding against an independent rule: the nearest of the two bf16
// neighbours by float64 distance, ties to the even one.
func TestFloat32ToBF16Rounding(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, // 1 + 2^-8: a tie, to even (down)
		{0x3f818000, 0x3f82}, // a tie with an odd lower neighbour: up
		{0x3f808001, 0x3f81}, // just above the tie: up
		{0x3f807fff, 0x3f80}, // just below: down
		{0x7f7f7fff, 0x7f7f}, // just below the largest finite value's upper midpoint
		{0x7f7f8000, 0x7f80}, // its midpoint: a tie to even, which is Inf
		{0xff7fffff, 0xff80}, // -MaxFloat32 rounds to -Inf
		{0x7f800000, 0x7f80}, // Inf
		{0x7f800001, 0x7fc0}, // a NaN whose payload lies in the dropped bits stays NaN
		{0x00008000, 0x0000}, // half the smallest bf16 subnormal: tie to even, 0
		{0x00018000, 0x0002}, // 1.5 subnormal units: up to 2
	} {
		if got := Float32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		b := r.Uint32()
		f := math.Float32frombits(b)
		if b&0x7f800000 == 0x7f800000 {
			continue // Inf and NaN: covered above
		}
		lo, hi := uint16(b>>16), uint16(b>>16)+1
		dl := math.Abs(float64(f) - float64(BF16ToFloat32(lo)))
		hv := float64(BF16ToFloat32(hi))
		if hi&0x7fff == 0x7f80 {
			hv = math.Copysign(0x1p128, hv) // Inf is the neighbour 2^128 would be
		}
		dh := math.Abs(hv - float64(f))
		want := lo
		if dh < dl || dh == dl && lo&1 == 1 {
			want = hi
		}
		if got := Float32ToBF16(f); got != want {
			t.Fatalf("Float32ToBF16(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
}

// tensorToBits refuses what bf16 cannot hold, naming the element, and keeps
// values fp16 would refuse.
func TestTensorToBF16Range(t *testing.T) {
	x, err := Make(Shape{B: 1, N: 2, H: 1, D: 2})
	if err != nil {
		t.Fatal(err)
	}
	x.Data[0] = 1e6 // beyond fp16, fine in bf16
	if bits, err := tensorToBits("q", x, BF16); err != nil || bits[0] != Float32ToBF16(1e6) {
		t.Fatalf("1e6: %v", err)
	}
	if _, err := tensorToBits("q", x, FP16); err == nil {
		t.Error("fp16 took 1e6")
	}
	for _, bad := range []float32{float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32} {
		x.Data[3] = bad
		_, err := tensorToBits("q", x, BF16)
		var de *DataError
		if !errors.As(err, &de) || de.Arg != "q" || !strings.Contains(de.Reason, "element (0, 1, 0, 1)") || !strings.Contains(de.Reason, "bf16") {
			t.Errorf("%v: %v, want a *DataError naming q's element (0, 1, 0, 1)", bad, err)
		}
	}
}

// KernelInfo's dtype reads "bf16" in JSON and comes back; an unknown name is an error.
func TestDTypeJSON(t *testing.T) {
	b, err := json.Marshal(KernelInfo{Symbol: "x", DType: BF16})
	if err != nil || !strings.Contains(string(b), `"dtype":"bf16"`) {
		t.Fatalf("%s, %v", b, err)
	}
	var k KernelInfo
	if err := json.Unmarshal(b, &k); err != nil || k.DType != BF16 {
		t.Errorf("round trip: %+v, %v", k, err)
	}
	if err := json.Unmarshal([]byte(`{"dtype":"fp8"}`), &k); err == nil {
		t.Error("dtype fp8 accepted")
	}
}
