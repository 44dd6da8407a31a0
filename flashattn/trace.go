package flashattn

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"
)

// StepKind classifies one (Q block, K block) step of the tiled forward pass.
type StepKind int

const (
	// StepComputed: the whole Bc x Br tile is visible and computed unmasked.
	StepComputed StepKind = iota
	// StepMasked: the tile straddles the causal diagonal (some of its
	// elements are visible, some not) and is computed with an element mask.
	StepMasked
	// StepSkipped: the tile lies wholly above the causal diagonal and is
	// never loaded.
	StepSkipped
)

func (k StepKind) String() string {
	switch k {
	case StepComputed:
		return "computed"
	case StepMasked:
		return "masked"
	case StepSkipped:
		return "skipped"
	}
	return "unknown"
}

// TraceStep is one (Q block i, K block j) step for the traced (batch, head).
// Order is the position of the step in the work of its Q block (0, 1, ...;
// -1 for a skipped step): FA2 runs Q blocks in parallel and, inside one, K
// blocks in order. Steps are sorted by (QBlock, KBlock), Tr*Tc of them.
type TraceStep struct {
	QBlock, KBlock int
	Kind           StepKind
	Order          int
}

// RowStep is the online-softmax state of the traced row after one K block
// that was not skipped: the running max m, the running sum l (relative to m;
// L is l, capitalised to be exported, not the log-sum-exp L), and the factor
// exp(m_old - m_new) by which the accumulator was rescaled.
// Until the row has seen a key, M is -Inf, L is 0 and Rescale is 1.
type RowStep struct {
	KBlock  int
	M, L    float64
	Rescale float64
}

// Trace records what the CPUFlash forward pass did for one (batch, head):
// every step of the Tr x Tc grid, and the running softmax state of one row.
// Set Batch, Head and Row, pass it in Options.Trace, and read the rest after
// Forward returns. Scores are in the scaled domain (m is a max of scale*q.k).
// A Trace serves one call at a time: a call given a Trace that another
// call is filling returns an *OptionError (steps of two calls would mix).
type Trace struct {
	Batch, Head, Row int // what to trace (query head index)

	Br, Bc, Tr, Tc int // tile sizes and grid, filled by Forward
	Steps          []TraceStep
	RowSteps       []RowStep
	// Final M and L of the traced row: LSE = M + log(L).
	M, L float64

	mu   sync.Mutex
	busy bool // a call is filling it
}

// start takes the trace for one call and prepares it for a tr x tc grid,
// with room for every step (traceBytes counts it); it fails while another
// call has it. The call gives it back with done.
func (t *Trace) start(br, bc, tr, tc int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy {
		return &OptionError{Option: "Trace", Value: fmt.Sprintf("batch %d head %d row %d", t.Batch, t.Head, t.Row),
			Reason: "another call is filling this Trace: give each concurrent call its own"}
	}
	t.busy = true
	t.Br, t.Bc, t.Tr, t.Tc = br, bc, tr, tc
	t.Steps, t.RowSteps = make([]TraceStep, 0, tr*tc), make([]RowStep, 0, tc)
	t.M, t.L = 0, 0
	return nil
}

// done gives the trace back (start).
func (t *Trace) done() {
	t.mu.Lock()
	t.busy = false
	t.mu.Unlock()
}

// traceBytes is the memory of the steps of a tr x tc grid's trace.
func traceBytes(tr, tc int) float64 {
	return float64(tr)*float64(tc)*float64(unsafe.Sizeof(TraceStep{})) + float64(tc)*float64(unsafe.Sizeof(RowStep{}))
}

func (t *Trace) step(s TraceStep) {
	t.mu.Lock()
	t.Steps = append(t.Steps, s)
	t.mu.Unlock()
}

func (t *Trace) row(r RowStep) {
	t.mu.Lock()
	t.RowSteps = append(t.RowSteps, r)
	t.mu.Unlock()
}

// final records the traced row's final state.
func (t *Trace) final(m, l float64) {
	t.mu.Lock()
	t.M, t.L = m, l
	t.mu.Unlock()
}

// sortSteps orders the steps by (QBlock, KBlock). Q blocks run in parallel,
// so steps arrive in any order; call it once every block is done.
func (t *Trace) sortSteps() {
	t.mu.Lock()
	sort.Slice(t.Steps, func(a, b int) bool {
		sa, sb := t.Steps[a], t.Steps[b]
		return sa.QBlock < sb.QBlock || sa.QBlock == sb.QBlock && sa.KBlock < sb.KBlock
	})
	t.mu.Unlock()
}

// Kind returns the kind of step (i, j), or false if it was not recorded
// (always for a nil *Trace).
func (t *Trace) Kind(i, j int) (StepKind, bool) {
	if t == nil {
		return 0, false
	}
	for _, s := range t.Steps {
		if s.QBlock == i && s.KBlock == j {
			return s.Kind, true
		}
	}
	return 0, false
}
