package flashattn

type flashImpl struct{}

func (flashImpl) forward(d Dims, q, k, v *Tensor, scale float64, o *Options, out *Tensor, lse []float32) error {
	panic("todo")
}

func (flashImpl) backward(d Dims, q, k, v, out, dOut *Tensor, lse []float32, scale float64, o *Options, dq, dk, dv *Tensor) error {
	panic("todo")
}
