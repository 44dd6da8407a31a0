package attntest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
)

// TestRoundHalf compares RoundHalf with an oracle that searches the sorted
// list of all finite fp16 values for the nearest one (ties to even mantissa).
func TestRoundHalf(t *testing.T) {
	var vals []float64 // every finite fp16 value, from the bit patterns
	var bits []uint16
	for h := 0; h < 1<<16; h++ {
		f := halfToFloat(uint16(h))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) || (f == 0 && h != 0) {
			continue // NaNs, Infs, -0
		}
		vals, bits = append(vals, float64(f)), append(bits, uint16(h))
		if g := RoundHalf(f); g != f {
			t.Fatalf("RoundHalf(%v) = %v, want it unchanged (bits %#04x)", f, g, h)
		}
	}
	idx := make([]int, len(vals))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	sorted := make([]float64, len(idx))
	for i, j := range idx {
		sorted[i] = vals[j]
	}
	maxHalf := sorted[len(sorted)-1] // 65504
	oracle := func(x float32) float32 {
		xf := float64(x)
		// Beyond the largest value plus half an ulp (2^4 at the top binade) it is Inf.
		if math.Abs(xf) >= maxHalf+16 {
			return float32(math.Copysign(math.Inf(1), xf))
		}
		i := sort.SearchFloat64s(sorted, xf)
		if i < len(sorted) && sorted[i] == xf {
			return x
		}
		lo, hi := sorted[max(i-1, 0)], sorted[min(i, len(sorted)-1)]
		switch dl, dh := xf-lo, hi-xf; {
		case dl < dh:
			return float32(lo)
		case dh < dl:
			return float32(hi)
		}
		// A tie: the one with an even mantissa (lowest bit of the pattern 0).
		if floatToHalf(float32(lo))&1 == 0 {
			return float32(lo)
		}
		return float32(hi)
	}
	check := func(x float32) {
		got, want := RoundHalf(x), oracle(x)
		if got != want && !(got == 0 && want == 0) {
			t.Fatalf("RoundHalf(%v) = %v, want %v", x, got, want)
		}
	}
	for i := 0; i+1 < len(sorted); i++ { // every midpoint and its neighbours
		mid := float32((sorted[i] + sorted[i+1]) / 2)
		check(mid)
		check(math.Nextafter32(mid, float32(math.Inf(-1))))
		check(math.Nextafter32(mid, float32(math.Inf(1))))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		x := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(x)) {
			continue
		}
		if math.Abs(float64(x)) > 1e5 || math.Abs(float64(x)) < 1e-9 {
			x = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(44)-28)))
		}
		check(x)
	}
	for _, x := range []float32{65519.99, 65520, 1e10, float32(math.Inf(1)), 0x1p-25, 0x1.0001p-25, 0x1p-26} {
		check(x)
	}
	if !math.IsNaN(float64(RoundHalf(float32(math.NaN())))) {
		t.Error("RoundHalf(NaN) is not NaN")
	}
	if !IsPoison(halfToFloat(PoisonBits16)) || !IsPoison(math.Float32frombits(PoisonBits32)) || IsPoison(float32(math.NaN())) {
		t.Error("IsPoison does not recognise exactly the two poison patterns")
	}
}

// recorder collects the failures a check reports instead of failing the test.
type recorder struct {
	*testing.T
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Helper()             {}

// TestChecksCatchBugs proves the checks can fail: results of the CPU flash
// backend, each broken the way a real kernel bug would break them, must be
// reported, and the unbroken ones must not.
func TestChecksCatchBugs(t *testing.T) {
	c := Case{Name: "mutants", B: 1, Nq: 20, Nk: 12, Hq: 4, Hkv: 2, D: 16, Causal: true, Seed: 7} // rows 0..7 see no key
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dims()
	truth := Reference(q, k, v, dO, c.Causal, c.EffectiveScale())
	base := Baseline(FP32, q, k, v, dO, c.Causal, c.EffectiveScale())
	run := func(causal bool, k *flashattn.Tensor) (*flashattn.Result, *flashattn.Grads) {
		return cpuFlash(t, q, k, v, dO, causal)
	}
	res, g := run(true, k)
	visible := d.LSEIndex(0, 1, 15)      // a row that sees keys
	outAt := res.Out.Offset(0, 15, 1, 3) // an element of that row
	masked := d.LSEIndex(0, 2, 3)        // a row that sees none
	maskedOut, maskedDQ := res.Out.Offset(0, 3, 2, 5), g.DQ.Offset(0, 3, 2, 5)
	kSwapped := k.Clone() // kv heads 0 and 1 exchanged: a wrong GQA head map
	for n := 0; n < d.Nk; n++ {
		for x := 0; x < d.D; x++ {
			a, b := k.At(0, n, 0, x), k.At(0, n, 1, x)
			kSwapped.Set(0, n, 0, x, b)
			kSwapped.Set(0, n, 1, x, a)
		}
	}
	nonCausal, _ := run(false, k)
	swapped, swappedG := run(true, kSwapped)

	fwdMutants := []struct {
		name, want string // want: a fragment of the expected report
		res        *flashattn.Result
		mutate     func(r *flashattn.Result)
	}{
		{"unmutated", "", res, func(*flashattn.Result) {}},
		{"unwritten output element", "never written", res, func(r *flashattn.Result) { r.Out.Data[outAt] = math.Float32frombits(PoisonBits32) }},
		{"output off by 1e-5 relative", "Out: max |err|", res, func(r *flashattn.Result) { r.Out.Data[outAt] *= 1 + 1e-5 }},
		{"LSE off by 1e-5", "LSE: max |err|", res, func(r *flashattn.Result) { r.LSE[visible] += 1e-5 }},
		{"unwritten LSE", "never written", res, func(r *flashattn.Result) { r.LSE[visible] = math.Float32frombits(PoisonBits32) }},
		{"masked row LSE 0", "want -Inf", res, func(r *flashattn.Result) { r.LSE[masked] = 0 }},
		{"masked row output NaN", "want finite", res, func(r *flashattn.Result) { r.Out.Data[maskedOut] = float32(math.NaN()) }},
		{"masked row output not 0", "want 0", res, func(r *flashattn.Result) { r.Out.Data[maskedOut] = 1e-30 }},
		{"mask ignored", "want -Inf", nonCausal, func(*flashattn.Result) {}},
		{"wrong GQA head", "max |err|", swapped, func(*flashattn.Result) {}},
	}
	for _, m := range fwdMutants {
		r := &flashattn.Result{Dims: m.res.Dims, Out: m.res.Out.Clone(), LSE: slices.Clone(m.res.LSE)}
		m.mutate(r)
		rec := &recorder{T: t}
		ok := CheckForward(rec, FP32, truth, base, r)
		expectReport(t, m.name, m.want, ok, rec.errs)
		// The float32 bounds (the fuzz test's criterion) are looser than
		// the 2x rule, so its smallest planted errors are 1e-3, not 1e-5.
		if m.name == "output off by 1e-5 relative" || m.name == "LSE off by 1e-5" {
			continue
		}
		rec = &recorder{T: t}
		ok = CheckForwardBound(rec, truth, r)
		want := m.want
		if strings.Contains(want, "max |err|") {
			want = "error bound"
		}
		expectReport(t, "bound: "+m.name, want, ok, rec.errs)
	}
	for _, m := range []struct {
		name   string
		mutate func(r *flashattn.Result)
	}{
		{"output off by 1e-3 relative", func(r *flashattn.Result) { r.Out.Data[outAt] *= 1 + 1e-3 }},
		{"LSE off by 1e-3", func(r *flashattn.Result) { r.LSE[visible] += 1e-3 }},
	} {
		r := &flashattn.Result{Dims: res.Dims, Out: res.Out.Clone(), LSE: slices.Clone(res.LSE)}
		m.mutate(r)
		rec := &recorder{T: t}
		expectReport(t, "bound: "+m.name, "error bound", CheckForwardBound(rec, truth, r), rec.errs)
	}

	bwdMutants := []struct {
		name, want string
		g          *flashattn.Grads
		mutate     func(g *flashattn.Grads)
	}{
		{"unmutated", "", g, func(*flashattn.Grads) {}},
		{"dK row zeroed", "dK: max |err|", g, func(g *flashattn.Grads) { clear(g.DK.Row(0, 4, 1)) }},
		{"dV off by 1e-4 relative", "dV: max |err|", g, func(g *flashattn.Grads) {
			for i := range g.DV.Data {
				g.DV.Data[i] *= 1 + 1e-4
			}
		}},
		{"dQ of a masked row not 0", "want 0", g, func(g *flashattn.Grads) { g.DQ.Data[maskedDQ] = 1e-30 }},
		{"dQ unwritten", "never written", g, func(g *flashattn.Grads) { g.DQ.Data[7] = math.Float32frombits(PoisonBits32) }},
		{"wrong GQA head", "max |err|", swappedG, func(*flashattn.Grads) {}},
	}
	for _, m := range bwdMutants {
		gc := &flashattn.Grads{DQ: m.g.DQ.Clone(), DK: m.g.DK.Clone(), DV: m.g.DV.Clone()}
		m.mutate(gc)
		rec := &recorder{T: t}
		ok := CheckBackward(rec, FP32, truth, base, gc)
		expectReport(t, m.name, m.want, ok, rec.errs)
		rec = &recorder{T: t}
		ok = CheckBackwardBound(rec, truth, gc)
		want := m.want
		if strings.Contains(want, "max |err|") {
			want = "error bound"
		}
		expectReport(t, "bound: "+m.name, want, ok, rec.errs)
	}
}

func expectReport(t *testing.T, name, want string, ok bool, errs []string) {
	t.Helper()
	if want == "" {
		if !ok || len(errs) > 0 {
			t.Errorf("%s: reported %q, want no report", name, errs)
		}
		return
	}
	if ok || !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }) {
		t.Errorf("%s: reported %q (ok=%v), want a report containing %q", name, errs, ok, want)
	}
}

// TestHalfAgreesWithFlashattn: the suite's independent fp16 rounding and the
// library's (used by the GPU upload) agree on every binary16 value, on both
// sides of every rounding midpoint, and on random float32 values.
func TestHalfAgreesWithFlashattn(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		a, b := halfToFloat(uint16(h)), flashattn.FP16ToFloat32(uint16(h))
		if math.Float32bits(a) != math.Float32bits(b) {
			t.Fatalf("half %#04x: attntest %v, flashattn %v", h, a, b)
		}
		if h&0x7c00 == 0x7c00 || h == 0x7bff || h == 0xfbff {
			continue // Inf/NaN, and the largest finite values have no upper midpoint
		}
		mid := math.Float32bits((halfToFloat(uint16(h)) + halfToFloat(uint16(h+1))) / 2)
		for _, f := range []float32{math.Float32frombits(mid - 1), math.Float32frombits(mid), math.Float32frombits(mid + 1)} {
			if x, y := floatToHalf(f), flashattn.Float32ToFP16(f); x != y {
				t.Fatalf("float32 %g: attntest %#04x, flashattn %#04x", f, x, y)
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		if x, y := floatToHalf(f), flashattn.Float32ToFP16(f); x != y && !(math.IsNaN(float64(f))) {
			t.Fatalf("float32 %g: attntest %#04x, flashattn %#04x", f, x, y)
		}
	}
}

// TestCompareIsPure: CompareForward and CompareBackward return what the
// Check functions report, with the 2x-rule numbers per quantity, and need
// no testing.T.
func TestCompareIsPure(t *testing.T) {
	c := Case{Name: "pure", B: 1, Nq: 33, Nk: 33, Hq: 2, Hkv: 1, D: 16, Causal: true, Seed: 3}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	truth := Reference(q, k, v, dO, c.Causal, c.EffectiveScale())
	base := Baseline(FP32, q, k, v, dO, c.Causal, c.EffectiveScale())
	res, g := cpuFlash(t, q, k, v, dO, c.Causal)
	fc, bc := CompareForward(FP32, truth, base, res), CompareBackward(FP32, truth, base, g)
	if !fc.Pass() || !bc.Pass() || len(fc.Quantities) != 2 || len(bc.Quantities) != 3 {
		t.Fatalf("correct result: forward %+v, backward %+v", fc, bc)
	}
	if e, b := fc.MaxErr("Out"); !(e > 0 && b > 0 && e <= 2*b+fc.Quantities[0].Floor) {
		t.Errorf("Out: MaxErr %v, baseline %v", e, b)
	}
	res.Out.Data[40] += 1e-3
	fc = CompareForward(FP32, truth, base, res)
	if fc.Pass() || len(fc.Mismatches) == 0 || fc.Quantities[0].Pass || !strings.Contains(fc.Mismatches[0], "Out") {
		t.Errorf("broken output: %+v", fc)
	}
	if e, _ := fc.MaxErr("Out"); e < 1e-3*0.99 {
		t.Errorf("broken output: MaxErr %v, want about 1e-3", e)
	}
}

// cpuFlash runs the CPU flash backend forward and backward.
func cpuFlash(t *testing.T, q, k, v, dO *flashattn.Tensor, causal bool) (*flashattn.Result, *flashattn.Grads) {
	t.Helper()
	o := &flashattn.Options{Causal: causal, Backend: flashattn.CPUFlash}
	res, err := flashattn.Forward(q, k, v, o)
	if err != nil {
		t.Fatal(err)
	}
	g, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o)
	if err != nil {
		t.Fatal(err)
	}
	return res, g
}

// TestScoreChecksCatchBugs: a backend that drops or misplaces a window,
// softcap or ALiBi (emulated by running the CPU flash backend with the
// modifier changed) is reported, forward and backward, by the 2x rule and
// by the float32 bounds; the unchanged run is not.
func TestScoreChecksCatchBugs(t *testing.T) {
	c := Case{Name: "score-mutants", B: 1, Nq: 20, Nk: 33, Hq: 4, Hkv: 2, D: 16, Causal: true, Scale: 1,
		Window: &flashattn.Window{Left: 5, Right: -1}, Softcap: 2, ALiBi: true, Seed: 9}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	mods := ScoresOf(c.Options())
	truth := ReferenceScores(q, k, v, dO, c.Causal, c.EffectiveScale(), mods)
	base := BaselineScores(FP32, q, k, v, dO, c.Causal, c.EffectiveScale(), mods)
	for _, m := range []struct {
		name   string
		mutate func(o *flashattn.Options)
	}{
		{"unmutated", func(*flashattn.Options) {}},
		{"window ignored", func(o *flashattn.Options) { o.Window = nil }},
		{"window one key wider", func(o *flashattn.Options) { o.Window.Left++ }},
		{"softcap ignored", func(o *flashattn.Options) { o.Softcap = 0 }},
		{"softcap 1% off", func(o *flashattn.Options) { o.Softcap *= 1.01 }},
		{"ALiBi ignored", func(o *flashattn.Options) { o.ALiBi = nil }},
		{"ALiBi slopes of the wrong heads", func(o *flashattn.Options) { slices.Reverse(o.ALiBi) }},
	} {
		o := c.Options()
		m.mutate(o)
		o.Backend = flashattn.CPUFlash
		res, err := flashattn.Forward(q, k, v, o)
		if err != nil {
			t.Fatal(err)
		}
		g, err := flashattn.Backward(q, k, v, res.Out, dO, res.LSE, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, check := range []struct {
			what string
			ok   func(rec *recorder) bool
		}{
			{"forward", func(rec *recorder) bool { return CheckForward(rec, FP32, truth, base, res) }},
			{"forward bound", func(rec *recorder) bool { return CheckForwardBound(rec, truth, res) }},
			{"backward", func(rec *recorder) bool { return CheckBackward(rec, FP32, truth, base, g) }},
			{"backward bound", func(rec *recorder) bool { return CheckBackwardBound(rec, truth, g) }},
		} {
			rec := &recorder{T: t}
			ok := check.ok(rec)
			if m.name == "unmutated" {
				expectReport(t, check.what+": "+m.name, "", ok, rec.errs)
			} else if ok {
				t.Errorf("%s: %s passed, want a report", check.what, m.name)
			}
		}
	}
}

// RoundBF16 and flashattn's Float32ToBF16 are separate code (the baseline
// must not share the GPU path's conversion): they agree on every bf16 value,
// its rounding midpoints and random float32s.
func TestBF16AgreesWithFlashattn(t *testing.T) {
	conv := func(f float32) float32 { return flashattn.BF16ToFloat32(flashattn.Float32ToBF16(f)) }
	for h := 0; h < 1<<16; h++ {
		base := uint32(h) << 16
		for _, b := range []uint32{base, base + 0x7fff, base + 0x8000, base + 0x8001} {
			f := math.Float32frombits(b)
			x, y := RoundBF16(f), conv(f)
			if math.Float32bits(x) != math.Float32bits(y) && !(math.IsNaN(float64(x)) && math.IsNaN(float64(y))) {
				t.Fatalf("float32 %#08x: attntest %#08x, flashattn %#08x", b, math.Float32bits(x), math.Float32bits(y))
			}
		}
	}
	if x := RoundBF16(1 + 0x1p-8); x != 1 {
		t.Errorf("RoundBF16(1+2^-8) = %v, want 1 (tie to even)", x)
	}
	if !IsPoison(math.Float32frombits(uint32(PoisonBitsBF16) << 16)) {
		t.Error("IsPoison does not recognise the bf16 poison")
	}
}

// TestBF16BackwardBaseline: the BF16 baseline's backward rounds what a bf16
// kernel rounds (inputs, P, dS, the gradients), so its error is that of
// bf16, about 2^3 times fp16's; the FP16 rule rejects bf16-rounded
// gradients, the BF16 rule takes them and the (more accurate) fp16 ones,
// and still reports a planted bug of a few bf16 units.
func TestBF16BackwardBaseline(t *testing.T) {
	c := Case{Name: "bf16-bwd", B: 1, Nq: 70, Nk: 70, Hq: 4, Hkv: 2, D: 32, Causal: true, Seed: 11}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	truth := Reference(q, k, v, dO, c.Causal, c.EffectiveScale())
	b16 := Baseline(BF16, q, k, v, dO, c.Causal, c.EffectiveScale())
	f16 := Baseline(FP16, q, k, v, dO, c.Causal, c.EffectiveScale())
	grads := func(r *Ref) *flashattn.Grads {
		g := &flashattn.Grads{DQ: flashattn.New(c.Dims().QShape()), DK: flashattn.New(c.Dims().KVShape()), DV: flashattn.New(c.Dims().KVShape())}
		for _, x := range []struct {
			dst []float32
			src []float64
		}{{g.DQ.Data, r.DQ}, {g.DK.Data, r.DK}, {g.DV.Data, r.DV}} {
			for i, y := range x.src {
				x.dst[i] = float32(y)
			}
		}
		return g
	}
	for _, x := range []float64{b16.DQ[700], b16.DK[300], b16.DV[123]} {
		if float64(RoundBF16(float32(x))) != x {
			t.Fatalf("a bf16 baseline gradient %v is not a bf16 value", x)
		}
	}
	eb := CompareBackward(BF16, truth, b16, grads(b16))
	ef := CompareBackward(FP16, truth, f16, grads(f16))
	if !eb.Pass() || !ef.Pass() {
		t.Fatalf("baselines against themselves: bf16 %v, fp16 %v", eb.Mismatches, ef.Mismatches)
	}
	for _, name := range []string{"dQ", "dK", "dV"} {
		e16, _ := ef.MaxErr(name)
		eb16, _ := eb.MaxErr(name)
		if !(eb16 > 3*e16) {
			t.Errorf("%s: bf16 baseline error %.3g, fp16 %.3g: want bf16 several times larger", name, eb16, e16)
		}
	}
	if CompareBackward(FP16, truth, f16, grads(b16)).Pass() {
		t.Error("the FP16 rule passed bf16-rounded gradients")
	}
	if c := CompareBackward(BF16, truth, b16, grads(f16)); !c.Pass() {
		t.Errorf("the BF16 rule failed the fp16 baseline's gradients: %v", c.Mismatches)
	}
	bad := grads(b16)
	for i := range bad.DK.Data {
		bad.DK.Data[i] *= 1 + 0x1p-5 // 4 bf16 units
	}
	if CompareBackward(BF16, truth, b16, bad).Pass() {
		t.Error("the BF16 rule passed dK off by 2^-5 relative")
	}
}

// TestBaselineSoftcapPrecision: the FP16 and BF16 baselines round the
// softcap's tanh to their precision (FA2's baseline in the input dtype); the
// FP32 one keeps float32's.
func TestBaselineSoftcapPrecision(t *testing.T) {
	p := &problem{softcap: 3}
	x := float32(1.2345678)
	tanh := float32(math.Tanh(float64(x / 3)))
	for _, c := range []struct {
		prec Precision
		want float32
	}{{FP32, 3 * tanh}, {FP16, 3 * RoundHalf(tanh)}, {BF16, 3 * RoundBF16(tanh)}} {
		if s, _ := p.score32(0, 0, 0, x, c.prec); s != c.want {
			t.Errorf("%v: score %v, want %v", c.prec, s, c.want)
		}
	}
	if RoundHalf(tanh) == tanh {
		t.Fatalf("tanh %v is an fp16 value: the test cannot tell the roundings apart", tanh)
	}
}

// TestCasesAt: the re-dimensioned lists hold every case not already at the
// head dim, at it, under names of their own.
func TestCasesAt(t *testing.T) {
	type entry struct {
		name string
		d    int
	}
	for _, d := range []int{64, 256} {
		var base, at []entry
		for _, c := range Cases() {
			base = append(base, entry{c.Name, c.D})
		}
		for _, c := range VarlenCases() {
			base = append(base, entry{c.Name, c.D})
		}
		for _, c := range CasesAt(d) {
			at = append(at, entry{c.Name, c.D})
		}
		for _, c := range VarlenCasesAt(d) {
			at = append(at, entry{c.Name, c.D})
		}
		names, want := map[string]bool{}, 0
		for _, e := range base {
			names[e.name] = true
			if e.d != d {
				want++
			}
		}
		if len(at) != want || want == 0 {
			t.Fatalf("CasesAt(%d) and VarlenCasesAt(%d): %d cases, want %d", d, d, len(at), want)
		}
		for _, e := range at {
			if e.d != d || names[e.name] {
				t.Errorf("at D %d: %s at D %d (its name new: %v)", d, e.name, e.d, !names[e.name])
			}
			names[e.name] = true
		}
	}
}

// TestZeroGradientFloor: with one key, dQ and dK are 0 in exact arithmetic
// (P = 1, dS = dP - Di), so the rule's floor for them would be 0; a float32
// sum's worth of rounding beside the 0 must pass, a gradient-sized value
// must not.
func TestZeroGradientFloor(t *testing.T) {
	c := Case{Name: "one-key", B: 1, Nq: 9, Nk: 1, Hq: 2, Hkv: 1, D: 256, Seed: 11}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	truth := Reference(q, k, v, dO, c.Causal, c.EffectiveScale())
	base := Baseline(FP16, q, k, v, dO, c.Causal, c.EffectiveScale())
	if truth.gradMax[0] != 0 || truth.gradMax[1] != 0 {
		t.Fatalf("one key: |dQ|, |dK| up to %g, %g; want 0", truth.gradMax[0], truth.gradMax[1])
	}
	_, g := cpuFlash(t, q, k, v, dO, false)
	for _, m := range []struct {
		name, want string
		x          float32
	}{{"rounding beside 0", "", 1e-5}, {"gradient-sized", "dQ: max |err|", 0.05}} {
		gc := &flashattn.Grads{DQ: g.DQ.Clone(), DK: g.DK.Clone(), DV: g.DV.Clone()}
		gc.DQ.Data[3] += m.x
		rec := &recorder{T: t}
		expectReport(t, m.name, m.want, CheckBackward(rec, FP16, truth, base, gc), rec.errs)
	}
}

// TestRunCaseBatchesCatchesBugs: RunCaseBatches passes the CPU flash backend
// and reports a backward that leaves one batch entry's dK unwritten or gives
// an entry another's dV, in the entries it checks.
func TestRunCaseBatchesCatchesBugs(t *testing.T) {
	c := Case{Name: "batches", B: 4, Nq: 24, Nk: 40, Hq: 2, Hkv: 1, D: 16, Causal: true, Seed: 11}
	good := ForBackend(flashattn.CPUFlash)
	for _, m := range []struct {
		name   string
		mutate func(g *flashattn.Grads)
	}{
		{"unmutated", nil},
		{"entry 3's dK zero", func(g *flashattn.Grads) {
			for n := range c.Nk {
				clear(g.DK.Row(3, n, 0))
			}
		}},
		{"entry 1's dV entry 0's", func(g *flashattn.Grads) {
			for n := range c.Nk {
				copy(g.DV.Row(1, n, 0), g.DV.Row(0, n, 0))
			}
		}},
	} {
		b := good
		if m.mutate != nil {
			b.Backward = func(q, k, v, out, dOut *flashattn.Tensor, lse []float32, o *flashattn.Options) (*flashattn.Grads, error) {
				g, err := good.Backward(q, k, v, out, dOut, lse, o)
				if err == nil {
					m.mutate(g)
				}
				return g, err
			}
		}
		rec := &recorder{T: t}
		RunCaseBatches(rec, b, c, []int{0, 1, 3})
		if got := len(rec.errs) > 0; got != (m.mutate != nil) {
			t.Errorf("%s: reported %q", m.name, rec.errs)
		}
	}
}

// A forward-only check's references carry no gradients and equal the
// forward of the full ones; a later check with gradients computes them, and
// from then on both kinds of check share that pair. The baseline's orders,
// computed concurrently, are each there with their own gradients.
func TestRefsGrads(t *testing.T) {
	c := Case{Name: "refs-grads", B: 1, Nq: 37, Nk: 45, Hq: 2, Hkv: 1, D: 16, Causal: true, Seed: 21}
	q, k, v, dO, err := c.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	fTruth, fBase := refs(c, FP16, q, k, v, dO, false)
	if fTruth.DQ != nil || fBase.DQ != nil {
		t.Fatal("forward-only references carry gradients")
	}
	gTruth, gBase := refs(c, FP16, q, k, v, dO, true)
	if gTruth.DQ == nil || gBase.DK == nil || gTruth == fTruth {
		t.Fatal("references with gradients were not computed")
	}
	if !slices.Equal(fTruth.Out, gTruth.Out) || !slices.Equal(fBase.Out, gBase.Out) || !slices.Equal(fBase.LSE, gBase.LSE) {
		t.Error("the forward of the references depends on the gradients asked for")
	}
	if t2, b2 := refs(c, FP16, q, k, v, dO, false); t2 != gTruth || b2 != gBase {
		t.Error("a forward-only check did not take the cached pair with gradients")
	}
	all := gBase.all()
	if len(all) != len(orders) {
		t.Fatalf("%d baseline orders, want %d", len(all), len(orders))
	}
	for i, r := range all[1:] {
		if r == nil || r == all[0] || r.DQ == nil {
			t.Errorf("baseline order %d: missing or without gradients", i+1)
		}
	}
}
