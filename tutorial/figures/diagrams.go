package main

import (
	"fmt"
	"html"
	"strings"
)

// diagrams are the figures this program draws itself as SVG: pictures of the
// hardware and of the kernels' data layouts for chapter 6's GPU primer. They
// are computed from the same formulas the kernels use (the mma lane map of
// kernels/mma.cuh, Swizzle of kernels/traits.cuh), so they are the same bytes
// on every run; -check redraws them and fails if a committed file differs.
var diagrams = []struct {
	name string
	draw func() string
}{
	{"06-t4", drawT4},
	{"06-swizzle", drawSwizzle},
	{"06-mma-lanes", drawLanes},
	{"06-overlap", drawOverlap},
}

// Colours, as viz's charts use them.
const (
	cBlue   = "#4477aa"
	cLBlue  = "#cfe0f1"
	cGreen  = "#dcefd6"
	cOrange = "#ee7733"
	cLOrng  = "#fbd9c2"
	cGrey   = "#e6e6e6"
	cDark   = "#333333"
	cMid    = "#777777"
)

// svg builds one SVG document; every number is written with %g so that the
// output is the same bytes on every machine.
type svg struct{ b strings.Builder }

func newSVG(w, h float64, title string) *svg {
	s := &svg{}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="DejaVu Sans, Arial, Helvetica, sans-serif">`+"\n", w, h, w, h)
	fmt.Fprintf(&s.b, "<title>%s</title>\n", html.EscapeString(title))
	fmt.Fprintf(&s.b, `<rect x="0" y="0" width="%g" height="%g" fill="#ffffff"/>`+"\n", w, h)
	return s
}

func (s *svg) rect(x, y, w, h float64, fill, stroke string) {
	fmt.Fprintf(&s.b, `<rect x="%g" y="%g" width="%g" height="%g" fill="%s" stroke="%s"/>`+"\n", x, y, w, h, fill, stroke)
}

// text writes s at (x, y): anchor start, middle or end; bold or not.
func (s *svg) text(x, y, size float64, anchor string, bold bool, fill, t string) {
	weight := ""
	if bold {
		weight = ` font-weight="bold"`
	}
	fmt.Fprintf(&s.b, `<text x="%g" y="%g" font-size="%g" text-anchor="%s" fill="%s"%s>%s</text>`+"\n", x, y, size, anchor, fill, weight, html.EscapeString(t))
}

func (s *svg) line(x1, y1, x2, y2 float64, stroke string, width float64, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(&s.b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="%g"%s/>`+"\n", x1, y1, x2, y2, stroke, width, dash)
}

// box is a rectangle with up to a few centred lines of text.
func (s *svg) box(x, y, w, h float64, fill, stroke string, size float64, lines ...string) {
	s.rect(x, y, w, h, fill, stroke)
	top := y + h/2 - float64(len(lines)-1)*size*0.6 + size*0.35
	for i, l := range lines {
		s.text(x+w/2, top+float64(i)*size*1.2, size, "middle", false, cDark, l)
	}
}

func (s *svg) end() string {
	s.b.WriteString("</svg>\n")
	return s.b.String()
}

// drawT4 is the T4 at a glance: 40 SMs, one SM's four sub-partitions, the
// memory below them, and the names of the units a kernel is launched in.
func drawT4() string {
	s := newSVG(900, 440, "The T4: SMs, one SM, the memory hierarchy and the thread hierarchy")
	s.text(450, 24, 17, "middle", true, cDark, "A T4 (sm_75): what a kernel runs on")

	// The chip: 40 SMs, one of them opened up in the middle.
	s.text(150, 52, 13, "middle", true, cDark, "the GPU: 40 SMs")
	for i := 0; i < 40; i++ {
		x, y := 30+float64(i%8)*30, 62+float64(i/8)*30
		fill := cLBlue
		if i == 9 {
			fill = cBlue
		}
		s.rect(x, y, 24, 24, fill, cBlue)
	}
	s.box(30, 226, 234, 44, cGrey, cMid, 12, "L2 cache: 4 MB", "shared by all 40 SMs")
	s.box(30, 286, 234, 44, cLOrng, cOrange, 12, "GDDR6: 16 GB", "320 GB/s to the SMs")
	s.line(147, 212, 147, 226, cMid, 1.5, false)
	s.line(147, 270, 147, 286, cMid, 1.5, false)
	s.text(147, 352, 11, "middle", false, cMid, "tensor cores: 65 TFLOP/s fp16 at most:")
	s.text(147, 366, 11, "middle", false, cMid, "a kernel needs 203 FLOP per byte read")
	s.text(147, 380, 11, "middle", false, cMid, "from GDDR6 to keep them busy")

	// One SM.
	s.line(84, 110, 300, 62, cBlue, 1, true)
	s.line(84, 110, 300, 338, cBlue, 1, true)
	s.rect(300, 44, 300, 294, "#f7fafd", cBlue)
	s.text(450, 64, 13, "middle", true, cDark, "one SM")
	for i := 0; i < 4; i++ {
		x, y := 312+float64(i%2)*144, 74+float64(i/2)*94
		s.rect(x, y, 132, 84, "#ffffff", cBlue)
		s.text(x+66, y+16, 11, "middle", true, cDark, fmt.Sprintf("sub-partition %d", i))
		s.text(x+66, y+32, 10.5, "middle", false, cDark, "1 warp scheduler")
		s.text(x+66, y+47, 10.5, "middle", false, cDark, "16K 32-bit registers")
		s.text(x+66, y+62, 10.5, "middle", false, cDark, "16 fp32 lanes")
		s.text(x+66, y+77, 10.5, "middle", false, cDark, "2 tensor cores")
	}
	s.box(312, 268, 276, 58, cGreen, "#228833", 11, "96 KB of L1 and shared memory: up to", "64 KiB shared memory, split among the", "SM's CTAs; the rest is L1 cache")
	s.text(450, 356, 11, "middle", false, cMid, "64K registers (256 KiB) and up to 32 resident")
	s.text(450, 370, 11, "middle", false, cMid, "warps (1024 threads) per SM, 16 CTAs at most")

	// The thread hierarchy.
	s.text(760, 64, 13, "middle", true, cDark, "what a launch is made of")
	rows := [][]string{
		{"thread", "one lane: its own registers"},
		{"warp = 32 threads", "one instruction for all 32 lanes"},
		{"thread block (CTA)", "1-32 warps on one SM, one", "shared-memory allocation"},
		{"grid", "every CTA of the launch, spread", "over the SMs as room frees up"},
	}
	y := 78.0
	for i, r := range rows {
		h := 44.0 + 12*float64(len(r)-2)
		s.rect(640, y, 240, h, []string{"#ffffff", cLBlue, "#b7cde6", "#9ab7d9"}[i], cBlue)
		s.text(760, y+17, 11.5, "middle", true, cDark, r[0])
		for k, t := range r[1:] {
			s.text(760, y+32+12*float64(k), 10.5, "middle", false, cDark, t)
		}
		y += h + 10
	}
	s.text(760, y+14, 10.5, "middle", false, cMid, "rung 1: CTAs of 64 threads (2 warps),")
	s.text(760, y+28, 10.5, "middle", false, cMid, "one query row per thread; the shipped")
	s.text(760, y+42, 10.5, "middle", false, cMid, "T4 kernel at d = 64: 8 warps, 128 rows")
	s.text(450, 425, 10.5, "middle", false, cMid, "Sources: kernels/traits.cuh (SMs, shared memory, registers), NVIDIA's T4 data sheet and Turing architecture paper (the rest)")
	return s.end()
}

// drawSwizzle shows eight 128-byte rows of a d = 64 fp16 tile in shared
// memory, plain and XOR-swizzled (Swizzle<64>: chunk c of row r stored at
// c ^ (r & 7)), with the chunks one ldmatrix 8x8 matrix reads marked.
func drawSwizzle() string {
	const cw, ch = 44.0, 24.0
	s := newSVG(900, 372, "Shared-memory banks: a row-major tile and the XOR swizzle")
	s.text(450, 24, 17, "middle", true, cDark, "Eight rows of a d = 64 tile in shared memory, by bank")
	panel := func(x0 float64, title, note1, note2 string, at func(r, c int) int) {
		s.text(x0+4*cw, 52, 13, "middle", true, cDark, title)
		for p := 0; p < 8; p++ {
			s.text(x0+float64(p)*cw+cw/2, 74, 9.5, "middle", false, cMid, fmt.Sprintf("%d-%d", 4*p, 4*p+3))
		}
		s.text(x0-8, 74, 9.5, "end", false, cMid, "banks")
		for r := 0; r < 8; r++ {
			s.text(x0-8, 96+float64(r)*ch, 11, "end", false, cDark, fmt.Sprintf("row %d", r))
			for c := 0; c < 8; c++ {
				p := at(r, c)
				fill := cGrey
				if c == 0 {
					fill = cOrange
				}
				s.rect(x0+float64(p)*cw, 80+float64(r)*ch, cw, ch, fill, "#ffffff")
				col := cDark
				if c == 0 {
					col = "#ffffff"
				}
				s.text(x0+float64(p)*cw+cw/2, 96+float64(r)*ch, 11, "middle", c == 0, col, fmt.Sprintf("c%d", c))
			}
		}
		s.text(x0+4*cw, 296, 12, "middle", true, cDark, note1)
		s.text(x0+4*cw, 312, 11, "middle", false, cDark, note2)
	}
	panel(70, "row-major (rung 3)", "chunk 0 of rows 0-7: all in banks 0-3", "8 rows, one bank group: 8 passes", func(r, c int) int { return c })
	panel(520, "XOR-swizzled (rung 4, Swizzle<64>)", "chunk 0 of rows 0-7: banks 0-31", "8 rows, 8 bank groups: one pass", func(r, c int) int { return c ^ (r & 7) })
	s.text(450, 342, 11, "middle", false, cMid, "A row is 64 fp16 = 128 bytes = 8 chunks (c0-c7) of 16 bytes; the 32 banks are 4 bytes wide, so a row covers each bank once.")
	s.text(450, 358, 11, "middle", false, cMid, "Orange: the 8 chunks one ldmatrix 8x8 matrix reads (one per row). Swizzled, chunk c of row r is stored at position c ^ (r & 7).")
	return s.end()
}

// drawLanes is the m16n8k8 fragment layout of kernels/mma.cuh: which of a
// warp's 32 lanes (lane = 4g + t) holds which element of A, B and C.
func drawLanes() string {
	const cw, ch = 28.0, 19.0
	s := newSVG(900, 470, "The m16n8k8 tensor-core fragments: which lane holds which element")
	s.text(450, 24, 17, "middle", true, cDark, "mma.sync.m16n8k8: which lane (0-31) of the warp holds which element")
	grid := func(x0, y0 float64, rows int, title, sub string, lane func(r, c int) int, reg func(r, c int) (string, string)) {
		s.text(x0+4*cw, y0-30, 13, "middle", true, cDark, title)
		s.text(x0+4*cw, y0-14, 10.5, "middle", false, cMid, sub)
		for c := 0; c < 8; c++ {
			s.text(x0+float64(c)*cw+cw/2, y0-2, 9.5, "middle", false, cMid, fmt.Sprint(c))
		}
		for r := 0; r < rows; r++ {
			s.text(x0-6, y0+float64(r)*ch+13.5, 9.5, "end", false, cMid, fmt.Sprint(r))
			for c := 0; c < 8; c++ {
				fill, _ := reg(r, c)
				s.rect(x0+float64(c)*cw, y0+float64(r)*ch, cw, ch, fill, "#ffffff")
				s.text(x0+float64(c)*cw+cw/2, y0+float64(r)*ch+13.5, 10.5, "middle", false, cDark, fmt.Sprint(lane(r, c)))
			}
		}
		// Legend: the registers, in order of first appearance.
		seen := map[string]bool{}
		ly := y0 + float64(rows)*ch + 20
		for r := 0; r < rows; r++ {
			for c := 0; c < 8; c++ {
				fill, name := reg(r, c)
				if seen[name] {
					continue
				}
				seen[name] = true
				s.rect(x0, ly-10, 12, 12, fill, cMid)
				s.text(x0+18, ly, 10.5, "start", false, cDark, name)
				ly += 16
			}
		}
	}
	// A (16 x 8, row-major, rows x k): a0 = row g, cols 2t, 2t+1; a1 = row g+8.
	grid(50, 84, 16, "A: 16 x 8 fp16 (Q or P)", "rows x k; a lane holds 2 pairs",
		func(r, c int) int { return 4*(r%8) + c/2 },
		func(r, c int) (string, string) {
			if r < 8 {
				return cLBlue, "a0: row g, k 2t and 2t+1"
			}
			return cGreen, "a1: row g+8, same k"
		})
	// B (8 x 8, k x n, "col"): b0 = k 2t, 2t+1 of column g.
	grid(340, 84, 8, "B: 8 x 8 fp16 (K^T or V)", "k x n; a lane holds 1 pair",
		func(k, n int) int { return 4*n + k/2 },
		func(int, int) (string, string) { return cLOrng, "b0: k 2t and 2t+1 of column g" })
	// C (16 x 8 fp32): c0, c1 = row g, cols 2t, 2t+1; c2, c3 = row g+8.
	grid(630, 84, 16, "C += A B: 16 x 8 fp32 (S or O)", "rows x n; a lane holds 4 floats",
		func(r, c int) int { return 4*(r%8) + c/2 },
		func(r, c int) (string, string) {
			if r < 8 {
				return cLBlue, "c0, c1: row g, columns 2t, 2t+1"
			}
			return cGreen, "c2, c3: row g+8, same columns"
		})
	s.text(480, 300, 11.5, "middle", false, cDark, "lane = 4g + t:  g = lane >> 2,  t = lane & 3")
	s.text(480, 318, 11, "middle", false, cMid, "The same pattern, row g and columns 2t, 2t+1,")
	s.text(480, 334, 11, "middle", false, cMid, "is what ldmatrix leaves in each lane for an 8 x 8")
	s.text(480, 350, 11, "middle", false, cMid, "fp16 matrix: one ldmatrix.x4 fills a0, a1 of two")
	s.text(480, 366, 11, "middle", false, cMid, "k8 steps (rung 4); rung 3 gathers them with")
	s.text(480, 382, 11, "middle", false, cMid, "32-bit and 16-bit loads per lane.")
	return s.end()
}

// drawOverlap is a schematic timeline of one CTA's key blocks: rung 4 loads,
// waits and computes; rung 5 overlaps the next block's copy with this
// block's math, through registers on sm_75 and with cp.async on sm_80+.
func drawOverlap() string {
	s := newSVG(900, 330, "Overlapping the next block's copy with this block's math")
	s.text(450, 24, 17, "middle", true, cDark, "One CTA walking key blocks 0-3: copy (grey) and math (blue)")
	const x0, ld, mt, st = 250.0, 54.0, 96.0, 18.0
	label := func(y float64, a, b string) {
		s.text(x0-12, y+4, 12, "end", true, cDark, a)
		s.text(x0-12, y+20, 10.5, "end", false, cMid, b)
	}
	// Rung 4: load, barrier, compute, in turn.
	label(62, "rung 4", "load, wait, compute")
	x := x0
	for n := 0; n < 4; n++ {
		s.box(x, 56, ld, 26, cGrey, cMid, 10.5, fmt.Sprintf("load %d", n))
		x += ld
		s.box(x, 56, mt, 26, cLBlue, cBlue, 10.5, fmt.Sprintf("math %d", n))
		x += mt
	}
	end4 := x
	// Rung 5 on sm_75: the next block's global loads go to registers at the
	// start of the step; after the math, a barrier and the stores to shared
	// memory.
	label(130, "rung 5, sm_75 (T4)", "next block via registers")
	s.box(x0, 124, ld, 26, cGrey, cMid, 10.5, "load 0")
	x = x0 + ld
	for n := 0; n < 4; n++ {
		s.box(x, 124, mt, 26, cLBlue, cBlue, 10.5, fmt.Sprintf("math %d", n))
		if n < 3 {
			s.box(x, 154, mt*0.8, 18, cGrey, cMid, 9.5, fmt.Sprintf("loads of %d", n+1))
			s.box(x+mt, 124, st, 26, cLOrng, cOrange, 9.5, "st")
			x += st
		}
		x += mt
	}
	// Rung 5 on sm_80+: cp.async into the other buffer, one barrier a block.
	label(214, "rung 5, sm_80+", "cp.async, two buffers")
	s.box(x0, 208, ld, 26, cGrey, cMid, 10.5, "copy 0")
	x = x0 + ld
	for n := 0; n < 4; n++ {
		s.box(x, 208, mt, 26, cLBlue, cBlue, 10.5, fmt.Sprintf("math %d (buf %d)", n, n%2))
		if n < 3 {
			s.box(x, 238, mt*0.8, 18, cGrey, cMid, 9.5, fmt.Sprintf("cp.async %d", n+1))
		}
		x += mt
	}
	s.line(end4, 48, end4, 270, cMid, 1, true)
	s.text(end4-4, 284, 10.5, "end", false, cMid, "rung 4 ends here")
	s.text(450, 306, 11, "middle", false, cMid, "Schematic, not to scale. st: the registers stored to shared memory between two barriers (fwd.cuh's rk.store, rv.store).")
	s.text(450, 322, 11, "middle", false, cMid, "The copy is hidden only while the math of one block takes at least as long as the copy of the next.")
	return s.end()
}
