package flashattn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/flashattn/attntest"
)

// TestGPURawExample runs ExampleRawForward_Enqueue's code (rawAttention:
// GoFlash tensors' addresses through a raw plan on a stream of the
// program) and holds O and the LSE to the reference; then checks that freed
// tensors and results hand out address 0, which a raw call refuses before
// any launch.
func TestGPURawExample(t *testing.T) {
	dev := openGPU(t)
	d := flashattn.Dims{B: 2, Nq: 200, Nk: 200, Hq: 8, Hkv: 2, D: 64}
	o := &flashattn.Options{Causal: true}
	in := [3]*flashattn.Tensor{}
	for i, s := range []flashattn.Shape{d.QShape(), d.KVShape(), d.KVShape()} {
		in[i] = flashattn.Random(s, uint64(11+i))
		for j, x := range in[i].Data {
			in[i].Data[j] = attntest.RoundHalf(x) // exact in fp16: the reference sees what the GPU sees
		}
	}
	q, k, v := in[0], in[1], in[2]
	res, err := rawAttention(dev, q, k, v, o)
	if err != nil {
		t.Fatal(err)
	}
	scale := 1 / math.Sqrt(float64(d.D))
	truth := attntest.Reference(q, k, v, nil, o.Causal, scale)
	base := attntest.Baseline(attntest.FP16, q, k, v, nil, o.Causal, scale)
	if attntest.CheckForward(t, attntest.FP16, truth, base, res) {
		t.Logf("%v: %s: O and LSE match the reference", d, res.Reason)
	}

	// Freed memory is refused by the checks, before any launch.
	plan, err := dev.NewRawForward(d, flashattn.FP16, o)
	if err != nil {
		t.Fatal(err)
	}
	qd, err := dev.Upload(q)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := dev.UploadResultAs(d, flashattn.New(d.QShape()), make([]float32, d.LSELen()), flashattn.FP16)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := dst.Free(); err != nil {
			t.Error(err)
		}
	}()
	if got, want := qd.Raw().Bytes, flashattn.FP16.Size()*d.QShape().Numel(); got != want || qd.Raw().Ptr != qd.Ptr() || qd.Ptr() == 0 {
		t.Errorf("Raw() = %+v, Ptr() = %#x: want address %#x and %d bytes", qd.Raw(), qd.Ptr(), qd.Ptr(), want)
	}
	if lse := dst.RawLSE(); lse.Ptr == 0 || lse.Bytes != d.LSEBytes() {
		t.Errorf("RawLSE() = %+v, want an address and %d bytes", lse, d.LSEBytes())
	}
	if err := qd.Free(); err != nil {
		t.Fatal(err)
	}
	if qd.Ptr() != 0 || qd.Raw().Ptr != 0 {
		t.Errorf("freed tensor: Ptr() = %#x, Raw().Ptr = %#x, want 0", qd.Ptr(), qd.Raw().Ptr)
	}
	args := &flashattn.RawForwardArgs{Q: qd.Raw(), K: dst.Out.Raw(), V: dst.Out.Raw(), Out: dst.Out.Raw(), LSE: dst.RawLSE()}
	var de *flashattn.DataError
	if err := plan.Enqueue(0, args); !errors.As(err, &de) || de.Arg != "q" {
		t.Errorf("enqueue with a freed q: %v, want a *DataError for q", err)
	}
	if err := dst.Free(); err != nil {
		t.Fatal(err)
	}
	if dst.RawLSE().Ptr != 0 || dst.Out.Ptr() != 0 {
		t.Errorf("freed result: RawLSE() = %+v, Out.Ptr() = %#x, want address 0", dst.RawLSE(), dst.Out.Ptr())
	}
}
