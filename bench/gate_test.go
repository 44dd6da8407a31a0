package bench_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goflash/goflash/bench"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestGate(t *testing.T) {
	noGPU := errors.New("flashattn: no GPU")
	for _, c := range []struct {
		err     error
		env     map[string]string
		proceed bool
		want    []string
	}{
		{nil, nil, true, []string{"GPU found"}},
		{noGPU, map[string]string{"COLAB_RELEASE_TAG": "x"}, false, []string{"no GPU", "Runtime → Change runtime type → T4 GPU", "Stopped here on purpose", bench.CPUOptIn + "=1"}},
		{noGPU, map[string]string{"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, false, []string{"Settings → Accelerator → GPU T4 x2"}},
		{noGPU, map[string]string{bench.CPUOptIn: "1"}, true, []string{"NVIDIA GPU (sm_75 or newer)", "going on with the CPU run"}},
		{noGPU, map[string]string{bench.CPUOptIn: "yes"}, false, []string{"Stopped here"}},
	} {
		proceed, msg := bench.Gate(c.err, env(c.env))
		if proceed != c.proceed {
			t.Errorf("%v %v: proceed %v, want %v", c.err, c.env, proceed, c.proceed)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v %v: message lacks %q:\n%s", c.err, c.env, w, msg)
			}
		}
	}
}
