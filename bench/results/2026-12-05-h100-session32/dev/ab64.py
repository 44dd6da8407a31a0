"""Session 32 dev: decode_sidebyside.py's A/B (L2 flushed, interleaved, medians of 30, beside cuDNN) of
the shipped fatbin (A) against dev cubins of dec64.cu.txt (B, C, ...: other D64 tiles under the shipped
symbols; their D128 kernel is the shipped one, the control). Usage: python3 ab64.py CUBIN..."""
import sys

sys.path.insert(0, "kernels/dev")
from decode_sidebyside import Module, ab  # noqa: E402

m = Module("internal/kernels/fa2.fatbin")
others = []
for pth in sys.argv[1:]:
    others.append(Module(pth))
    others[-1].path = pth
ab(m, 80, others)
