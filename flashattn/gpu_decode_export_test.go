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

// DecodeMergeFan is the splits per merge run (decode.cuh's kMergeFan).
const DecodeMergeFan = decodeMergeFan
