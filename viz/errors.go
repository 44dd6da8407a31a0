package viz

import "fmt"

// InputError reports data a chart function cannot draw: ragged matrices,
// NaN values, an empty trace, labels that do not match the data.
type InputError struct {
	Func   string // the viz function
	Arg    string // the argument at fault
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("viz.%s: %s %s", e.Func, e.Arg, e.Reason)
}
