package nb

import (
	"os"
	"strings"
	"testing"

	"github.com/goflash/goflash/viz"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func libraries(html string) int { return strings.Count(html, "data-goflash-echarts=") }

func TestLibraryOncePerKernel(t *testing.T) {
	dir := t.TempDir()
	env := envOf(map[string]string{"GONB_TMP_DIR": dir})
	h, marker := withLibrary("<p>chart</p>", env)
	if libraries(h) != 1 || marker == "" || !strings.HasSuffix(h, "<p>chart</p>") {
		t.Fatalf("first output: %d libraries, marker %q", libraries(h), marker)
	}
	// Until the output is shown, the next one still carries the library.
	if h, _ := withLibrary("x", env); libraries(h) != 1 {
		t.Fatal("library dropped before the first output was shown")
	}
	if err := os.WriteFile(marker, []byte(viz.EChartsVersion), 0o644); err != nil {
		t.Fatal(err)
	}
	h, m2 := withLibrary("<p>again</p>", env)
	if libraries(h) != 0 || m2 != "" || h != "<p>again</p>" {
		t.Fatalf("second output: %d libraries, marker %q", libraries(h), m2)
	}
	// Forced, and in front ends that frame every output, it is always there.
	for _, e := range []map[string]string{
		{"GONB_TMP_DIR": dir, "GOFLASH_VIZ_INLINE": "always"},
		{"GONB_TMP_DIR": dir, "COLAB_RELEASE_TAG": "release-colab_20261120"},
		{"GONB_TMP_DIR": dir, "KAGGLE_KERNEL_RUN_TYPE": "Interactive"},
		{}, // no kernel directory to remember in
	} {
		if h, m := withLibrary("y", envOf(e)); libraries(h) != 1 || m != "" {
			t.Errorf("env %v: %d libraries, marker %q", e, libraries(h), m)
		}
	}
	// "once" overrides the frame detection.
	e := map[string]string{"GONB_TMP_DIR": dir, "COLAB_RELEASE_TAG": "x", "GOFLASH_VIZ_INLINE": "once"}
	if h, _ := withLibrary("z", envOf(e)); libraries(h) != 0 {
		t.Error("GOFLASH_VIZ_INLINE=once still inlined after the marker")
	}
}

func TestDisplayOutsideNotebook(t *testing.T) {
	if os.Getenv("GONB_PIPE") != "" {
		t.Skip("running under GoNB")
	}
	if err := Display(); err != ErrNotNotebook {
		t.Fatalf("Display outside GoNB: %v, want ErrNotNotebook", err)
	}
	if err := DisplayReport(nil); err == nil {
		t.Fatal("DisplayReport(nil) succeeded")
	}
}

func TestNonceUnique(t *testing.T) {
	a, err := nonce()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := nonce()
	if a == b || len(a) != 12 {
		t.Fatalf("nonces %q, %q", a, b)
	}
}
