package flashattn

import (
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxDeviceMethods bounds Device's methods that are not deprecated, so that
// go doc lists what a user needs: a new method replaces (and deprecates)
// another, or takes an Op, a DType or Options instead of becoming a twin.
const maxDeviceMethods = 30

func TestDeviceAPISize(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(".", name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/goflash/goflash/flashattn")
	if err != nil {
		t.Fatal(err)
	}
	var current, deprecated []string
	for _, typ := range p.Types {
		if typ.Name != "Device" {
			continue
		}
		for _, m := range typ.Methods {
			if strings.Contains(m.Doc, "\nDeprecated: ") || strings.HasPrefix(m.Doc, "Deprecated: ") {
				deprecated = append(deprecated, m.Name)
			} else {
				current = append(current, m.Name)
			}
		}
	}
	if len(current) == 0 || len(current) > maxDeviceMethods {
		t.Errorf("Device has %d methods not marked Deprecated (at most %d): %v", len(current), maxDeviceMethods, current)
	}
	t.Logf("Device: %d methods, %d deprecated", len(current), len(deprecated))
}
