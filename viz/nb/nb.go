// Package nb shows viz charts and reports in GoNB notebook cells.
//
//	c, err := viz.Tiling(&trace)
//	...
//	nb.Display(c)
//
// It is a package of its own so that importing viz does not pull in GoNB.
//
// Every output needs the echarts library on the page. By default it is
// inlined (about 1 MB) in the first output of a kernel session only, and
// later outputs use it from there: a marker file in the kernel's
// $GONB_TMP_DIR remembers. Front ends that isolate each output in a frame of
// its own (Google Colab, Kaggle) need it in every output, and get it there:
// nb detects them from COLAB_RELEASE_TAG and KAGGLE_KERNEL_RUN_TYPE. Set
// GOFLASH_VIZ_INLINE=always (GoNB: %env GOFLASH_VIZ_INLINE always) to inline
// it everywhere, for example after clearing the output that carried it, or
// =once to force the default.
package nb

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"

	"github.com/goflash/goflash/viz"
)

// ErrNotNotebook is returned when the program does not run under GoNB.
var ErrNotNotebook = errors.New("nb: not running in a GoNB notebook (GONB_PIPE is not set)")

// Display shows charts in the output of the running cell. It returns once
// GoNB has taken the output (gonbui.Sync), so a cell that ends right after
// it does not lose it.
func Display(charts ...viz.Chart) error {
	return display(func(prefix string) (string, error) { return viz.Fragment(prefix, charts...) })
}

// DisplayReport shows a whole report (headings, text, tables, charts) in the
// output of the running cell.
func DisplayReport(r *viz.Report) error {
	if r == nil {
		return errors.New("nb.DisplayReport: report is nil")
	}
	return display(r.Fragment)
}

func display(body func(prefix string) (string, error)) error {
	if !gonbui.IsNotebook {
		return ErrNotNotebook
	}
	id, err := nonce()
	if err != nil {
		return err
	}
	frag, err := body("goflash_" + id + "_")
	if err != nil {
		return err
	}
	html, marker := withLibrary(frag, os.Getenv)
	gonbui.DisplayHTML(html)
	gonbui.Sync()
	if err := gonbui.Error(); err != nil {
		return fmt.Errorf("nb: GoNB did not take the output: %w", err)
	}
	if marker != "" {
		// Only now is the library on the page. A marker that cannot be
		// written just means the next output carries the library again.
		_ = os.WriteFile(marker, []byte(viz.EChartsVersion+"\n"), 0o644)
	}
	return nil
}

// withLibrary prefixes frag with the echarts library when this output needs
// it, and returns the marker file to create once the output is shown ("" for
// none).
func withLibrary(frag string, env func(string) string) (html, marker string) {
	mode := strings.ToLower(strings.TrimSpace(env("GOFLASH_VIZ_INLINE")))
	isolated := env("COLAB_RELEASE_TAG") != "" || env("KAGGLE_KERNEL_RUN_TYPE") != ""
	dir := env("GONB_TMP_DIR")
	if mode == "always" || mode != "once" && isolated || dir == "" {
		return viz.LibraryScript() + frag, ""
	}
	marker = filepath.Join(dir, "goflash-viz-echarts-"+viz.EChartsVersion+".inlined")
	if _, err := os.Stat(marker); err == nil {
		return frag, ""
	}
	return viz.LibraryScript() + frag, marker
}

// nonce makes chart IDs unique on the notebook page: every cell runs a new
// process, so a counter would repeat.
func nonce() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("nb: %w", err)
	}
	return hex.EncodeToString(b), nil
}
