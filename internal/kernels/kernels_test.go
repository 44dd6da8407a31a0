package kernels

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// sassArchs are the SASS targets build.sh compiles every kernel for.
var sassArchs = []int{75, 80, 86, 89, 90}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// familyImages are the images built by nvcc 11.8, one per kernel family.
var familyImages = []Image{ImageFwd, ImageBwd, ImageDecode, ImageLadder}

func TestFatbinImages(t *testing.T) {
	for _, im := range familyImages {
		b := im.Bytes()
		if len(b) < 1024 || !bytes.HasPrefix(b, FatbinMagic) {
			t.Errorf("%s: %d bytes, starts % x; want a fatbin (magic % x)", im.File(), len(b), b[:min(4, len(b))], FatbinMagic)
			continue
		}
		// The images are compressed (build.sh: -compress-all), so the symbols
		// are not visible here: TestImageOf checks them against the ptxas log
		// of the image's build, and the GPU tests load every one.
		var sass, ptx []int
		for _, fi := range fatbinImages(t, b) {
			if !fi.compressed {
				t.Errorf("%s: %s image for sm_%d is not compressed", im.File(), fi.kind, fi.arch)
			}
			switch fi.kind {
			case "ELF":
				sass = append(sass, fi.arch)
			case "PTX":
				ptx = append(ptx, fi.arch)
			}
		}
		if !slices.Equal(sass, sassArchs) || !slices.Equal(ptx, []int{75, 80}) {
			t.Errorf("%s holds SASS for %v and PTX for %v; want SASS %v and PTX [75 80]", im.File(), sass, ptx, sassArchs)
		}
	}
}

// Every kernel of the tables is in the image ImageOf names for its symbol:
// resources.md's rows of the symbol (ptxas -v of that image's build, one
// per SASS arch) name that image's file, and every image holds a kernel.
func TestImageOf(t *testing.T) {
	in := map[string]map[string]bool{} // symbol -> files of its resources.md rows
	for _, r := range resourceRows(t) {
		if in[r[0]] == nil {
			in[r[0]] = map[string]bool{}
		}
		in[r[0]][r[7]] = true
	}
	held := map[Image]int{}
	for _, v := range append(append(Variants(), ladderVariants...), sm90aVariants...) {
		im, ok := ImageOf(v.Symbol)
		if !ok {
			t.Errorf("%s: in no image", v.Symbol)
			continue
		}
		held[im]++
		if files := in[v.Symbol]; len(files) != 1 || !files[im.File()] {
			t.Errorf("%s: ImageOf says %s, resources.md's rows say %v", v.Symbol, im.File(), slices.Sorted(maps.Keys(files)))
		}
		if want := v.Arch == SM90A; (im == ImageSM90A) != want {
			t.Errorf("%s (Arch %d): image %s", v.Symbol, v.Arch, im)
		}
	}
	for im := range NumImages {
		if held[im] == 0 {
			t.Errorf("image %s (%s) holds no kernel of the tables", im, im.File())
		}
	}
	for _, s := range []string{"", "fa2_", "fa2_fw", "fwd_sm80_d64", "goflash_rung1"} {
		if im, ok := ImageOf(s); ok {
			t.Errorf("ImageOf(%q) = %s, want none", s, im)
		}
	}
}

type fatbinImage struct {
	kind       string // "PTX" or "ELF" (SASS)
	arch       int    // sm_NN or compute_NN
	compressed bool
}

// fatbinImages walks a fatbin's container: a 16-byte header (magic, version,
// header size, size of the images) and per image a header (kind, version,
// header size, padded size, ..., arch at byte 28, flags at byte 40: 0x2000 =
// compressed), as the CUDA toolkit's fatbinary writes them.
func fatbinImages(t *testing.T, b []byte) []fatbinImage {
	t.Helper()
	le := binary.LittleEndian
	hs, size := int(le.Uint16(b[6:])), int(le.Uint64(b[8:]))
	if hs+size != len(b) {
		t.Fatalf("fatbin header: %d + %d bytes, file %d", hs, size, len(b))
	}
	var ims []fatbinImage
	for off := hs; off < len(b); {
		if off+48 > len(b) {
			t.Fatalf("fatbin: truncated image header at %d", off)
		}
		kind, ehs, padded := le.Uint16(b[off:]), int(le.Uint32(b[off+4:])), int(le.Uint64(b[off+8:]))
		name := map[uint16]string{1: "PTX", 2: "ELF"}[kind]
		if name == "" || ehs < 48 {
			t.Fatalf("fatbin: image at %d has kind %d, header %d bytes", off, kind, ehs)
		}
		ims = append(ims, fatbinImage{name, int(le.Uint32(b[off+28:])), le.Uint64(b[off+40:])&0x2000 != 0})
		off += ehs + padded
	}
	return ims
}

// Each family's Turing PTX (fa2_<family>_ptx75.fatbin) holds the
// compute_75 PTX alone, compressed, and its kernels (listed in resources.md
// by build.sh from the PTX it packed, with the image) are exactly the
// family's Turing variants, and for the ladder every rung.
func TestSM75PTX(t *testing.T) {
	for _, im := range familyImages {
		if fis := fatbinImages(t, im.SM75PTX()); !slices.Equal(fis, []fatbinImage{{"PTX", 75, true}}) {
			t.Errorf("%s holds %v, want one compressed compute_75 PTX image", im.PTX75File(), fis)
		}
	}
	if ImageSM90A.SM75PTX() != nil || ImageSM90A.PTX75File() != "" {
		t.Error("the Hopper cubin has a Turing PTX image")
	}
	md := readFile(t, "resources.md")
	_, sec, ok := strings.Cut(md, "\n## Turing PTX entries (fa2_<family>_ptx75.fatbin)\n")
	if !ok {
		t.Fatal("resources.md has no Turing PTX entries section")
	}
	var got, want []string
	for _, e := range regexp.MustCompile(`(?m)^\| (fa2_\w+) \| (fa2_\w+\.fatbin) \|$`).FindAllStringSubmatch(sec, -1) {
		got = append(got, e[1]+" "+e[2])
	}
	for _, v := range append(Variants(), ladderVariants...) {
		if v.Arch == 75 || v.Arch == 0 { // Arch 0: a ladder rung, on both paths
			im, _ := ImageOf(v.Symbol)
			want = append(want, v.Symbol+" "+im.PTX75File())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Turing PTX entries (symbol, image) %v, want exactly the Turing variants and the ladder in their families' images %v", got, want)
	}
}

// The Go structs are passed to the kernels as raw bytes: their layouts must
// match the static_asserts of kernels/params.cuh, whose messages name the Go fields.
func TestParamsLayout(t *testing.T) {
	src := readFile(t, "../../kernels/params.cuh")
	for _, c := range []struct {
		name string
		typ  reflect.Type
		size uintptr
	}{
		{"FwdParams", reflect.TypeFor[FwdParams](), unsafe.Sizeof(FwdParams{})},
		{"BwdParams", reflect.TypeFor[BwdParams](), unsafe.Sizeof(BwdParams{})},
		{"DecodeParams", reflect.TypeFor[DecodeParams](), unsafe.Sizeof(DecodeParams{})},
		{"Sm90FwdArgs", reflect.TypeFor[Sm90FwdArgs](), unsafe.Sizeof(Sm90FwdArgs{})},
		{"Sm90BwdArgs", reflect.TypeFor[Sm90BwdArgs](), unsafe.Sizeof(Sm90BwdArgs{})},
	} {
		re := regexp.MustCompile(`static_assert\(offsetof\(` + c.name + `, \w+\) == (\d+), "(\w+)"\)`)
		ms := re.FindAllStringSubmatch(src, -1)
		fields := 0
		for i := range c.typ.NumField() {
			if c.typ.Field(i).Name != "_" { // padding to the C struct's aligned size
				fields++
			}
		}
		if len(ms) != fields {
			t.Fatalf("params.cuh asserts %d field offsets of %s, the Go struct has %d fields", len(ms), c.name, fields)
		}
		for _, m := range ms {
			f, ok := c.typ.FieldByName(m[2])
			off, _ := strconv.Atoi(m[1])
			if !ok || int(f.Offset) != off {
				t.Errorf("%s field %s: Go offset %d (found %v), CUDA offset %d", c.name, m[2], f.Offset, ok, off)
			}
		}
		size := regexp.MustCompile(`static_assert\(sizeof\(` + c.name + `\) == (\d+)`).FindStringSubmatch(src)
		if size == nil || size[1] != strconv.Itoa(int(c.size)) {
			t.Errorf("sizeof(%s): CUDA %v, Go %d", c.name, size, c.size)
		}
	}
}

// macro returns the body of the multi-line #define of name in src.
func macro(t *testing.T, src, name string) string {
	t.Helper()
	i := strings.Index(src, "#define "+name+"(")
	if i < 0 {
		t.Fatalf("no #define %s", name)
	}
	var b strings.Builder
	for l := range strings.Lines(src[i:]) {
		b.WriteString(l)
		if !strings.HasSuffix(strings.TrimRight(l, "\n"), "\\") {
			break
		}
	}
	return b.String()
}

// The generated table must agree with the X(...) rows of traits.cuh's
// FA2_FWD_TILES and FA2_BWD_TILES (the source) and with the tile tables of
// resources.md (what was compiled).
func TestTableMatchesTraits(t *testing.T) {
	src := readFile(t, "../../kernels/traits.cuh")
	count := map[family]int{}
	for _, v := range variants {
		count[passOf(v.Key)]++
	}
	// row: arch, d, owned rows, streamed rows, warps; want maps them to a variant.
	type rowKind struct {
		list, re string
		pass     family
		want     func(n []int) (br, bc int)
		bf16     bool   // every sm_80 row ships a bf16 pair too
		sized    bool   // the third field is the row's size, base or large (FA2_BWD_KVQ_TILES)
		masks    []bool // the causal values a row ships (nil: both)
	}
	listed := map[family]int{} // variants the rows promise, per pass
	// A three-kernel tile: Bc or Br, Br or Bc, warps, ..., colgroups.
	const tile = `(\d+), (\d+), (\d+), \d+, \d+, \w+, \d+, (\d+)`
	for _, k := range []rowKind{
		{"FA2_FWD_TILES", `X\((\d+), (\d+), (\d+), (\d+), (\d+), \d+, \d+, \w+, \d+\)`, pFwd, func(n []int) (int, int) { return n[2], n[3] }, true, false, nil},
		{"FA2_BWD_TILES", `X\((\d+), (\d+), \(` + tile + `\), \(\d+, \d+, \d+, \d+, \d+, \w+, \d+, \d+\)\)`, pBwdDKDV, func(n []int) (int, int) { return n[3], n[2] }, true, false, nil},
		{"FA2_BWD_TILES", `X\((\d+), (\d+), \(\d+, \d+, \d+, \d+, \d+, \w+, \d+, \d+\), \(` + tile + `\)\)`, pBwdDQ, func(n []int) (int, int) { return n[2], n[3] }, true, false, nil},
		{"FA2_BWD_KVQ_TILES", `X\((\d+), (\d+), (base|base_det|large|large_causaldet), (\d+), (\d+), (\d+), \d+, \d+, \d+, \w+, \d+, \d+\)`, pBwdDKDVQ, func(n []int) (int, int) { return n[3], n[2] }, true, true, nil},
		{"FA2_BWD_KVQ_TILES", `X\((\d+), (\d+), (large|base_det), (\d+), (\d+), (\d+), \d+, \d+, \d+, \w+, \d+, \d+\)`, pBwdDKDVQDet, func(n []int) (int, int) { return n[3], n[2] }, true, true, nil},
		{"FA2_BWD_KVQ_TILES", `X\((\d+), (\d+), (large_causaldet), (\d+), (\d+), (\d+), \d+, \d+, \d+, \w+, \d+, \d+\)`, pBwdDKDVQDet, func(n []int) (int, int) { return n[3], n[2] }, true, true, []bool{true}},
	} {
		rows := regexp.MustCompile(k.re).FindAllStringSubmatch(macro(t, src, k.list), -1)
		masks := k.masks
		if masks == nil {
			masks = []bool{false, true}
		}
		for _, r := range rows {
			listed[k.pass] += len(masks)
			if k.bf16 && r[1] == "80" {
				listed[k.pass] += len(masks)
			}
		}
		if len(rows) == 0 {
			t.Fatalf("traits.cuh has no %v rows matching %s", k.pass, k.re)
		}
		for _, r := range rows {
			// arch, d, then the row's fields (a three-kernel tile's sixth: ColGroups)
			n := make([]int, 6)
			large, smem := false, BaseSmemBytes // the limit that selects this row
			for i, f := range r[1:] {
				if k.sized && i == 2 {
					large = strings.HasPrefix(f, "large")
					if large {
						smem = 227 << 10
					}
					continue
				}
				if k.sized && i > 2 {
					i--
				}
				if i < len(n) {
					n[i], _ = strconv.Atoi(f)
				}
			}
			br, bc := k.want(n)
			for _, causal := range []bool{false, true} {
				if !slices.Contains(masks, causal) {
					if v, ok := lookupFit(k.pass, false, n[0], n[1], causal, smem); ok && v.Large == large {
						t.Errorf("%s: table has %+v, a mask the row does not ship", r[0], v)
					}
					continue
				}
				v, ok := lookupFit(k.pass, false, n[0], n[1], causal, smem)
				if !ok || v.Arch != n[0] || v.Br != br || v.Bc != bc || v.Warps != n[4] || v.BF16 || v.Large != large {
					t.Errorf("%s: table has %+v (found %v)", r[0], v, ok)
				}
				if (k.pass == pBwdDKDV || k.pass == pBwdDQ) && max(1, v.ColGroups) != n[5] {
					t.Errorf("%s: table has %+v, want ColGroups %d", r[0], v, n[5])
				}
				b, ok := lookupFit(k.pass, true, n[0], n[1], causal, smem)
				if ok != (k.bf16 && n[0] == 80) || ok && (!b.BF16 || b.Br != br || b.Bc != bc || b.Warps != n[4] || b.SmemBytes != v.SmemBytes || b.Large != large ||
					!strings.Contains(b.Symbol, "_bf16")) {
					t.Errorf("%s: bf16 table has %+v (found %v; want one exactly on the sm_80 path)", r[0], b, ok)
				}
			}
			if k.pass == pFwd { // the modified forward: the same tile, one kernel (causal is a parameter)
				v, _ := lookupPass(pFwd, n[0], n[1], false)
				for _, mp := range modPasses {
					sfx := modSuffix(mp)
					m, ok := lookupPass(mp, n[0], n[1], false)
					if !ok || m.Br != v.Br || m.Bc != v.Bc || m.Warps != v.Warps || m.SmemBytes != v.SmemBytes || m.BF16 || !strings.HasSuffix(m.Symbol, "_d"+fmt.Sprint(n[1])+sfx) {
						t.Errorf("%s: %v kernel %+v (found %v), want the plain tile %+v", r[0], mp, m, ok, v)
					}
					if _, ok := lookupPass(mp, n[0], n[1], true); ok {
						t.Errorf("%s: a causal %v kernel; causal is its window's right edge", r[0], mp)
					}
					b, ok := lookupBF16(mp, n[0], n[1], false)
					if ok != (n[0] == 80) || ok && (b.SmemBytes != v.SmemBytes || !strings.HasSuffix(b.Symbol, "_bf16"+sfx)) {
						t.Errorf("%s: bf16 %v kernel %+v (found %v; want one exactly on the sm_80 path)", r[0], mp, b, ok)
					}
				}
				// The varlen forward: the same tile, a causal pair, each dtype,
				// named as its plain twin plus _varlen.
				for _, bf16 := range []bool{false, true} {
					for _, causal := range []bool{false, true} {
						p, _ := lookupFit(pFwd, bf16, n[0], n[1], causal, BaseSmemBytes)
						vl, ok := lookupFit(pFwdVarlen, bf16, n[0], n[1], causal, BaseSmemBytes)
						if ok != (!bf16 || n[0] == 80) || ok && (vl.Br != p.Br || vl.Bc != p.Bc || vl.Warps != p.Warps || vl.SmemBytes != p.SmemBytes ||
							vl.Symbol != p.Symbol+"_varlen") {
							t.Errorf("%s: pFwdVarlen kernel %+v (found %v), want the plain one's tile %+v", r[0], vl, ok, p)
						}
					}
				}
			}
			if k.pass == pBwdDKDV {
				if _, ok := lookupPass(pBwdPre, n[0], n[1], false); !ok {
					t.Errorf("%s: no pBwdPre kernel", r[0])
				}
				if b, ok := lookupBF16(pBwdPre, n[0], n[1], false); ok != (n[0] == 80) || ok && (!b.BF16 || !strings.HasSuffix(b.Symbol, "_bf16")) {
					t.Errorf("%s: bf16 pBwdPre kernel %+v (found %v; want one exactly on the sm_80 path)", r[0], b, ok)
				}
				// The varlen backward: each of the three kernels' tile, each
				// dtype and mask, named as its plain twin plus _varlen.
				for vpass, pass := range bwdVarlenTwin {
					for _, bf16 := range []bool{false, true} {
						for _, causal := range []bool{false, pass != pBwdPre} {
							p, _ := lookupFit(pass, bf16, n[0], n[1], causal, BaseSmemBytes)
							vl, ok := lookupFit(vpass, bf16, n[0], n[1], causal, BaseSmemBytes)
							if ok != (!bf16 || n[0] == 80) || ok && (vl.Br != p.Br || vl.Bc != p.Bc || vl.Warps != p.Warps || vl.SmemBytes != p.SmemBytes ||
								vl.Symbol != p.Symbol+"_varlen") {
								t.Errorf("%s: %v kernel %+v (found %v), want the %v tile %+v", r[0], vpass, vl, ok, pass, p)
							}
						}
					}
				}
				// The modified backward: dK/dV and dQ of each dtype, the plain
				// non-causal tile, named as it plus _mod, no causal twin.
				for mpass, pass := range map[family]family{pBwdDKDVMod: pBwdDKDV, pBwdDQMod: pBwdDQ} {
					for _, bf16 := range []bool{false, true} {
						p, _ := lookupFit(pass, bf16, n[0], n[1], false, BaseSmemBytes)
						m, ok := lookupFit(mpass, bf16, n[0], n[1], false, BaseSmemBytes)
						if ok != (!bf16 || n[0] == 80) || ok && (m.Br != p.Br || m.Bc != p.Bc || m.Warps != p.Warps || m.SmemBytes != p.SmemBytes ||
							m.Symbol != p.Symbol+"_mod") {
							t.Errorf("%s: %v kernel %+v (found %v), want the %v tile %+v", r[0], mpass, m, ok, pass, p)
						}
						if _, ok := lookupFit(mpass, bf16, n[0], n[1], true, BaseSmemBytes); ok {
							t.Errorf("%s: a causal %v kernel; causal is the window's right edge", r[0], mpass)
						}
					}
				}
			}
			if k.pass == pBwdDKDVQ { // the single pass runs pre, itself and the convert kernel, in each dtype
				for _, bf16 := range []bool{false, true} {
					p, pre := lookupFit(pBwdPre, bf16, n[0], n[1], false, smem)
					c, conv := lookupFit(pBwdDQConv, bf16, n[0], n[1], false, smem)
					if !pre || !conv || c.Large != large || p.BF16 != bf16 || c.BF16 != bf16 || bf16 != strings.Contains(c.Symbol, "_bf16") {
						t.Errorf("%s (bf16 %v): pBwdPre kernel %+v (%v), pBwdDQConv kernel %+v (%v)", r[0], bf16, p, pre, c, conv)
					}
				}
			}
		}
	}
	for pass, want := range listed {
		if count[pass] != want {
			t.Errorf("traits.cuh's rows promise %d %v variants, the table has %d", want, pass, count[pass])
		}
	}
	for vpass, pass := range bwdVarlenTwin {
		want := count[pass] // D 256's pre ships with its single pass alone, and so does its varlen pre
		if count[vpass] != want {
			t.Errorf("backward: %d %v, %d %v variants; want one varlen per three-kernel one", count[pass], pass, count[vpass], vpass)
		}
	}
	if count[pBwdDKDVMod] != count[pBwdDKDV]/2 || count[pBwdDQMod] != count[pBwdDQ]/2 {
		t.Errorf("backward: %d dkdv, %d dkdv_mod, %d dq, %d dq_mod variants; want one modified per causal pair", count[pBwdDKDV], count[pBwdDKDVMod], count[pBwdDQ], count[pBwdDQMod])
	}
	if count[pFwdVarlen] != count[pFwd] {
		t.Errorf("forward: %d plain, %d varlen variants; want one varlen per plain", count[pFwd], count[pFwdVarlen])
	}
	for _, mp := range modPasses {
		if count[mp] != count[pFwd]/2 {
			t.Errorf("forward: %d plain, %d %v variants; want one per causal pair", count[pFwd], count[mp], mp)
		}
	}
	for _, v := range variants { // an ordered twin has its default kernel (large_causaldet rows: the causal twin alone)
		if passOf(v.Key) != pBwdDKDVQDet {
			continue
		}
		var w Variant
		for _, x := range variants {
			if x.Symbol == strings.Replace(v.Symbol, "dkdvqdet_", "dkdvq_", 1) {
				w = x
			}
		}
		if passOf(w.Key) != pBwdDKDVQ || w.Large != v.Large || w.Br != v.Br || w.Bc != v.Bc || w.SmemBytes != v.SmemBytes {
			t.Errorf("%s: default kernel %+v; want the same tile", v.Symbol, w)
		}
	}
	if count[pBwdDQConv] != count[pBwdDKDVQ]/2 {
		t.Errorf("single pass: %d dkdvq, %d dqconv variants; want one convert kernel per causal pair", count[pBwdDKDVQ], count[pBwdDQConv])
	}
	// A head dim with the single pass alone ships pre, the varlen pre and, on
	// each of its rows' tiles (large and base_det), the modified single pass
	// and its ordered twin (no causal twin), each dtype.
	alone := regexp.MustCompile(`X\((\d+), (\d+), large, base_det\)`).FindAllStringSubmatch(macro(t, src, "FA2_BWD_KVQ_ALONE"), -1)
	if len(alone) == 0 || count[pBwdPre] != count[pBwdDKDV]/2+2*len(alone) || count[pBwdDQ] != count[pBwdDKDV] {
		t.Errorf("backward passes: %d pre, %d dkdv, %d dq variants; want one pre per (arch, D) and causal pairs", count[pBwdPre], count[pBwdDKDV], count[pBwdDQ])
	}
	if count[pBwdDKDVQMod] != 4*len(alone) || count[pBwdDKDVQDetMod] != 4*len(alone) {
		t.Errorf("modified single pass: %d dkdvq_mod, %d dkdvqdet_mod variants; want per dtype of %d head dims one of each per size", count[pBwdDKDVQMod], count[pBwdDKDVQDetMod], len(alone))
	}
	for _, r := range alone {
		a, _ := strconv.Atoi(r[1])
		d, _ := strconv.Atoi(r[2])
		if slices.Contains(bwdHeadDims(a), d) {
			t.Errorf("%s: head dim %d also has the three-kernel backward", r[0], d)
		}
		for _, bf16 := range []bool{false, true} {
			if pre, ok := lookupFit(pBwdPreVarlen, bf16, a, d, false, 227<<10); !ok || pre.BF16 != bf16 || !strings.HasSuffix(pre.Symbol, "_varlen") {
				t.Errorf("%s (bf16 %v): varlen pre %+v (found %v); the packed sequences' backward runs it before the modified single pass", r[0], bf16, pre, ok)
			}
			for _, optin := range []int{227 << 10, BaseSmemBytes} {
				large := optin > BaseSmemBytes
				p, ok := lookupFit(pBwdDKDVQ, bf16, a, d, false, optin)
				if !ok || p.Large != large {
					t.Errorf("%s (bf16 %v) within %d bytes: single pass %+v (found %v)", r[0], bf16, optin, p, ok)
				}
				for mpass, pass := range map[family]family{pBwdDKDVQMod: pBwdDKDVQ, pBwdDKDVQDetMod: pBwdDKDVQDet} {
					w, _ := lookupFit(pass, bf16, a, d, false, optin)
					m, ok := lookupFit(mpass, bf16, a, d, false, optin)
					if !ok || m.Large != large || m.Br != p.Br || m.Bc != p.Bc || m.Warps != p.Warps || m.SmemBytes != p.SmemBytes ||
						m.Symbol != w.Symbol+"_mod" || HeadsFastest(m) != HeadsFastest(w) || !passOf(m.Key).fused() {
						t.Errorf("%s (bf16 %v) within %d bytes: %v kernel %+v (found %v), want %v's tile and name plus _mod", r[0], bf16, optin, mpass, m, ok, w)
					}
					if _, ok := lookupFit(mpass, bf16, a, d, true, optin); ok {
						t.Errorf("%s: a causal %v kernel; causal is the window's right edge", r[0], mpass)
					}
				}
			}
		}
	}
	res := readFile(t, "resources.md")
	for _, v := range variants {
		causal := 0
		if v.Causal {
			causal = 1
		}
		want := "| " + v.Symbol + " | " + strings.Join([]string{strconv.Itoa(v.Arch), strconv.Itoa(v.HeadDim), strconv.Itoa(causal),
			strconv.Itoa(v.Br), strconv.Itoa(v.Bc), strconv.Itoa(v.Warps)}, " | ") + " | "
		line := ""
		for l := range strings.Lines(res) {
			if strings.HasPrefix(l, want) {
				line = strings.TrimSpace(l)
			}
		}
		if line == "" || !strings.HasSuffix(line, "| "+strconv.Itoa(v.SmemBytes)+" |") {
			t.Errorf("resources.md tile row for %+v: %q", v, line)
		}
	}
}

// Every X(arch, d, Bc, warps, stages, rows) row of FA2_DECODE_TILES ships a
// decode kernel, fp16, plus a bf16 twin on the sm_80 path, and nothing else does.
func TestDecodeTableMatchesTraits(t *testing.T) {
	rows := regexp.MustCompile(`X\((\d+), (\d+), (\d+), (\d+), \d+, (\d+)\)`).FindAllStringSubmatch(macro(t, readFile(t, "../../kernels/traits.cuh"), "FA2_DECODE_TILES"), -1)
	want := 0
	for _, r := range rows {
		a, _ := strconv.Atoi(r[1])
		d, _ := strconv.Atoi(r[2])
		bc, _ := strconv.Atoi(r[3])
		w, _ := strconv.Atoi(r[4])
		br, _ := strconv.Atoi(r[5])
		for _, bf16 := range []bool{false, true} {
			dec, ok := lookupDecode(a, d, bf16)
			if ok != (!bf16 || a == 80) {
				t.Errorf("%s bf16=%v: found %v", r[0], bf16, ok)
				continue
			}
			if !ok {
				continue
			}
			want++
			if passOf(dec.Key) != pDecode || dec.Arch != a || dec.HeadDim != d || dec.Bc != bc || dec.Warps != w || dec.Br != br || dec.BF16 != bf16 || dec.SmemBytes <= 0 {
				t.Errorf("%s bf16=%v: table has %+v", r[0], bf16, dec)
			}
		}
	}
	got := 0
	for _, v := range variants {
		if passOf(v.Key) == pDecode {
			got++
		}
	}
	if len(rows) == 0 || got != want {
		t.Errorf("traits.cuh has %d decode rows (%d kernels), the table %d decode kernels", len(rows), want, got)
	}
}

// Every X(d, Br, Bc, stages, sm80_causal_max_nk, stage_o, mod_br, mod_bc, mod_stages, mod_overlap)
// row of FA2_SM90A_TILES ships the Hopper forward, causal (with the threshold)
// and not, their varlen twins on the same tile, and the four modified forwards on the (mod_br, mod_bc) tile (one producer
// warpgroup and Br/64 consumers each), persistent, in fp16 and in bf16 on the
// same tiles; its tile rows in
// resources.md agree, and the cubin is sm_90a SASS (CUDA ELF, arch 90).
func TestSM90ATable(t *testing.T) {
	rows := regexp.MustCompile(`X\((\d+), (\d+), (\d+), (\d+), (\d+), (?:true|false), (\d+), (\d+), (\d+), (?:true|false)\)`).FindAllStringSubmatch(macro(t, readFile(t, "../../kernels/traits.cuh"), "FA2_SM90A_TILES"), -1)
	fwds := 0
	for _, v := range sm90aVariants {
		if v.Stage == Fwd && !v.Short {
			fwds++
		}
	}
	if len(rows) == 0 || 16*len(rows) != fwds {
		t.Fatalf("FA2_SM90A_TILES has %d rows, the table %d forwards (want 8 per row and dtype)", len(rows), fwds)
	}
	md := readFile(t, "resources.md")
	var ds []int
	for _, r := range rows {
		n := make([]int, 8)
		for i := range n {
			n[i], _ = strconv.Atoi(r[i+1])
		}
		ds = append(ds, n[0])
		type want struct {
			pass                      family
			suffix                    string
			causal                    bool
			br, bc, stages, sm80MaxNk int
		}
		for _, bf16 := range []bool{false, true} {
			for _, w := range []want{
				{pFwd, "", false, n[1], n[2], n[3], 0}, {pFwd, "_causal", true, n[1], n[2], n[3], n[4]},
				{pFwdVarlen, "_varlen", false, n[1], n[2], n[3], 0}, {pFwdVarlen, "_causal_varlen", true, n[1], n[2], n[3], n[4]},
				{pFwdMod, "_mod", false, n[5], n[6], n[7], 0}, {pFwdModCap, "_mod_cap", false, n[5], n[6], n[7], 0},
				{pFwdModALiBi, "_mod_alibi", false, n[5], n[6], n[7], 0}, {pFwdModCapALiBi, "_mod_cap_alibi", false, n[5], n[6], n[7], 0},
			} {
				v, ok := Lookup(w.pass.key(SM90A, n[0], w.causal, bf16))
				sym := "fa2_fwd_sm90a_d" + r[1] + map[bool]string{true: "_bf16"}[bf16] + w.suffix
				if !ok || v.Symbol != sym || v.Arch != SM90A || v.Br != w.br || v.Bc != w.bc || v.Warps != 4*(w.br/64+1) || v.BF16 != bf16 || v.SmemBytes <= 0 || v.SM80CausalMaxNk != w.sm80MaxNk || !v.Persistent {
					t.Errorf("%s %s: table has %+v (found %v)", r[0], sym, v, ok)
					continue
				}
				if fp, _ := lookupSM90A(w.pass, n[0], w.causal); bf16 && v.SmemBytes != fp.SmemBytes {
					t.Errorf("%s: %d bytes of shared memory, its fp16 twin %d", sym, v.SmemBytes, fp.SmemBytes)
				}
				row := fmt.Sprintf("| %s | 90 | %d | %d | %d | %d | %d | %d | 1 | no | %d |", sym, n[0], map[bool]int{false: 0, true: 1}[w.causal], w.br, w.bc, v.Warps, w.stages, v.SmemBytes)
				if !strings.Contains(md, row) {
					t.Errorf("resources.md has no tile row %q", row)
				}
			}
		}
		if _, ok := lookupFwd(SM90A, n[0], false); !ok {
			t.Errorf("D %d: a Hopper forward without an sm_80 one (ForcePath(80) and the fallbacks need it)", n[0])
		}
	}
	if !slices.Equal(sm90aHeadDims(), ds) {
		t.Errorf("SM90AHeadDims %v, rows %v", sm90aHeadDims(), ds)
	}
	b := SM90ACubin
	if len(b) < 64 || !bytes.HasPrefix(b, []byte("\x7fELF")) || binary.LittleEndian.Uint16(b[18:]) != 190 || b[48] != SM90A {
		t.Errorf("fa2_sm90a.cubin: %d bytes, not a CUDA ELF (machine 190) for sm_90", len(b))
	}
}

// Every X(d, Br, Bc, stages, stage_o, max_nq) row of FA2_SM90A_SHORT_TILES ships the
// plain pair's short-call kernels, fp16 and bf16, on its tile, for a head dim
// that has an FA2_SM90A_TILES row, and resources.md lists them; no other
// kernel is Short.
func TestSM90AShortTable(t *testing.T) {
	rows := regexp.MustCompile(`X\((\d+), (\d+), (\d+), (\d+), (?:true|false), (\d+)\)`).FindAllStringSubmatch(macro(t, readFile(t, "../../kernels/traits.cuh"), "FA2_SM90A_SHORT_TILES"), -1)
	shorts := 0
	for _, v := range append(SM90AVariants(), Variants()...) {
		if v.Short {
			shorts++
		}
	}
	if 4*len(rows) != shorts {
		t.Fatalf("FA2_SM90A_SHORT_TILES has %d rows, the tables %d short kernels (want 4 per row)", len(rows), shorts)
	}
	md := readFile(t, "resources.md")
	for _, r := range rows {
		n := make([]int, 5)
		for i := range n {
			n[i], _ = strconv.Atoi(r[i+1])
		}
		if !slices.Contains(sm90aHeadDims(), n[0]) {
			t.Errorf("%s: D %d has no FA2_SM90A_TILES row", r[0], n[0])
		}
		for _, bf16 := range []bool{false, true} {
			for _, causal := range []bool{false, true} {
				v, ok := Lookup(Key{Stage: Fwd, Arch: SM90A, HeadDim: n[0], Causal: causal, BF16: bf16, Short: true})
				sym := "fa2_fwd_sm90a_d" + r[1] + map[bool]string{true: "_bf16"}[bf16] + map[bool]string{true: "_causal"}[causal] + "_short"
				if !ok || v.Symbol != sym || v.Br != n[1] || v.Bc != n[2] || v.Warps != 4*(n[1]/64+1) || v.MaxNq != n[4] || v.MaxNq <= 0 ||
					v.SmemBytes <= 0 || v.SM80CausalMaxNk != 0 || !v.Persistent || v.Pass() != "fwd_short" {
					t.Errorf("%s %s: table has %+v (found %v)", r[0], sym, v, ok)
					continue
				}
				row := fmt.Sprintf("| %s | 90 | %d | %d | %d | %d | %d | %d | 1 | no | %d |", sym, n[0], map[bool]int{false: 0, true: 1}[causal], n[1], n[2], v.Warps, n[3], v.SmemBytes)
				if !strings.Contains(md, row) {
					t.Errorf("resources.md has no tile row %q", row)
				}
			}
		}
	}
}

// Every X(d, Br, Bc, stages, ordered) row of FA2_SM90A_BWD_TILES ships the
// Hopper backward in fp16 and bf16: pre and dqconv (8 warps, Br rows, no
// dynamic shared memory) and the single pass, causal and not, and where
// ordered is true its ordered twin (one producer warpgroup and Bc/64
// consumers, the same shared memory), nothing else; its
// rows in resources.md agree; every head dim has a Hopper forward and an
// sm_80 backward beside it.
func TestSM90ABwdTable(t *testing.T) {
	rows := regexp.MustCompile(`X\((\d+), (\d+), (\d+), (\d+), (true|false)\)`).FindAllStringSubmatch(macro(t, readFile(t, "../../kernels/traits.cuh"), "FA2_SM90A_BWD_TILES"), -1)
	bwds, want := 0, 0
	for _, v := range sm90aVariants {
		if v.Stage != Fwd {
			bwds++
		}
	}
	for _, r := range rows {
		want += map[string]int{"false": 8, "true": 12}[r[5]] // per dtype: pre, dqconv, the pass causal or not [and its ordered twin]
	}
	if len(rows) == 0 || want != bwds {
		t.Fatalf("FA2_SM90A_BWD_TILES has %d rows, the table %d backward kernels, want %d", len(rows), bwds, want)
	}
	md := readFile(t, "resources.md")
	for _, r := range rows {
		n := make([]int, 4)
		for i := range n {
			n[i], _ = strconv.Atoi(r[i+1])
		}
		d, br, bc, stages := n[0], n[1], n[2], n[3]
		for _, bf16 := range []bool{false, true} {
			e := map[bool]string{true: "_bf16"}[bf16]
			type want struct {
				stage           Stage
				ordered, causal bool
				sym             string
				bc, warps, ring int
			}
			ws := []want{
				{BwdPre, false, false, fmt.Sprintf("fa2_bwd_pre_sm90a_d%d%s", d, e), 0, 8, 0},
				{BwdDQConv, false, false, fmt.Sprintf("fa2_bwd_dqconv_sm90a_d%d%s", d, e), 0, 8, 0},
			}
			for _, det := range []bool{false, true} {
				if det && r[5] != "true" {
					if _, ok := Lookup(Key{Stage: BwdDKDVQ, Ordered: true, Arch: SM90A, HeadDim: d, BF16: bf16}); ok {
						t.Errorf("D %d: an ordered Hopper pass its row does not list", d)
					}
					continue
				}
				for _, causal := range []bool{false, true} {
					ws = append(ws, want{BwdDKDVQ, det, causal, fmt.Sprintf("fa2_bwd_dkdvq%s_sm90a_d%d%s%s", map[bool]string{true: "det"}[det], d, e,
						map[bool]string{true: "_causal"}[causal]), bc, 4 * (bc/64 + 1), stages})
				}
			}
			var smem int
			for _, w := range ws {
				v, ok := Lookup(Key{Stage: w.stage, Ordered: w.ordered, Arch: SM90A, HeadDim: d, Causal: w.causal, BF16: bf16})
				if !ok || v.Symbol != w.sym || v.Br != br || v.Bc != w.bc || v.Warps != w.warps || v.Persistent || (v.SmemBytes > 0) != (w.bc > 0) {
					t.Errorf("%s: table has %+v (found %v)", w.sym, v, ok)
					continue
				}
				if w.bc > 0 {
					if smem != 0 && v.SmemBytes != smem {
						t.Errorf("%s: %d bytes of shared memory, its siblings %d", w.sym, v.SmemBytes, smem)
					}
					smem = v.SmemBytes
				}
				row := fmt.Sprintf("| %s | 90 | %d | %d | %d | %d | %d | %d | 1 | no | %d |", w.sym, d, map[bool]int{true: 1}[w.causal], br, w.bc, w.warps, w.ring, v.SmemBytes)
				if !strings.Contains(md, row) {
					t.Errorf("resources.md has no tile row %q", row)
				}
				if im, ok := ImageOf(v.Symbol); !ok || im != ImageSM90A {
					t.Errorf("%s: image %v, %v; want the Hopper cubin", v.Symbol, im, ok)
				}
			}
		}
		if _, ok := lookupSM90A(pFwd, d, false); !ok {
			t.Errorf("D %d: a Hopper backward without a Hopper forward", d)
		}
		if _, ok := Lookup(Key{Stage: BwdDKDV, Arch: 80, HeadDim: d}); !ok {
			t.Errorf("D %d: a Hopper backward without an sm_80 one (ForcePath(80) and the fallbacks need it)", d)
		}
	}
}

// A contiguous BSHD backward maps Q and dO in boxes of Br rows, K and V of
// Bc; a broadcast dO does not.
func TestSM90ABwdMaps(t *testing.T) {
	v, ok := Lookup(Key{Stage: BwdDKDVQ, Arch: SM90A, HeadDim: 64})
	if !ok {
		t.Fatal("no D64 Hopper backward")
	}
	p := BwdParams{B: 2, Nq: 300, Nk: 77, Hq: 8, Hkv: 2, D: 64}
	p.QBatchStride, p.QRowStride, p.QHeadStride = 300*8*64, 8*64, 64
	p.DOBatchStride, p.DORowStride, p.DOHeadStride = p.QBatchStride, p.QRowStride, p.QHeadStride
	p.KBatchStride, p.KRowStride, p.KHeadStride = 77*2*64, 2*64, 64
	p.VBatchStride, p.VRowStride, p.VHeadStride = p.KBatchStride, p.KRowStride, p.KHeadStride
	views, ok := SM90ABwdMaps(v, &p)
	q := TensorMapView{Dims: [4]uint64{64, 300, 8, 2}, Strides: [3]uint64{1024, 128, 307200}, BoxRows: uint32(v.Br)}
	kv := TensorMapView{Dims: [4]uint64{64, 77, 2, 2}, Strides: [3]uint64{256, 128, 19712}, BoxRows: uint32(v.Bc)}
	if want := [4]TensorMapView{q, kv, kv, q}; !ok || views != want {
		t.Errorf("SM90ABwdMaps = %+v, %v; want %+v", views, ok, want)
	}
	p.DOBatchStride = 0
	if _, ok := SM90ABwdMaps(v, &p); ok {
		t.Error("SM90ABwdMaps maps a dO broadcast over the batch")
	}
	rb, ok := map[int][2]int{64: {320, 5}, 128: {384, 3}}[v.Br] // 300 rows in query blocks of Br: rows, blocks
	if !ok {
		t.Fatalf("D64 Hopper backward in query blocks of %d: no expectation", v.Br)
	}
	if n, want := DQAccumLen(v, 2, 300, 8), 2*8*rb[0]*(64+2)+2*8*rb[1]; n != want {
		t.Errorf("DQAccumLen = %d, want %d (accumulator, LSE and Di per row, a turn per query block)", n, want)
	}
	if HeadsFastest(v) {
		t.Error("the Hopper single pass's grid has the key blocks in x")
	}
}

// SM90AMaps: a contiguous BSHD problem maps; a broadcast (stride 0) or
// unaligned operand does not, and the host then runs the sm_80 kernel.
func TestSM90AMaps(t *testing.T) {
	v, ok := lookupSM90A(pFwd, 128, false)
	if !ok {
		t.Fatal("no D128 Hopper forward")
	}
	p := FwdParams{B: 2, Nq: 300, Nk: 77, Hq: 8, Hkv: 2, D: 128}
	p.QBatchStride, p.QRowStride, p.QHeadStride = 300*8*128, 8*128, 128
	p.KBatchStride, p.KRowStride, p.KHeadStride = 77*2*128, 2*128, 128
	p.VBatchStride, p.VRowStride, p.VHeadStride = p.KBatchStride, p.KRowStride, p.KHeadStride
	views, ok := SM90AMaps(v, &p)
	want := [3]TensorMapView{
		{Dims: [4]uint64{128, 300, 8, 2}, Strides: [3]uint64{2048, 256, 614400}, BoxRows: 64},
		{Dims: [4]uint64{128, 77, 2, 2}, Strides: [3]uint64{512, 256, 39424}, BoxRows: uint32(v.Bc)},
		{Dims: [4]uint64{128, 77, 2, 2}, Strides: [3]uint64{512, 256, 39424}, BoxRows: uint32(v.Bc)},
	}
	if !ok || views != want {
		t.Errorf("SM90AMaps = %+v, %v; want %+v", views, ok, want)
	}
	for _, bad := range []func(*FwdParams){
		func(p *FwdParams) { p.KBatchStride = 0 },       // k broadcast over the batch
		func(p *FwdParams) { p.VRowStride = 2*128 + 4 }, // rows 8 bytes apart from 16
		func(p *FwdParams) { p.QBatchStride = 1 << 39 }, // 2^40 bytes
	} {
		c := p
		bad(&c)
		if _, ok := SM90AMaps(v, &c); ok {
			t.Errorf("SM90AMaps accepted %+v", c)
		}
	}
	one := p
	one.B, one.QBatchStride = 1, 0
	if _, ok := SM90AMaps(v, &one); !ok {
		t.Error("SM90AMaps refused B 1 with batch stride 0 (never used)")
	}
}

type resource struct{ regs, stack, spillSt, spillLd, smem int }

// resourceRows returns the rows of the "Resources per SASS arch" table:
// symbol, sm, registers, stack, spill stores, spill loads, static smem, image.
func resourceRows(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "resources.md")))
	in := false
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			in = strings.HasPrefix(l, "## Resources")
			continue
		}
		c := strings.Split(strings.Trim(l, "| "), " | ")
		if in && len(c) == 8 && strings.HasPrefix(c[0], "fa2_") {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatal("resources.md has no resources rows")
	}
	return out
}

// resources parses the "Resources per SASS arch" table: symbol -> sm -> numbers.
func resources(t *testing.T) map[string]map[int]resource {
	t.Helper()
	out := map[string]map[int]resource{}
	for _, c := range resourceRows(t) {
		n := make([]int, 6)
		for i := range n {
			var err error
			if n[i], err = strconv.Atoi(c[i+1]); err != nil {
				t.Fatalf("resources.md: %q: %v", c, err)
			}
		}
		if out[c[0]] == nil {
			out[c[0]] = map[int]resource{}
		}
		out[c[0]][n[0]] = resource{n[1], n[2], n[3], n[4], n[5]}
	}
	return out
}

func TestResources(t *testing.T) {
	res := resources(t)
	all := append(append(Variants(), ladderVariants...), sm90aVariants...)
	if len(res) != len(all) {
		t.Errorf("resources.md lists %d kernels, the tables %d", len(res), len(all))
	}
	for _, v := range all {
		archs := sassArchs
		if v.Arch == SM90A {
			archs = []int{SM90A} // fa2_sm90a.cubin: sm_90a alone
		}
		for _, sm := range archs {
			r, ok := res[v.Symbol][sm]
			if !ok {
				t.Errorf("%s: no sm_%d row in resources.md", v.Symbol, sm)
				continue
			}
			if v.Arch == 80 && sm < 80 {
				continue // compiled as a trap stub there; never launched
			}
			if r.spillSt != 0 || r.spillLd != 0 || r.stack != 0 {
				t.Errorf("%s sm_%d spills: %+v", v.Symbol, sm, r)
			}
			if r.regs > 255 || r.regs*32*v.Warps > 64*1024 {
				t.Errorf("%s sm_%d: %d registers x %d threads do not fit an SM", v.Symbol, sm, r.regs, 32*v.Warps)
			}
			// The warp-specialised Hopper kernels split what a CTA gets at launch
			// between producer and consumers by setmaxnreg (traits.cuh's
			// sm90_launch_regs): compiled to fewer, their setmaxnreg.inc waits forever.
			if launch := 64 * 1024 / (32 * v.Warps) / 8 * 8; v.Arch == SM90A && (v.Stage == Fwd || v.Stage == BwdDKDVQ) && r.regs != launch {
				t.Errorf("%s: %d registers at launch, its register split assumes %d", v.Symbol, r.regs, launch)
			}
			limit := BaseSmemBytes // sm_86/89 opt-in maximum, the smallest of the sm_80+ parts
			if v.Large {
				limit = 227 << 10 // H100/H200: a Large row runs only where it fits (TestLargeRows)
			}
			switch v.Arch {
			case SM90A:
				limit = 227 << 10 // H100/H200 alone
			case 75, 0:
				limit = 64 << 10 // Turing's per-block maximum (Arch 0: a ladder rung, on both paths)
			}
			if r.smem+v.SmemBytes > limit {
				t.Errorf("%s sm_%d: %d static + %d dynamic bytes of shared memory > %d", v.Symbol, sm, r.smem, v.SmemBytes, limit)
			}
		}
	}
}

// A Large row (more than BaseSmemBytes) has a <= BaseSmemBytes sibling of
// the same pass, head dim, mask and dtype (its symbol without _large) or, as
// D 64's single pass (no base row) and the ordered twins at head dims with the
// three kernels (D 128), none (then parts below its need have no such kernel:
// the three kernels run), and lookupFit picks it exactly where every Large
// kernel of its set fits.
func TestLargeRows(t *testing.T) {
	for _, v := range variants {
		if !v.Large {
			continue
		}
		base := strings.Replace(v.Symbol, "_large", "", 1)
		var sib Variant
		for _, w := range variants {
			if w.Symbol == base {
				sib = w
			}
		}
		threeKernels := false // the head dims whose parts below the row's need run the three kernels
		for _, w := range variants {
			threeKernels = threeKernels || passOf(w.Key) == pBwdDKDV && w.Arch == v.Arch && w.HeadDim == v.HeadDim && w.BF16 == v.BF16
		}
		baseRow := false // the head dim has a <= 99 KiB single pass
		for _, w := range variants {
			baseRow = baseRow || passOf(w.Key) == pBwdDKDVQ && !w.Large && w.Arch == v.Arch && w.HeadDim == v.HeadDim && w.BF16 == v.BF16
		}
		noSib := !baseRow || threeKernels && (passOf(v.Key) == pBwdDKDVQDet || passOf(v.Key) == pBwdDKDVQDetMod) // the kernels without a <= 99 KiB twin
		if !strings.Contains(v.Symbol, "_large") || noSib != (sib.Symbol == "") || !noSib && (sib.Large || passOf(sib.Key) != passOf(v.Key) || sib.HeadDim != v.HeadDim ||
			sib.Causal != v.Causal || sib.BF16 != v.BF16 || sib.SmemBytes > BaseSmemBytes) {
			t.Errorf("%s: sibling %+v; want a <= %d-byte row of the same kernel, and none exactly for D 64 and D 128's ordered twins", v.Symbol, sib, BaseSmemBytes)
		}
		if passOf(v.Key) != pBwdDQConv && v.SmemBytes <= BaseSmemBytes {
			t.Errorf("%s: %d bytes fit the base limit: it is not a large row", v.Symbol, v.SmemBytes)
		}
		need := 0 // the set's largest
		for _, w := range variants {
			if w.Large && w.Arch == v.Arch && w.HeadDim == v.HeadDim && w.BF16 == v.BF16 {
				need = max(need, w.SmemBytes)
			}
		}
		for _, c := range []struct {
			name  string
			optin int
		}{{"sm_86/89", 99 << 10}, {"A100", 163 << 10}, {"H100/H200", 227 << 10}, {"just short", need - 1}, {"exact", need}} {
			got, ok := lookupFit(passOf(v.Key), v.BF16, 90, v.HeadDim, v.Causal, c.optin)
			want := sib // none without a sibling
			if need <= c.optin {
				want = v
			}
			if ok != (want.Symbol != "") || got.Symbol != want.Symbol {
				t.Errorf("lookupFit(%v, D%d, causal %v) with %d bytes (%s) = %s; want %s", passOf(v.Key), v.HeadDim, v.Causal, c.optin, c.name, got.Symbol, want.Symbol)
			}
		}
		if got, _ := lookupPass(passOf(v.Key), 90, v.HeadDim, v.Causal); got.Large {
			t.Errorf("lookupPass(%v, D%d) = %s: lookupPass assumes %d bytes", passOf(v.Key), v.HeadDim, got.Symbol, BaseSmemBytes)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		arch, d int
		causal  bool
		sym     string
	}{
		{75, 64, false, "fa2_fwd_sm75_d64"},
		{75, 128, true, "fa2_fwd_sm75_d128_causal"},
		{79, 32, false, "fa2_fwd_sm75_d32"},
		{80, 96, true, "fa2_fwd_sm80_d96_causal"},
		{86, 128, false, "fa2_fwd_sm80_d128"},
		{89, 64, true, "fa2_fwd_sm80_d64_causal"},
		{90, 256, true, "fa2_fwd_sm80_d256_causal"},
		{120, 128, false, "fa2_fwd_sm80_d128"},
		{75, 256, true, "fa2_fwd_sm75_d256_causal"}, // the n8 row (traits.cuh's kN8)
	} {
		v, ok := lookupFwd(c.arch, c.d, c.causal)
		if !ok || v.Symbol != c.sym || v.HeadDim != c.d || v.Causal != c.causal {
			t.Errorf("lookupFwd(%d, %d, %v) = %+v, %v; want %s", c.arch, c.d, c.causal, v, ok, c.sym)
		}
	}
	for _, c := range []struct{ arch, d int }{{75, 80}, {70, 64}, {61, 128}, {90, 80}, {90, 0}} {
		if v, ok := lookupFwd(c.arch, c.d, false); ok {
			t.Errorf("lookupFwd(%d, %d) = %+v, want none", c.arch, c.d, v)
		}
	}
	if got := passHeadDims(pFwd, 75); !slices.Equal(got, []int{32, 64, 96, 128, 256}) {
		t.Errorf("passHeadDims(pFwd, 75) = %v", got)
	}
	if got := passHeadDims(pFwd, 90); !slices.Equal(got, []int{32, 64, 96, 128, 256}) {
		t.Errorf("passHeadDims(pFwd, 90) = %v", got)
	}
	if got := passHeadDims(pFwd, 70); got != nil {
		t.Errorf("passHeadDims(pFwd, 70) = %v, want none", got)
	}
	seen := map[string]bool{}
	for _, v := range Variants() {
		if seen[v.Symbol] {
			t.Errorf("symbol %s twice", v.Symbol)
		}
		seen[v.Symbol] = true
		pass := passOf(v.Key)
		if twin, ok := bwdVarlenTwin[pass]; ok { // named as its three-kernel twin plus _varlen, the same tile
			pass = twin
			if !strings.HasSuffix(v.Symbol, "_varlen") {
				t.Errorf("%s: pass %v, want a symbol ending _varlen", v.Symbol, passOf(v.Key))
			}
		}
		if twin, ok := map[family]family{pBwdDKDVMod: pBwdDKDV, pBwdDQMod: pBwdDQ, pBwdDKDVQMod: pBwdDKDVQ, pBwdDKDVQDetMod: pBwdDKDVQDet}[pass]; ok { // its plain twin's name plus _mod, the same tile
			pass = twin
			if !strings.HasSuffix(v.Symbol, "_mod") {
				t.Errorf("%s: pass %v, want a symbol ending _mod", v.Symbol, passOf(v.Key))
			}
		}
		prefix := "fa2_" + pass.String() + "_"
		if sfx := fwdSuffix(passOf(v.Key)); sfx != "" { // named as its plain twin, plus sfx
			prefix = "fa2_fwd_"
			if !strings.HasSuffix(v.Symbol, sfx) {
				t.Errorf("%s: pass %v, want a symbol ending %s", v.Symbol, passOf(v.Key), sfx)
			}
		}
		if !strings.HasPrefix(v.Symbol, prefix) {
			t.Errorf("%s: pass %v, want a symbol starting %s", v.Symbol, passOf(v.Key), prefix)
		}
		if passOf(v.Key) == pDecode {
			continue // their warps share the rows: TestDecodeTableMatchesTraits
		}
		// The rows a CTA owns are split over its warps in 16-row mma tiles
		// (or 8-row n8 ones; ColGroups warps share each); the streamed rows go
		// in k16 steps (none for the pre pass).
		owned, streamed, split := v.Br, v.Bc, 16*v.Warps/max(1, v.ColGroups)
		if pass == pBwdDKDV || pass.fused() {
			owned, streamed = v.Bc, v.Br
		}
		if pass.fused() { // a 2-D warp grid: owned rows split over some of the warps only
			split = 16
		}
		if strings.HasPrefix(v.Symbol, "fa2_fwd_sm75_") && owned == 8*v.Warps { // the Turing n8 forward (traits.cuh's kN8): 8 rows per warp
			split = owned
		}
		if owned%split != 0 || streamed%16 != 0 || (streamed == 0) != (pass == pBwdPre || pass == pBwdDQConv) {
			t.Errorf("%s: owned rows %d, streamed rows %d do not fit %d warps of 16-row mma tiles", v.Symbol, owned, streamed, v.Warps)
		}
	}
	for _, c := range []struct {
		pass   family
		arch   int
		d      int
		causal bool
		sym    string
	}{
		{pBwdPre, 90, 64, false, "fa2_bwd_pre_sm80_d64"},
		{pBwdDKDV, 75, 128, true, "fa2_bwd_dkdv_sm75_d128_causal"},
		{pBwdDQ, 86, 32, false, "fa2_bwd_dq_sm80_d32"},
		{pFwd, 90, 96, true, "fa2_fwd_sm80_d96_causal"},
	} {
		if v, ok := lookupPass(c.pass, c.arch, c.d, c.causal); !ok || v.Symbol != c.sym || passOf(v.Key) != c.pass {
			t.Errorf("lookupPass(%v, %d, %d, %v) = %+v, %v; want %s", c.pass, c.arch, c.d, c.causal, v, ok, c.sym)
		}
	}
	for _, p := range []family{pBwdPre, pBwdPreVarlen, pBwdDQConv} { // they do not depend on the mask: one key, non-causal
		for _, v := range variants {
			if passOf(v.Key) == p && v.Causal {
				t.Errorf("%s: a causal %v kernel", v.Symbol, p)
			}
		}
	}
	if v, ok := lookupPass(pBwdDKDVQ, 75, 128, false); ok {
		t.Errorf("lookupPass(pBwdDKDVQ, 75, 128) = %+v: the single pass is sm_80-path only", v)
	}
	if v, ok := lookupPass(pBwdDKDVQ, 90, 128, true); !ok {
		t.Errorf("lookupPass(pBwdDKDVQ, 90, 128): no single-pass kernel")
	} else {
		rows := v.Br // Nq 65 padded to whole query blocks
		for rows < 65 {
			rows += v.Br
		}
		if got := DQAccumLen(v, 2, 65, 3); got != 2*3*rows*128 {
			t.Errorf("DQAccumLen(%s, B 2, Nq 65, Hq 3) = %d, want %d", v.Symbol, got, 2*3*rows*128)
		}
		// The ordered twin (large rows only): its tile's accumulator, then one counter per query block.
		if w, ok := lookupPass(pBwdDKDVQDet, 90, 128, true); ok {
			t.Errorf("lookupPass(pBwdDKDVQDet, 90, 128) = %+v: the base row has no ordered twin", w)
		}
		l, _ := lookupFit(pBwdDKDVQ, false, 90, 128, true, 227<<10)
		w, ok := lookupFit(pBwdDKDVQDet, false, 90, 128, true, 227<<10)
		wn, okn := lookupFit(pBwdDKDVQDet, false, 90, 128, false, 227<<10)
		lrows := (65 + l.Br - 1) / l.Br * l.Br
		if !ok || !okn || !w.Large || w.Br != l.Br || w.Bc != l.Bc || w.SmemBytes != l.SmemBytes || !HeadsFastest(w) || !HeadsFastest(wn) || HeadsFastest(l) {
			t.Errorf("lookupFit(pBwdDKDVQDet, 90, 128, 227 KiB) = %+v (%v), non-causal %+v (%v); want the tile of %s, heads fastest", w, ok, wn, okn, l.Symbol)
		} else if got, want := DQAccumLen(w, 2, 65, 3), 2*3*lrows*128+2*3*lrows/l.Br; got != want {
			t.Errorf("DQAccumLen(%s, B 2, Nq 65, Hq 3) = %d, want %d", w.Symbol, got, want)
		}
	}
	if v, ok := lookupPass(pBwdDKDV, 90, 256, false); ok {
		t.Errorf("lookupPass(pBwdDKDV, 90, 256) = %+v: no D256 backward is built", v)
	}
	if got := bwdHeadDims(75); !slices.Equal(got, []int{32, 64, 96, 128, 256}) {
		t.Errorf("bwdHeadDims(75) = %v", got)
	}
	if got := bwdHeadDims(90); !slices.Equal(got, []int{32, 64, 96, 128}) {
		t.Errorf("bwdHeadDims(90) = %v", got)
	}
	// D 256 on the sm_80 path has the single pass alone, with its ordered
	// twin: a Large row (A100 and H100/H200) and a base one (sm_86/89); on
	// Turing the three kernels (column groups).
	for _, c := range []struct {
		arch, optin int
		want        []int
	}{{75, 64 << 10, []int{32, 64, 96, 128, 256}}, {86, 99 << 10, []int{32, 64, 96, 128, 256}},
		{80, 163 << 10, []int{32, 64, 96, 128, 256}}, {90, 227 << 10, []int{32, 64, 96, 128, 256}}} {
		for _, fused := range []family{pBwdDKDVQ, pBwdDKDVQDet} {
			if got := bwdHeadDimsFit(fused, c.arch, c.optin); !slices.Equal(got, c.want) {
				t.Errorf("bwdHeadDimsFit(%v, %d, %d) = %v, want %v", fused, c.arch, c.optin, got, c.want)
			}
		}
	}
	if got := passHeadDims(pBwdPre, 90); !slices.Equal(got, bwdHeadDimsFit(pBwdDKDVQ, 90, 227<<10)) {
		t.Errorf("passHeadDims(pBwdPre, 90) = %v, want every backward head dim %v", got, bwdHeadDimsFit(pBwdDKDVQ, 90, 227<<10))
	}
	for _, p := range []family{pBwdPre, pBwdDQ} {
		for _, a := range []int{75, 90} {
			if p == pBwdPre && a == 90 {
				continue // above: D 256's pre ships with its single pass
			}
			if got := passHeadDims(p, a); !slices.Equal(got, bwdHeadDims(a)) {
				t.Errorf("passHeadDims(%v, %d) = %v, want the dK/dV head dims %v", p, a, got, bwdHeadDims(a))
			}
		}
	}
}

// The ladder table must list FA2_LADDER's rungs (kernels/ladder/ladder.cuh),
// each with a tile row in resources.md, and stay out of the shipped lookups.
func TestLadderTable(t *testing.T) {
	src := readFile(t, "../../kernels/ladder/ladder.cuh")
	rows := regexp.MustCompile(`X\((\d+), (\d+)\)`).FindAllStringSubmatch(macro(t, src, "FA2_LADDER"), -1)
	if len(rows) == 0 || len(rows)*2 != len(ladderVariants) {
		t.Fatalf("FA2_LADDER has %d rows, the table %d variants (want 2 per row)", len(rows), len(ladderVariants))
	}
	res := readFile(t, "resources.md")
	for _, r := range rows {
		rung, _ := strconv.Atoi(r[1])
		d, _ := strconv.Atoi(r[2])
		if rung < 1 || rung > LadderRungs || !slices.Contains(rungHeadDims(rung), d) {
			t.Errorf("%s: rung %d, head dims %v", r[0], rung, rungHeadDims(rung))
		}
		for _, causal := range []bool{false, true} {
			v, ok := lookupRung(rung, d, causal)
			c := 0
			if causal {
				c = 1
			}
			row := fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d |", v.Symbol, rung, d, c, v.Br, v.Bc, v.Warps)
			if !ok || v.Arch != 0 || passOf(v.Key) != pFwd || v.SmemBytes != 0 || !strings.Contains(res, row) {
				t.Errorf("%s causal=%v: %+v (found %v); resources.md needs %q", r[0], causal, v, ok, row)
			}
		}
	}
	for _, v := range variants {
		if v.Rung != 0 {
			t.Errorf("shipped table holds a ladder kernel: %+v", v)
		}
	}
}

// family is a kernel's Key without its path, head dim, mask, dtype, size and
// rung: a family of kernels, as the tests name them.
type family struct {
	stage           Stage
	mods            Mods
	packed, ordered bool
}

var (
	pFwd            = family{stage: Fwd}
	pFwdMod         = family{stage: Fwd, mods: ModOn}
	pFwdModCap      = family{stage: Fwd, mods: ModOn | ModCap}
	pFwdModALiBi    = family{stage: Fwd, mods: ModOn | ModALiBi}
	pFwdModCapALiBi = family{stage: Fwd, mods: ModOn | ModCap | ModALiBi}
	pFwdVarlen      = family{stage: Fwd, packed: true}
	pBwdPre         = family{stage: BwdPre}
	pBwdPreVarlen   = family{stage: BwdPre, packed: true}
	pBwdDKDV        = family{stage: BwdDKDV}
	pBwdDKDVVarlen  = family{stage: BwdDKDV, packed: true}
	pBwdDKDVMod     = family{stage: BwdDKDV, mods: ModOn}
	pBwdDQ          = family{stage: BwdDQ}
	pBwdDQVarlen    = family{stage: BwdDQ, packed: true}
	pBwdDQMod       = family{stage: BwdDQ, mods: ModOn}
	pBwdDKDVQ       = family{stage: BwdDKDVQ}
	pBwdDKDVQDet    = family{stage: BwdDKDVQ, ordered: true}
	pBwdDKDVQMod    = family{stage: BwdDKDVQ, mods: ModOn}
	pBwdDKDVQDetMod = family{stage: BwdDKDVQ, mods: ModOn, ordered: true}
	pBwdDQConv      = family{stage: BwdDQConv}
	pDecode         = family{stage: Decode}
)

func passOf(k Key) family { return family{k.Stage, k.Mods, k.Packed, k.Ordered} }

func (p family) key(arch, headDim int, causal, bf16 bool) Key {
	return Key{Stage: p.stage, Mods: p.mods, Packed: p.packed, Ordered: p.ordered, Arch: arch, HeadDim: headDim, Causal: causal, BF16: bf16}
}

func (p family) String() string { return p.key(0, 0, false, false).Pass() }

// fused reports whether p is one of the single pass's dK/dV/dQ kernels.
func (p family) fused() bool { return p.stage == BwdDKDVQ }

// lookupFit is the kernel of pass p that a device of compute capability
// arch whose opt-in shared memory per block is smemOptin bytes runs: the
// Large row where every Large row of its set fits (LargeFits), else the
// base row.
func lookupFit(p family, bf16 bool, arch, headDim int, causal bool, smemOptin int) (Variant, bool) {
	k := p.key(Path(arch), headDim, causal, bf16)
	if k.Arch == 0 {
		return Variant{}, false
	}
	if LargeFits(k.Arch, headDim, bf16, smemOptin) {
		l := k
		l.Large = true
		if v, ok := Lookup(l); ok {
			return v, true
		}
	}
	return Lookup(k)
}

// lookupPass and lookupBF16 are lookupFit on a device of BaseSmemBytes.
func lookupPass(p family, arch, headDim int, causal bool) (Variant, bool) {
	return lookupFit(p, false, arch, headDim, causal, BaseSmemBytes)
}

func lookupBF16(p family, arch, headDim int, causal bool) (Variant, bool) {
	return lookupFit(p, true, arch, headDim, causal, BaseSmemBytes)
}

func lookupFwd(arch, headDim int, causal bool) (Variant, bool) {
	return lookupPass(pFwd, arch, headDim, causal)
}

func lookupDecode(arch, headDim int, bf16 bool) (Variant, bool) {
	return lookupFit(pDecode, bf16, arch, headDim, false, BaseSmemBytes)
}

func lookupSM90A(p family, headDim int, causal bool) (Variant, bool) {
	return Lookup(p.key(SM90A, headDim, causal, false))
}

func sm90aHeadDims() []int { return HeadDims(pFwd.key(SM90A, 0, false, false)) }

func lookupRung(rung, headDim int, causal bool) (Variant, bool) {
	k := pFwd.key(0, headDim, causal, false)
	k.Rung = rung
	return Lookup(k)
}

func rungHeadDims(rung int) []int {
	k := pFwd.key(0, 0, false, false)
	k.Rung = rung
	return HeadDims(k)
}

// passHeadDims lists the head dims of p's fp16 base rows on arch's path.
func passHeadDims(p family, arch int) []int {
	if Path(arch) == 0 {
		return nil
	}
	return HeadDims(p.key(Path(arch), 0, false, false))
}

// bwdHeadDims lists the head dims with the three-kernel backward on arch's path.
func bwdHeadDims(arch int) []int { return passHeadDims(pBwdDKDV, arch) }

// bwdHeadDimsFit lists the head dims with a backward on a device of arch
// whose opt-in shared memory per block is smemOptin bytes, when the single
// pass fused (or its ordered twin) runs where it fits: the three kernels'
// and those of a fused kernel that fits.
func bwdHeadDimsFit(fused family, arch, smemOptin int) []int {
	ds := bwdHeadDims(arch)
	for _, v := range variants {
		if passOf(v.Key) == fused && v.Arch == Path(arch) && !v.Causal && !v.BF16 && !slices.Contains(ds, v.HeadDim) {
			if _, ok := lookupFit(fused, false, arch, v.HeadDim, false, smemOptin); ok {
				ds = append(ds, v.HeadDim)
			}
		}
	}
	slices.Sort(ds)
	return ds
}

// modPasses are the modified forward's passes, one per softcap/ALiBi combination.
var modPasses = []family{fwdModPass(false, false), fwdModPass(true, false), fwdModPass(false, true), fwdModPass(true, true)}

func fwdModPass(softcap, alibi bool) family { return family{stage: Fwd, mods: FwdMods(softcap, alibi)} }

// modSuffix is the symbol suffix of a modified forward pass (fwd.cu's FA2_FWD_MOD).
func modSuffix(p family) string {
	return map[family]string{pFwdMod: "_mod", pFwdModCap: "_mod_cap", pFwdModALiBi: "_mod_alibi", pFwdModCapALiBi: "_mod_cap_alibi"}[p]
}

// bwdVarlenTwin maps each varlen backward pass to its three-kernel twin
// (bwd.cu's FA2_BWD_VARLEN).
var bwdVarlenTwin = map[family]family{pBwdPreVarlen: pBwdPre, pBwdDKDVVarlen: pBwdDKDV, pBwdDQVarlen: pBwdDQ}

// fwdSuffix is what a forward pass named after its plain twin adds to the
// twin's symbol (fwd.cu's FA2_FWD_MOD and FA2_FWD_VARLEN), or "".
func fwdSuffix(p family) string {
	if p == pFwdVarlen {
		return "_varlen"
	}
	return modSuffix(p)
}

// TestFwdMods: each softcap/ALiBi combination gets the kernel with exactly
// those compiled in, and its name says so.
func TestFwdMods(t *testing.T) {
	for _, c := range []struct {
		cap, alibi bool
		name       string
	}{{false, false, "fwd_mod"}, {true, false, "fwd_mod_cap"}, {false, true, "fwd_mod_alibi"}, {true, true, "fwd_mod_cap_alibi"}} {
		m := FwdMods(c.cap, c.alibi)
		v, ok := Lookup(Key{Stage: Fwd, Mods: m, Arch: 80, HeadDim: 64})
		if !ok || m&ModOn == 0 || strings.Contains(v.Symbol, "_cap") != c.cap || strings.Contains(v.Symbol, "_alibi") != c.alibi || v.Pass() != c.name {
			t.Errorf("FwdMods(%v, %v) = %v: kernel %s %q (found %v)", c.cap, c.alibi, m, v.Symbol, v.Pass(), ok)
		}
	}
}

// TestKeysUnique: every kernel of the three tables has a key of its own, so
// Lookup finds each; and every name a key gives is one of KernelInfo.Pass's.
func TestKeysUnique(t *testing.T) {
	all := append(append(Variants(), SM90AVariants()...), LadderVariants()...)
	if len(byKey) != len(all) {
		t.Errorf("%d kernels, %d keys", len(all), len(byKey))
	}
	for _, v := range all {
		if w, ok := Lookup(v.Key); !ok || w.Symbol != v.Symbol {
			t.Errorf("Lookup(%+v) = %s (found %v), want %s", v.Key, w.Symbol, ok, v.Symbol)
		}
	}
	names := map[string]bool{}
	for _, v := range all {
		names[v.Pass()] = true
	}
	want := []string{"fwd", "fwd_mod", "fwd_mod_cap", "fwd_mod_alibi", "fwd_mod_cap_alibi", "fwd_varlen", "fwd_short", "bwd_pre", "bwd_pre_varlen",
		"bwd_dkdv", "bwd_dkdv_varlen", "bwd_dkdv_mod", "bwd_dq", "bwd_dq_varlen", "bwd_dq_mod", "bwd_dkdvq", "bwd_dkdvqdet",
		"bwd_dkdvq_mod", "bwd_dkdvqdet_mod", "bwd_dqconv", "decode"}
	for _, n := range want {
		if !names[n] {
			t.Errorf("no kernel named %q", n)
		}
		delete(names, n)
	}
	if len(names) != 0 {
		t.Errorf("kernels named %v beyond the known passes", names)
	}
}
