package main

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goflash/goflash/flashattn"
)

// The demo's sentence: a fixed 12-token embedding table shipped in the
// binary (no download), projected to queries, keys and values by fixed,
// hand-made weights, so that each of the two heads does one readable thing.
//
//   - head 0 ("who?"): pronouns, verbs and adjectives look for animate
//     nouns, so "it", "was", "tired" and "slept" attend to "cat";
//   - head 1 ("previous token"): every token attends to the one before it,
//     through sinusoidal position codes and a rotation in Wq.

//go:embed sentence.tsv
var sentenceTSV string

const (
	sentFeatures = 8 // hand-made features per token (sentence.tsv)
	sentFreqs    = 4 // sinusoidal position frequencies, 2 dims each
	sentEmbed    = sentFeatures + 2*sentFreqs
	sentHeads    = 2  // query heads = key/value heads
	sentHeadDim  = 32 // a head dim every GPU kernel path has
	sentWidth    = sentHeads * sentHeadDim
)

// sentFreq is position frequency f: pi/2, pi/4, pi/8, pi/16, so neighbours
// differ clearly while 12 positions stay distinct.
func sentFreq(f int) float64 { return math.Pi / float64(int(2)<<f) }

// sentence holds the tokens and their q, k, v as (1, N, 2, 32) tensors.
type sentence struct {
	Tokens  []string
	Embed   [][]float64 // N x sentEmbed
	Q, K, V *flashattn.Tensor
}

// loadSentence parses the embedded table and applies the projections.
func loadSentence() (*sentence, error) {
	s := &sentence{}
	for n, line := range strings.Split(sentenceTSV, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "token\t") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 1+sentFeatures {
			return nil, fmt.Errorf("sentence.tsv line %d: %d fields, want %d", n+1, len(f), 1+sentFeatures)
		}
		e := make([]float64, sentEmbed)
		for x := 0; x < sentFeatures; x++ {
			v, err := strconv.ParseFloat(f[1+x], 64)
			if err != nil {
				return nil, fmt.Errorf("sentence.tsv line %d: %w", n+1, err)
			}
			e[x] = v
		}
		pos := float64(len(s.Tokens))
		for fr := 0; fr < sentFreqs; fr++ {
			e[sentFeatures+2*fr] = math.Sin(sentFreq(fr) * pos)
			e[sentFeatures+2*fr+1] = math.Cos(sentFreq(fr) * pos)
		}
		s.Tokens = append(s.Tokens, f[0])
		s.Embed = append(s.Embed, e)
	}
	if len(s.Tokens) == 0 {
		return nil, fmt.Errorf("sentence.tsv has no tokens")
	}
	wq, wk, wv := sentenceWeights()
	shape := flashattn.Shape{B: 1, N: len(s.Tokens), H: sentHeads, D: sentHeadDim}
	s.Q, s.K, s.V = project(s.Embed, wq, shape), project(s.Embed, wk, shape), project(s.Embed, wv, shape)
	return s, nil
}

// sentenceWeights returns Wq, Wk, Wv (sentEmbed x sentWidth); column
// h*sentHeadDim + x is dim x of head h.
func sentenceWeights() (wq, wk, wv [][]float64) {
	mat := func() [][]float64 {
		m := make([][]float64, sentEmbed)
		for i := range m {
			m[i] = make([]float64, sentWidth)
		}
		return m
	}
	wq, wk, wv = mat(), mat(), mat()
	const (
		noun, animate, pronoun, verb, adj = 0, 1, 2, 3, 6
	)
	// Head 0, dim 0: a query that asks "who?" meets a key that says
	// "animate noun"; score 4*4/sqrt(32) = 2.8 against 0 for other keys.
	wq[pronoun][0], wq[verb][0], wq[adj][0] = 4, 3, 3
	wk[animate][0], wk[noun][0] = 4, 1
	// Head 0, dims 1-8: a weak pull towards tokens of the same kind.
	for f := 0; f < sentFeatures; f++ {
		wq[f][1+f], wk[f][1+f] = 1, 1
	}
	// Head 1: the key is the position code of token j; the query is the
	// code of token i rotated back by one position, so q_i . k_j =
	// 9 * sum_f cos(w_f (i-1-j)), largest at j = i-1.
	h1 := sentHeadDim
	for f := 0; f < sentFreqs; f++ {
		sn, cs := sentFeatures+2*f, sentFeatures+2*f+1
		c, s := math.Cos(sentFreq(f)), math.Sin(sentFreq(f))
		// sin(w(i-1)) = sin(wi) cos w - cos(wi) sin w; cos(w(i-1)) = cos(wi) cos w + sin(wi) sin w.
		wq[sn][h1+2*f], wq[cs][h1+2*f] = 3*c, -3*s
		wq[sn][h1+2*f+1], wq[cs][h1+2*f+1] = 3*s, 3*c
		wk[sn][h1+2*f], wk[cs][h1+2*f+1] = 3, 3
	}
	// Values: both heads carry the whole embedding in their first dims.
	for h := 0; h < sentHeads; h++ {
		for x := 0; x < sentEmbed; x++ {
			wv[x][h*sentHeadDim+x] = 1
		}
	}
	return wq, wk, wv
}

// project computes E W as a (1, N, H, D) tensor.
func project(e, w [][]float64, s flashattn.Shape) *flashattn.Tensor {
	t := flashattn.New(s)
	for n, row := range e {
		for c := 0; c < s.H*s.D; c++ {
			var acc float64
			for x, ex := range row {
				acc += ex * w[x][c]
			}
			t.Set(0, n, c/s.D, c%s.D, float32(acc))
		}
	}
	return t
}
