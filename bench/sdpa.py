#!/usr/bin/env python3
"""Time PyTorch's scaled_dot_product_attention on the shapes GoFlash benchmarks.

This is the PyTorch side of `goflash bench --compare-torch`: the Go command
writes a JSON spec on stdin and reads one JSON document from stdout. It can
also be run by hand:

    python3 bench/sdpa.py spec.json        # spec from a file
    echo '{...}' | python3 bench/sdpa.py -  # spec from stdin
    python3 bench/sdpa.py --paper          # the FA2 paper's shapes, forward
    python3 bench/sdpa.py --emulate-sm75 spec.json   # answer as on a T4 (below)

Spec (every field optional except shapes):
    {"reps": 20, "warmup": 5, "device": 0, "seed": 0, "emulate": "", "dtype": "fp16",  # or "bf16"
     "backends": ["flash", "cudnn", "efficient", "math"],
     "directions": ["fwd"],                 # any of fwd, bwd, fwdbwd, decode
     "shapes": [{"b": 8, "hq": 16, "hkv": 16, "nq": 2048, "nk": 2048,
                 "d": 128, "causal": false}]}

Method, chosen to match GoFlash's own benchmark:
  * fp16 tensors ("dtype": "bf16": bf16) allocated in BSHD layout (GoFlash's
    layout) and handed to SDPA as (B, H, N, D) views, so both sides read the
    same memory layout;
  * each backend forced with torch.nn.attention.sdpa_kernel (cudnn is
    SDPBackend.CUDNN_ATTENTION, cuDNN's fused attention; a PyTorch without
    that member reports it "unsupported");
  * median of `reps` CUDA-event-timed calls after `warmup` untimed calls,
    each call enqueued behind a GPU sleep of HOST_HIDE_MS (torch.cuda._sleep)
    so that its start event runs only after the host has enqueued the call's
    kernels: the time is the GPU's, as GoFlash's (whose host enqueue is a few
    µs), without the autograd host work (0.1-0.3 ms before the first backward
    kernel on an H200) that a training step hides behind earlier kernels;
  * FLOPs by the FA2 paper's convention: forward 4*B*Hq*Nq*Nk*D, halved when
    causal; backward 2.5x and forward+backward 3.5x the forward count;
  * causal is aligned bottom-right (FA2 >= 2.1 and GoFlash); when Nq == Nk
    this is plain is_causal=True;
  * GQA (hq > hkv) uses enable_gqa=True; a backend that rejects it gets k/v
    expanded to hq heads before timing ("gqa": "expanded" in the result);
  * "decode" is the forward call on a decode shape (nq new rows per sequence
    against a cache of nk entries, `goflash bench --decode`): timed as fwd,
    except that with nq == 1 causal is no mask at all (the one row is the
    cache's last position and sees every entry), so SDPA runs it unmasked
    rather than with a lower-right mask that its flash backend refuses;
  * device memory of one call: "alloc_bytes" is torch.cuda.max_memory_allocated()
    during the call minus memory_allocated() before it (outputs included);
    "extra_bytes" is that minus the outputs (O for fwd; dQ, dK, dV for bwd;
    both for fwdbwd), the same definition as GoFlash's BenchResult.ExtraBytes:
    what a call needs beyond its inputs and outputs (LSE, workspace, scores);
  * math is skipped when its N^2 score matrices would not fit in free memory,
    and any backend that runs out of memory is reported, not fatal.

T4 rehearsal: "emulate": "sm75" in the spec (or --emulate-sm75) answers as
PyTorch 2.x does on a Turing GPU such as a T4, on whatever GPU this is: the
flash backend is reported "unsupported" with PyTorch's own words (its sm_75
check refuses it), cudnn "unsupported" too (its check wants sm_80 or newer;
that reason is this script's wording, not PyTorch's), and efficient and math
run and are timed for real, on this GPU. The output says "emulate": "sm75"; its timings are not a T4's.

A backend PyTorch refuses is "unsupported", with the error and the warning
that says why (e.g. the GPU architecture), as PyTorch printed them.

Output: one JSON object on stdout (progress goes to stderr). When nothing can
be timed it prints {"error": "...", "outcome": "skipped"} (torch or CUDA
missing) or "outcome": "error" (a bad spec) and exits with status 2.
"""

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

SCHEMA = "goflash-sdpa/1"
BACKENDS = ("flash", "cudnn", "efficient", "math")
# torch.nn.attention.SDPBackend member of each backend.
SDPA_ENUM = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "math": "MATH"}
DIRECTIONS = ("fwd", "bwd", "fwdbwd", "decode")
# Bytes per element of the B*Hq*Nq*Nk score matrix that the math backend
# keeps alive, estimated from the H200 anchors (37.5 GB at B=2, H=32,
# N=8192: about 8.7 bytes per score in the forward pass) with a margin.
MATH_BYTES_PER_SCORE = {"fwd": 10, "bwd": 20, "fwdbwd": 20, "decode": 10}
EMULATIONS = ("sm75",)
# The spec's "dtype" values (bench.DTypes), the name of each one's torch dtype.
DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
# GPU sleep before each timed call (ms at the GPU's rated clock): several times
# the host's longest enqueue (autograd's backward, about 0.3 ms on the H200).
HOST_HIDE_MS = 2.0
# What a forced flash call raises on sm_75 in PyTorch 2.x (any refused
# backend raises it), and the warning its architecture check prints
# (sdp_utils.cpp; the upper end of the range grows with releases).
SM75_REFUSED_ERROR = "No available kernel. Aborting execution."
SM75_FLASH_WARNING = ("Flash attention only supports gpu architectures in the range [sm80, sm121]. "
                      "Attempting to run on a sm 7.5 gpu.")
# What the emulation says for cudnn (its architecture check also starts at
# sm_80): sdpa.py's own words, as no T4 run has recorded PyTorch's.
SM75_REFUSALS = {"flash": SM75_FLASH_WARNING,
                 "cudnn": "cuDNN attention needs sm80 or newer (emulated sm 7.5 gpu)"}


# Where the one JSON document goes: stdout, kept for it alone by claim_stdout.
RESULT = None


def claim_stdout():
    """Keep stdout for the JSON document: the Go side parses all of it, so a
    library's print or warning there would lose every row; whatever else
    writes to fd 1 (Python or native code) goes to stderr."""
    global RESULT
    sys.stdout.flush()
    RESULT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def emit(doc, indent=None):
    out = RESULT or sys.stdout
    out.write(json.dumps(doc, indent=indent) + "\n")
    out.flush()


def fail(msg, outcome="skipped", emulate=""):
    emit({"schema": SCHEMA, "error": msg, "outcome": outcome, "emulate": emulate})
    sys.exit(2)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def paper_shapes():
    """FA2 paper: 16k tokens per batch, hidden 2048, D 64 and 128."""
    out = []
    for d in (64, 128):
        for causal in (False, True):
            for n in (512, 1024, 2048, 4096, 8192, 16384):
                h = 2048 // d
                out.append({"b": 16384 // n, "hq": h, "hkv": h, "nq": n, "nk": n, "d": d, "causal": causal})
    return out


def read_spec(argv):
    emulate = ""
    if "--emulate-sm75" in argv:
        argv = [a for a in argv if a != "--emulate-sm75"]
        emulate = "sm75"
    spec = read_spec_file(argv)
    if emulate and isinstance(spec, dict):
        spec["emulate"] = emulate
    return spec


def read_spec_file(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(argv) > 1 and argv[1] == "--paper":
        return {"shapes": paper_shapes()}
    if len(argv) > 1 and argv[1] != "-":
        with open(argv[1]) as f:
            return json.load(f)
    return json.load(sys.stdin)


def check_spec(spec):
    if not isinstance(spec, dict) or not isinstance(spec.get("shapes"), list):
        raise ValueError("spec must be an object with a list 'shapes'")
    if spec.get("emulate", "") not in ("",) + EMULATIONS:
        raise ValueError("emulate %r: want one of %s" % (spec["emulate"], ", ".join(EMULATIONS)))
    if spec.get("dtype", "fp16") not in DTYPES:
        raise ValueError("dtype %r: want one of %s" % (spec["dtype"], ", ".join(DTYPES)))
    for b in spec.get("backends", BACKENDS):
        if b not in BACKENDS:
            raise ValueError("unknown backend %r (want one of %s)" % (b, ", ".join(BACKENDS)))
    for d in spec.get("directions", ["fwd"]):
        if d not in DIRECTIONS:
            raise ValueError("unknown direction %r (want one of %s)" % (d, ", ".join(DIRECTIONS)))
    for i, s in enumerate(spec["shapes"]):
        for k in ("b", "hq", "nq", "d"):
            if not isinstance(s.get(k), int) or s[k] < 1:
                raise ValueError("shape %d: %s must be a positive integer" % (i, k))
        s.setdefault("hkv", s["hq"])
        s.setdefault("nk", s["nq"])
        s["causal"] = bool(s.get("causal", False))
        if s["hkv"] < 1 or s["nk"] < 1 or s["hq"] % s["hkv"] != 0:
            raise ValueError("shape %d: need nk >= 1 and hq a multiple of hkv" % i)


def refusal_reason(messages):
    """The warnings that say why PyTorch refused a forced backend, without
    its section headers ("... kernel not used because:"), the notes on the
    backends that the forcing itself disabled, and the "(Triggered
    internally at ...)" source locations."""
    out = []
    for m in messages:
        m = m.splitlines()[0] if m else ""
        m = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?$", "", m).strip()
        if m and not m.endswith("not used because:") and "has been runtime disabled" not in m and m not in out:
            out.append(m)
    return "; ".join(out)


def flops(s, direction):
    f = 4.0 * s["b"] * s["hq"] * s["nq"] * s["nk"] * s["d"]
    if s["causal"]:
        f /= 2
    return f * {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5, "decode": 1.0}[direction]


def sdpa_backends():
    """name -> torch's SDPBackend for each of BACKENDS this PyTorch has (the
    one map from our names to PyTorch's; kernels/dev harnesses use it too)."""
    from torch.nn.attention import SDPBackend
    return {b: getattr(SDPBackend, SDPA_ENUM[b]) for b in BACKENDS if hasattr(SDPBackend, SDPA_ENUM[b])}


def driver_version():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    except Exception:  # nvidia-smi absent or hung: the field stays empty
        return ""


def main(argv):
    try:
        spec = read_spec(argv)
        check_spec(spec)
    except (OSError, ValueError) as e:
        fail("bad spec: %s" % e, outcome="error")
    claim_stdout()
    emulate = spec.get("emulate", "")

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import sdpa_kernel
    except Exception as e:  # ImportError, or a broken install
        fail("PyTorch is not importable (%s: %s)" % (type(e).__name__, e), emulate=emulate)
    if not torch.cuda.is_available():
        fail("torch %s sees no CUDA device (torch.cuda.is_available() is False)" % torch.__version__, emulate=emulate)
    try:
        from torch.nn.attention.bias import causal_lower_right
    except Exception:
        causal_lower_right = None

    ordinal = int(spec.get("device", 0))
    if not 0 <= ordinal < torch.cuda.device_count():
        fail("torch sees %d CUDA devices: no device %d" % (torch.cuda.device_count(), ordinal), outcome="error", emulate=emulate)
    dev = torch.device("cuda", ordinal)
    try:
        torch.cuda.set_device(dev)
    except RuntimeError as e:
        fail("CUDA device %d: %s" % (ordinal, str(e).splitlines()[0][:300] if str(e) else type(e).__name__), outcome="error", emulate=emulate)
    reps = max(1, int(spec.get("reps", 20)))
    warmup = max(0, int(spec.get("warmup", 5)))
    backends = list(spec.get("backends", BACKENDS))
    directions = list(spec.get("directions", ["fwd"]))
    torch.manual_seed(int(spec.get("seed", 0)))
    kernel_of = sdpa_backends()
    dtype = getattr(torch, DTYPES[spec.get("dtype", "fp16")])
    props = torch.cuda.get_device_properties(dev)

    # Clock cycles of the GPU sleep that covers the host's enqueue (clock_rate:
    # kHz, where this PyTorch reports it; else 2 GHz, about an H100/H200's boost).
    hide_cycles = int(HOST_HIDE_MS * getattr(props, "clock_rate", 2_000_000))

    def median_ms(fn):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(hide_cycles)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def extra_bytes(fn):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    def run_case(s, backend, direction):
        res = dict(s)
        res.update(backend=backend, direction=direction, flops=flops(s, direction), gqa="")
        b, hq, hkv, nq, nk, d = s["b"], s["hq"], s["hkv"], s["nq"], s["nk"], s["d"]
        grad = direction in ("bwd", "fwdbwd")
        # BSHD storage, (B, H, N, D) views: the layout GoFlash reads.
        q = torch.randn(b, nq, hq, d, device=dev, dtype=dtype).transpose(1, 2)
        k = torch.randn(b, nk, hkv, d, device=dev, dtype=dtype).transpose(1, 2)
        v = torch.randn(b, nk, hkv, d, device=dev, dtype=dtype).transpose(1, 2)
        if backend not in kernel_of:
            res.update(status="unsupported", reason="torch %s has no SDPBackend.%s" % (torch.__version__, SDPA_ENUM[backend]))
            return res
        if backend == "math":
            need = b * hq * nq * nk * MATH_BYTES_PER_SCORE[direction]
            free, _ = torch.cuda.mem_get_info()
            if need > 0.85 * free:
                res.update(status="skipped", reason="math needs about %.1f GB for N^2 scores, %.1f GB free"
                           % (need / 1e9, free / 1e9))
                return res
        kw = {}
        mask = None
        if s["causal"] and not (direction == "decode" and nq == 1):
            if nq == nk:
                kw["is_causal"] = True
            elif causal_lower_right is not None:
                mask = causal_lower_right(nq, nk)
            else:
                res.update(status="unsupported", reason="causal with nq != nk needs torch.nn.attention.bias")
                return res
        if hq != hkv:
            kw["enable_gqa"] = True
            res["gqa"] = "native"
        if grad:
            q.requires_grad_(True)
            k.requires_grad_(True)
            v.requires_grad_(True)

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)

        if emulate == "sm75" and backend in SM75_REFUSALS:
            raise RuntimeError(SM75_REFUSED_ERROR)
        with sdpa_kernel([kernel_of[backend]]):
            try:
                out = fwd()
            except (RuntimeError, TypeError) as e:  # TypeError: a PyTorch before 2.5 has no enable_gqa
                if hq == hkv or "out of memory" in str(e).lower():
                    raise
                # This backend (or this PyTorch) rejects enable_gqa: give it k/v with hq heads.
                kw.pop("enable_gqa")
                rep = hq // hkv
                k = k.detach().repeat_interleave(rep, dim=1).requires_grad_(grad)
                v = v.detach().repeat_interleave(rep, dim=1).requires_grad_(grad)
                res["gqa"] = "expanded"
                out = fwd()
            # Bytes of the outputs in fp16: O (B*Nq*Hq*D) and dQ, dK, dV.
            o_bytes = 2 * b * nq * hq * d
            grad_bytes = 2 * (q.numel() + k.numel() + v.numel())
            outputs = {"fwd": o_bytes, "bwd": grad_bytes, "fwdbwd": o_bytes + grad_bytes, "decode": o_bytes}[direction]
            if not grad:
                del out
                with torch.no_grad():
                    res["ms"] = median_ms(fwd)
                    res["alloc_bytes"] = extra_bytes(fwd)
            else:
                g = torch.randn_like(out)
                if direction == "bwd":
                    def step():
                        torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
                else:
                    def step():
                        torch.autograd.grad(fwd(), (q, k, v), g)
                res["ms"] = median_ms(step)
                res["alloc_bytes"] = extra_bytes(step)
            res["extra_bytes"] = max(0, res["alloc_bytes"] - outputs)
        res["tflops"] = res["flops"] / (res["ms"] * 1e-3) / 1e12
        res["status"] = "ok"
        return res

    results = []
    cases = [(s, be, di) for s in spec["shapes"] for di in directions for be in backends]
    t0 = time.time()
    for i, (s, be, di) in enumerate(cases):
        caught = []
        try:
            # PyTorch says why it refuses a backend in a warning, before the
            # error; keep it with the error.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if emulate == "sm75" and be in SM75_REFUSALS:
                    warnings.warn(SM75_REFUSALS[be])
                r = run_case(s, be, di)
        except torch.cuda.OutOfMemoryError as e:
            r = dict(s, backend=be, direction=di, flops=flops(s, di), status="oom",
                     reason=str(e).splitlines()[0][:200])
        except RuntimeError as e:
            msg = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            status = "unsupported" if "no available kernel" in msg.lower() else "error"
            why = refusal_reason([str(w.message) for w in caught])
            if status == "unsupported" and why:
                msg += " (%s)" % why[:300]
            r = dict(s, backend=be, direction=di, flops=flops(s, di), status=status, reason=msg)
        except Exception as e:  # keep going: one bad case must not lose the others
            r = dict(s, backend=be, direction=di, flops=flops(s, di), status="error",
                     reason="%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else ""))
        torch.cuda.empty_cache()
        results.append(r)
        tf = "%.1f TFLOP/s" % r["tflops"] if r.get("status") == "ok" else r.get("status")
        log("sdpa [%d/%d] %s %s B=%d H=%d/%d N=%d/%d D=%d causal=%s: %s (%.0fs)" % (
            i + 1, len(cases), be, di, s["b"], s["hq"], s["hkv"], s["nq"], s["nk"], s["d"],
            s["causal"], tf, time.time() - t0))

    emit({
        "schema": SCHEMA,
        "emulate": emulate,
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "device": torch.cuda.get_device_name(dev),
        "capability": "%d.%d" % torch.cuda.get_device_capability(dev),
        "dtype": spec.get("dtype", "fp16"),
        "total_memory": props.total_memory,
        "driver": driver_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reps": reps,
        "warmup": warmup,
        "results": results,
    }, indent=1)


if __name__ == "__main__":
    main(sys.argv)
