package flashattn

// ForceDecodeSplits makes every decode call use n KV splits (0: the
// automatic choice) and returns the previous setting. Test builds only.
func ForceDecodeSplits(n int) (previous int) {
	previous, forcedSplits = forcedSplits, n
	return previous
}

// DecodeSplits is decodeSplits' automatic choice.
func DecodeSplits(ctas, sms, perSM, span, bc int, paged bool) int {
	defer ForceDecodeSplits(ForceDecodeSplits(0))
	return decodeSplits(ctas, sms, perSM, span, bc, paged)
}

// ForceDecodeRepeats makes every decode call run its kernel n times (O and
// the LSE poisoned before each run but the first) and returns the previous
// setting. Test builds only.
func ForceDecodeRepeats(n int) (previous int) {
	previous, decodeRepeats = decodeRepeats, n
	return previous
}

// MaxDecodeSplits is decodeSplits' cap.
const MaxDecodeSplits = maxDecodeSplits

// DecodeMergeLoads is the splits one merging thread loads at once
// (decode.cuh's kMergeLoads).
const DecodeMergeLoads = decodeMergeLoads

// DecodeMergeCTAs is decodeMergeCTAs' automatic choice.
func DecodeMergeCTAs(groups, splits, rows, d, threads, sms int) int {
	defer ForceDecodeMergeCTAs(ForceDecodeMergeCTAs(0))
	return decodeMergeCTAs(groups, splits, rows, d, threads, sms)
}

// ForceDecodeMergeCTAs makes every split decode call share its merge among
// n CTAs per group (0: the automatic choice) and returns the previous
// setting. Test builds only.
func ForceDecodeMergeCTAs(n int) (previous int) {
	previous, forcedMergeCTAs = forcedMergeCTAs, n
	return previous
}
