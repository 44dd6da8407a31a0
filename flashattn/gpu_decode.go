package flashattn

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/goflash/goflash/internal/cuda"
	"github.com/goflash/goflash/internal/kernels"
)

// The GPU decode path (kernels/decode.cuh): ForwardKVCache on the device.
// One decode kernel per call, split over the cache (flash-decoding) when
// B*Hkv alone would leave SMs idle; the last CTAs of each split group to
// finish merge the splits by their LSEs (kernels/decode.cuh), so a call is
// one launch.

// decodeSplits is the number of KV splits of a decode call with ctas CTAs
// per split (B*Hkv times the packed-row tiles) on a GPU of sms SMs that each
// hold perSM decode CTAs at once (two 96 KiB CTAs on an H100/H200 SM, one on
// an A100 or sm_86/89), whose CTA groups read at most span entries in blocks
// of bc keys. The rule follows sweeps of split counts on an H200 beside
// cuDNN (docs/kernels.md): one CTA per SM, one split once B*Hkv alone
// fills the wave. The kernel issues its first copies before its other setup,
// so a second CTA per SM does not pay on a contiguous cache (B 1, 32/8, D128
// on an H200: 16 splits take 78.3 / 135.8 us at 64k / 128k, 33 take
// 80.5 / 140.0; B 4 the same from 32k); on a paged cache, whose copies wait
// on a block-table load per 16 rows that the second CTA hides, it pays once
// each split streams pagedTwoPerSMBlocks blocks (33 splits from 16k). A
// split streams at least two blocks (the next in flight while it computes
// one), or one of 128 keys or more (D <= 64, at 1k-2k entries on an H200: 8
// and 16 splits of one block take 10.5 and 11.4 us, 4 and 8 of two 11.2 and
// 11.8); at most maxDecodeSplits. The last CTAs of a group share its merge
// (decodeMergeCTAs), so many splits cost no second merge level: MQA (8/1)
// at 4k / 8k on an H200 takes 11.7 / 13.0 us at 32 / 64 splits, 14.9 / 16.4
// at 16.
func decodeSplits(ctas, sms, perSM, span, bc int, paged bool) int {
	if forcedSplits > 0 {
		return forcedSplits
	}
	const pagedTwoPerSMBlocks = 6
	minSplitBlocks := 2
	if bc >= 128 {
		minSplitBlocks = 1
	}
	blocks := ceilDiv(span, bc)
	s := sms / ctas
	if s2 := perSM * sms / ctas; paged && perSM > 1 && s2 > max(s, 1) && blocks >= pagedTwoPerSMBlocks*s2 {
		s = s2
	}
	return max(1, min(s, blocks/minSplitBlocks, maxDecodeSplits))
}

// maxDecodeSplits bounds the splits (and so the split workspace): far past
// the SMs of any GPU the rule fills.
const maxDecodeSplits = 256

// decodeMergeLoads is decode.cuh's kMergeLoads: the splits whose partial
// rows one merging thread loads at once.
const decodeMergeLoads = 8

// decodeMergeCTAs is how many of a group's split CTAs (the last to finish)
// share its merge (kernels/decode.cuh): enough that each merging thread loads
// at most decodeMergeLoads splits, one batch of L2 round trips (~1.3 us each
// on an H200, whatever the batch's size), for the group's rows x
// d/8 items over threads-thread CTAs; at most one per item and split; and
// summed over the groups at most sms/4 CTAs waiting for their group's last
// (the waiting CTAs must never hold the slots the others need). MQA (8/1,
// B 1) at 32k / 128k on an H200: 132 splits shared by 17 CTAs take
// 18.0 / 33.7 us, a two-level merge tree 20.4 / 40.3.
func decodeMergeCTAs(groups, splits, rows, d, threads, sms int) int {
	if forcedMergeCTAs > 0 {
		return forcedMergeCTAs
	}
	if splits <= 1 {
		return 1
	}
	items := rows * d / 8
	return max(1, min(ceilDiv(items*splits, threads*decodeMergeLoads), splits, items, 1+sms/(4*groups)))
}

// decodePerSM is how many decode CTAs of smem bytes of shared memory one SM
// of smemPerSM bytes holds at once (the kernels' kMinBlocks, 2, at most):
// the second CTA of a split wave runs beside the first only where it fits.
func decodePerSM(smemPerSM, smem int) int {
	return max(1, min(2, smemPerSM/max(smem, 1)))
}

// decodeSpan is the most cache entries one CTA group reads: the longest
// sequence, or with a sliding window of Left its Left+Nq last entries (the
// kernel reads only the key blocks its rows see; Right reaches no further
// than the last entry).
func decodeSpan(p problem) int {
	if p.Left >= 0 {
		return min(p.Nk, p.Left+p.Nq)
	}
	return p.Nk
}

// forcedSplits, when positive, replaces decodeSplits' choice (tests: both
// the split and unsplit code paths on small shapes).
var forcedSplits int

// decodeRepeats, when above 1, makes a decode call run its kernel that many
// times, poisoning O and the LSE before each run but the first (tests: the
// split counters must be back at zero for the next launch).
var decodeRepeats int

// forcedMergeCTAs, when positive, replaces decodeMergeCTAs' choice (tests:
// merges shared by several CTAs on small shapes; the kernel caps it at the
// splits and the items).
var forcedMergeCTAs int

// decodeWorkspace is the length of the split workspace of a decode call
// whose grid has groups CTA groups (B*Hkv times the row tiles): the partial
// O (splits, B*Hq*Nq, D) and LSE (splits, B*Hq*Nq), float32, and two int32
// counters per group; none for one split.
func decodeWorkspace(d Dims, splits, groups int) (oPart, lsePart, counters int) {
	if splits <= 1 {
		return 0, 0, 0
	}
	return splits * d.LSELen() * d.D, splits * d.LSELen(), 2 * groups
}

// decodeRowTiles is the number of packed-row tiles (grid z) of a decode
// call: Nq*Hq/Hkv query rows read each kv head, br of them per CTA.
func decodeRowTiles(d Dims, br int) int { return ceilDiv(d.Nq*d.Groups(), br) }

// decodeOp is one decode call: its kernels, the uploaded sequence lengths
// and block table, the split workspace and the parameter block.
type decodeOp struct {
	d          *Device
	dec        *loadedKernel
	splits     int
	scratch    []*cuda.Buffer // seqlens, block table, workspace: freed after the call
	params     *kernels.DecodeParams
	args       *cuda.Args
	cfg        cuda.LaunchConfig
	res        *DeviceResult
	paged      bool
	cacheBytes int64 // K and V bytes the kernel reads: sum over batches of min(SeqLens[b], decodeSpan)*Hkv*D*2 elements
}

// newDecode plans the call, loads its kernel, allocates the outputs
// (poisoned) and the workspace, uploads the cache description and fills
// the parameter block; d.mu is held and q, k, v are checked
// (resolveKVShapes, one dtype).
func (d *Device) newDecode(p problem, c KVCache, q, k, v *DeviceTensor) (op *decodeOp, err error) {
	pl, loaded, err := d.plan(planRequest{op: opDecode, p: p, dt: q.dtype, paged: c.BlockTable != nil})
	if err != nil {
		return nil, err
	}
	dec := loaded[0]
	op = &decodeOp{d: d, dec: dec, splits: pl.splits, params: new(kernels.DecodeParams), paged: c.BlockTable != nil, cfg: pl.cfgs[0]}
	defer func() {
		if err != nil {
			err = errors.Join(err, op.free())
		}
	}()
	op.args = cuda.NewArgs(unsafe.Pointer(op.params))
	alloc := func(what string, bytes int) (*cuda.Buffer, error) {
		b, err := d.ctx.Alloc(bytes)
		if err != nil {
			return nil, fmt.Errorf("flashattn: allocating the decode %s on %s: %w", what, d.info, err)
		}
		op.scratch = append(op.scratch, b)
		return b, nil
	}

	lens := make([]int32, p.B)
	op.params.UniformLen = int32(c.SeqLens[0])
	for b, n := range c.SeqLens {
		lens[b] = int32(n)
		op.cacheBytes += int64(min(n, decodeSpan(p))) * int64(2*p.Hkv*p.D*q.dtype.Size())
		if n != c.SeqLens[0] {
			op.params.UniformLen = -1
		}
	}
	seqlens, err := alloc("sequence lengths", 4*len(lens))
	if err != nil {
		return op, err
	}
	if err := cuda.CopyToDevice(seqlens, lens); err != nil {
		return op, err
	}
	pm := op.params
	pm.SeqLens = seqlens.Ptr()
	if op.paged {
		stride := 1
		for _, row := range c.BlockTable {
			stride = max(stride, len(row))
		}
		flat := make([]int32, p.B*stride)
		for b, row := range c.BlockTable {
			for i, blk := range row {
				flat[b*stride+i] = int32(blk)
			}
		}
		table, err := alloc("block table", 4*len(flat))
		if err != nil {
			return op, err
		}
		if err := cuda.CopyToDevice(table, flat); err != nil {
			return op, err
		}
		pm.BlockTable, pm.TableStride, pm.PageSize = table.Ptr(), int32(stride), int32(c.BlockSize)
	}
	if o, l, n := pl.oPart, pl.lsePart, pl.counters; o > 0 {
		oPart, err := alloc("partial O", 4*o)
		if err != nil {
			return op, err
		}
		lPart, err := alloc("partial LSE", 4*l)
		if err != nil {
			return op, err
		}
		count, err := alloc("split counters", 4*n)
		if err != nil {
			return op, err
		}
		// Poisoned like the outputs: a partial row a split fails to write
		// reaches O as NaN. The counters start at zero; the kernel leaves
		// them at zero (relaunch reuses them).
		if err := errors.Join(oPart.Memset32(nanF32, o), lPart.Memset32(nanF32, l), count.Memset32(0, n)); err != nil {
			return op, err
		}
		pm.OPart, pm.LSEPart, pm.SplitCount = oPart.Ptr(), lPart.Ptr(), count.Ptr()
	}

	bufs, err := d.allocCall(p, q.dtype, "the LSE", p.QShape())
	if err != nil {
		return op, err
	}
	op.res = &DeviceResult{Dims: p.Dims, Out: bufs.outs[0], Kernel: dec.info, lse: bufs.rows, lastNoKey: -1}
	if bufs.slopes != nil {
		op.scratch = append(op.scratch, bufs.slopes)
		pm.ALiBi = bufs.slopes.Ptr()
	}

	f := fieldsOf(p)
	ks := k.shape.ContiguousStrides() // the cache's own: (B or blocks, Ncache or BlockSize, Hkv, D)
	kvs := [3]int64{int64(ks[0]), int64(ks[1]), int64(ks[2])}
	pm.Q, pm.K, pm.V, pm.O, pm.LSE = q.buf.Ptr(), k.buf.Ptr(), v.buf.Ptr(), bufs.outs[0].buf.Ptr(), bufs.rows.Ptr()
	set3(f.qs, &pm.QBatchStride, &pm.QRowStride, &pm.QHeadStride)
	set3(kvs, &pm.KBatchStride, &pm.KRowStride, &pm.KHeadStride)
	set3(kvs, &pm.VBatchStride, &pm.VRowStride, &pm.VHeadStride)
	set3(f.qs, &pm.OBatchStride, &pm.ORowStride, &pm.OHeadStride)
	pm.B, pm.Nq, pm.Hq, pm.Hkv, pm.D = int32(p.B), int32(p.Nq), int32(p.Hq), int32(p.Hkv), int32(p.D)
	pm.Splits, pm.Scale, pm.ScaleLog2 = int32(op.splits), f.scale, f.scaleLog2
	pm.MergeCTAs = int32(pl.mergeCTAs)
	pm.WindowLeft, pm.WindowRight, pm.Softcap = f.window[0], f.window[1], f.softcap
	return op, nil
}

// poison fills O and the LSE with NaN, so that a row the kernel leaves
// unwritten shows.
func (op *decodeOp) poison() error {
	out := op.res.Out
	return errors.Join(out.buf.Memset32(poisonOf(out.dtype), out.buf.Size()/4), op.res.lse.Memset32(nanF32, op.res.Dims.LSELen()))
}

func (op *decodeOp) kernels() []KernelInfo { return []KernelInfo{op.dec.info} }

// enqueue launches the decode kernel on the device's stream.
func (op *decodeOp) enqueue() error { return op.dec.fn.Launch(op.cfg, op.d.stream, op.args) }

func (op *decodeOp) relaunch() error {
	return op.dec.fn.LaunchBound(op.cfg, op.d.stream.Handle(), op.args)
}

// freeScratch frees what the call needs only while it runs.
func (op *decodeOp) freeScratch() error {
	var err error
	for _, b := range op.scratch {
		err = errors.Join(err, b.Free())
	}
	op.scratch = nil
	return err
}

func (op *decodeOp) free() error {
	err := op.freeScratch()
	if op.res != nil {
		err = errors.Join(err, op.res.Free())
	}
	return err
}

// ForwardKVCache is flashattn.ForwardKVCache on device tensors, for
// repeated decode steps whose cache stays on the GPU: q (B, Nq, Hq, D)
// against kCache and vCache, contiguous (B, Ncache, Hkv, D) or paged
// (blocks, BlockSize, Hkv, D) as c describes, all fp16 or all bf16 (the
// sm_80 path). The options used are Causal, Window (both bottom-right per
// sequence: a window reads only its entries), Softcap, ALiBi and Scale. The call
// uploads SeqLens (and the block table), runs the decode kernel, waits, and returns O and the LSE; the split
// workspace (decodeWorkspace) lives only during the call.
func (d *Device) ForwardKVCache(q, kCache, vCache *DeviceTensor, c KVCache, o *Options) (*DeviceResult, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	ts := []*DeviceTensor{q, kCache, vCache}
	for i, name := range []string{"q", "kCache", "vCache"} {
		if err := ts[i].usable(name, d); err != nil {
			return nil, err
		}
		if ts[i].dtype != q.dtype {
			return nil, &DataError{Arg: name, Reason: fmt.Sprintf("is %v, q is %v: mixed dtypes are not converted", ts[i].dtype, q.dtype)}
		}
	}
	p, err := resolveKVShapes(q.shape, kCache.shape, vCache.shape, c, o)
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	r, _, err := d.decode(p, c, q, kCache, vCache)
	return r, err
}

// decode runs one decode call and waits for it; d.mu is held.
func (d *Device) decode(p problem, c KVCache, q, k, v *DeviceTensor) (*DeviceResult, []KernelInfo, error) {
	op, err := d.newDecode(p, c, q, k, v)
	if err != nil {
		return nil, nil, err
	}
	for i := range max(decodeRepeats, 1) {
		if i > 0 {
			if err := op.poison(); err != nil {
				return nil, nil, errors.Join(err, op.free())
			}
		}
		if err := d.run(op); err != nil {
			return nil, nil, errors.Join(err, op.free())
		}
	}
	if err := op.freeScratch(); err != nil {
		return nil, nil, errors.Join(err, op.res.Free())
	}
	return op.res, op.kernels(), nil
}

// decodeHostBytes is what the GPU decode path allocates on the host beyond
// its outputs: fp16 copies of q and both whole caches up, O down, and the
// int32 lengths and block table.
func decodeHostBytes(k kvCall) float64 {
	q := float64(k.p.QShape().Numel())
	cache := float64(k.kCache.Shape.Numel())
	ints := len(k.c.SeqLens)
	for _, row := range k.c.BlockTable {
		ints += len(row)
	}
	return 2*(2*q+2*cache) + 4*float64(ints)
}

// ForwardKVCacheAppend is ForwardKVCache with in-place append on the device,
// as flashattn.ForwardKVCacheAppend: kNew and vNew (B, Nnew, Hkv, D), of q's
// dtype, are copied into kCache and vCache at entries [SeqLens[b],
// SeqLens[b]+Nnew) of each sequence (through the block table when paged), on
// the device's stream ahead of the decode kernels (one device-to-device copy
// per sequence and tensor, one per page a sequence's new entries touch), then
// q attends over SeqLens[b]+Nnew entries. c.SeqLens are the lengths before
// the call; the caller adds Nnew. Checks (a *CacheFullError, a
// *ReadOnlyCacheError among them) come before any write.
func (d *Device) ForwardKVCacheAppend(q, kNew, vNew, kCache, vCache *DeviceTensor, c KVCache, o *Options) (*DeviceResult, error) {
	if d == nil {
		return nil, ErrDeviceClosed
	}
	ts := []*DeviceTensor{q, kNew, vNew, kCache, vCache}
	for i, name := range []string{"q", "kNew", "vNew", "kCache", "vCache"} {
		if err := ts[i].usable(name, d); err != nil {
			return nil, err
		}
		if ts[i].dtype != q.dtype {
			return nil, &DataError{Arg: name, Reason: fmt.Sprintf("is %v, q is %v: mixed dtypes are not converted", ts[i].dtype, q.dtype)}
		}
	}
	if _, err := resolveKVShapes(q.shape, kCache.shape, vCache.shape, c, o); err != nil {
		return nil, err
	}
	after, err := checkAppend(q.shape, kNew.shape, vNew.shape, kCache.shape, c, kCache.buf == vCache.buf)
	if err != nil {
		return nil, err
	}
	for i, n := range []*DeviceTensor{kNew, vNew} {
		if n.buf == kCache.buf || n.buf == vCache.buf { // the copies would read what they write
			return nil, &ReadOnlyCacheError{Reason: fmt.Sprintf("%s is a cache's own buffer: pass the new entries in a tensor of their own", []string{"kNew", "vNew"}[i])}
		}
	}
	p, err := resolveKVShapes(q.shape, kCache.shape, vCache.shape, after, o)
	if err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if _, _, err := d.plan(planRequest{op: opDecode, p: p, dt: q.dtype, paged: c.BlockTable != nil}); err != nil { // refused before the cache is written
		return nil, err
	}
	es := q.dtype.Size()
	cs, ns := kCache.shape.ContiguousStrides(), kNew.shape.ContiguousStrides()
	err = appendRuns(c, kNew.shape.N, func(b, i, blk, row, rows int) error {
		dst, src, n := es*(blk*cs[0]+row*cs[1]), es*(b*ns[0]+i*ns[1]), es*rows*ns[1]
		if err := cuda.CopyOnStream(kCache.buf, dst, kNew.buf, src, n, d.stream); err != nil {
			return err
		}
		return cuda.CopyOnStream(vCache.buf, dst, vNew.buf, src, n, d.stream)
	})
	if err != nil {
		return nil, fmt.Errorf("flashattn: appending to the KV cache on %s: %w", d.info, err)
	}
	r, _, err := d.decode(p, after, q, kCache, vCache)
	return r, err
}
