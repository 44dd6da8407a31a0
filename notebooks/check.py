#!/usr/bin/python3
"""Check executed GoFlash notebooks (the output of notebooks/run.sh).

    /usr/bin/python3 notebooks/check.py [--browser CHROMIUM] EXECUTED.ipynb...
    /usr/bin/python3 notebooks/check.py --clean notebooks/*.ipynb
    /usr/bin/python3 notebooks/check.py --solve NOTEBOOK.ipynb SOLVED.ipynb

--clean checks committed notebooks instead: valid nbformat, the GoNB kernel,
no outputs and no execution counts (outputs carry a 1 MB chart library and
machine-specific numbers), a first code cell that is the setup cell, and the
exercises' form (below).

Exercises. An exercise is a code cell tagged "exercise:NAME" that holds the
learner's part blank (its lines marked TODO) and a check that prints
"LABEL: correct" once the answer is right and "LABEL: not yet: HINT"
otherwise, never a panic. After it comes a markdown cell tagged
"solution:NAME", collapsed (metadata jupyter.source_hidden, and a <details>
element for front ends that ignore it), whose one ```go block is the whole
exercise cell answered. --solve writes a copy of a notebook with every
exercise cell replaced by its solution's code; notebooks/run.sh runs that
copy with GOFLASH_NB_SOLVED=1, and the checks below then expect "correct"
from every exercise (and the results only an answered exercise prints)
where, by default, they expect each exercise's hint and no "correct" at all.

A notebook fails when
  * a code cell was not executed, or an output is an error;
  * a shell cell failed (GoNB writes "exit status N" on stderr and goes on),
    or the Go program panicked;
  * a key result it must print is missing, or a number it prints is out of
    its bound (EXPECT below);
  * with GOFLASH_REQUIRE_NVRTC=1: notebook 06 did not find NVRTC (without
    it, either what NVRTC compiled or the line saying it is not found);
  * it shows fewer charts than EXPECT says;
  * with --browser: the notebook exported to HTML (nbconvert) and loaded in
    headless Chromium draws fewer charts than it has chart outputs.
The cells check their own results too (a wrong result ends the cell with an
error); these checks make sure the cells that print them ran at all.

Uses nbformat only (Debian: python3-nbformat, which jupyter-nbconvert pulls in).
"""

import os
import re
import subprocess
import sys
import tempfile

import nbformat

NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


class Text:
    """The stdout of the notebook matches this regular expression."""

    def __init__(self, pattern):
        self.pattern = pattern

    def check(self, out, charts):
        if re.search(self.pattern, out, re.M):
            return None
        return f"missing text /{self.pattern}/"


class NoText:
    """The stdout of the notebook does not match this regular expression."""

    def __init__(self, pattern):
        self.pattern = pattern

    def check(self, out, charts):
        m = re.search(r"^.*" + self.pattern + r".*$", out, re.M)
        if m is None:
            return None
        return f"prints /{self.pattern}/: {m.group(0)[:200]!r}"


class Num:
    """Every match of pattern (which captures one number with NUM) has a
    number within [lo, hi]; at least `count` matches."""

    def __init__(self, pattern, lo=float("-inf"), hi=float("inf"), count=1):
        self.pattern, self.lo, self.hi, self.count = pattern, lo, hi, count

    def check(self, out, charts):
        found = re.findall(self.pattern, out, re.M)
        if len(found) < self.count:
            return f"/{self.pattern}/ printed {len(found)} times, want >= {self.count}"
        for f in found:
            x = float(f if isinstance(f, str) else f[0])
            if not (self.lo <= x <= self.hi):
                return f"/{self.pattern}/ printed {x:g}, want within [{self.lo:g}, {self.hi:g}]"
        return None


class When:
    """The checks in `then` when the notebook's stdout matches pattern, those
    in `otherwise` when it does not (a result that only some machines can
    print, such as what NVRTC compiled)."""

    def __init__(self, pattern, then=(), otherwise=()):
        self.pattern, self.then, self.otherwise = pattern, then, otherwise

    def check(self, out, charts):
        for c in self.then if re.search(self.pattern, out, re.M) else self.otherwise:
            p = c.check(out, charts)
            if p:
                return p
        return None


class Charts:
    """At least n chart outputs (HTML that draws with ECharts)."""

    def __init__(self, n):
        self.n = n

    def check(self, out, charts):
        if charts >= self.n:
            return None
        return f"{charts} charts shown, want >= {self.n}"


# Notebook 06 compiles an edited kernel with NVRTC where there is one and
# says so where there is none; GOFLASH_REQUIRE_NVRTC=1 (CI, which installs
# it) requires the first.
NVRTC_FOUND = r"^NVRTC \d+\.\d+ \("
NVRTC_MISSING = r"^NVRTC not found: "

# What each notebook must print. The setup cell's line is required everywhere.
SETUP = [Text(r"^packages of github\.com/goflash/goflash imported from "), Text(r"GoNB v0\.11\.5 ")]
EXPECT = {
    "01_qkv": SETUP + [
        Num(r"^S\[bank\]\[river\] = " + NUM + r", S\[river\]\[bank\] = 0$", 3, 3),
        Num(r"^S\[collapsed\]\[bank\] = " + NUM + r", S\[bank\]\[collapsed\] = 0$", 3, 3),
        Text(r"^S is symmetric: false$"),
        Num(r"^P\[bank\]\[river\] = e\^3/\(e\^3\+2\) = " + NUM, 0.9094, 0.9095),
        Num(r"^river bank collapsed: +o_bank = \(" + NUM, 0.909, 0.910),
        Num(r"^savings bank collapsed: +o_bank = \(" + NUM, -0.910, -0.909),
        Num(r"max \|flash - naive\| = " + NUM, 0, 1e-6, count=2),
        Num(r"^no projections: +S symmetric: true +P\[bank\]\[bank\] = " + NUM, 0.576, 0.577),
        Num(r"^W_K = W_Q \(tied\): +S symmetric: true +P\[bank\]\[bank\] = " + NUM, 0.9997, 0.9998),
        Num(r"^tied: P\[collapsed\]\[collapsed\] = " + NUM + r", river's row = 0\.3333 0\.3333 0\.3333$", 0.9997, 0.9998),
        Charts(2),
    ],
    "02_naive_memory": SETUP + [
        Num(r"^  B=1  H=32 D=128: T4 runs out at N = +"+NUM, 11054, 11054),
        Num(r"^  B=8  H=32 D=128: T4 runs out at N = +"+NUM, 3827, 3827),
        Num(r"^N = +\d+: naive +[\d.]+ MiB \(formula +[\d.]+, ratio " + NUM, 0.95, 1.1, count=4),
        Num(r"max \|flash - naive\| = " + NUM, 0, 1e-5, count=4),
        Num(r"^N 1024 -> 2048: naive memory x" + NUM, 3.5, 4.1),
        Num(r", flash memory x" + NUM, 1, 2.5),
        Charts(2),
    ],
    "03_online_softmax": SETUP + [
        Text(r"^scores \[10 10 10\] in fp16: plain softmax \[0 0 0\], safe softmax \[0\.3333 0\.3333 0\.3333\]"),
        Text(r"^scores \[2 7 12\] in fp16: plain softmax \[0 0 NaN\]"),
        Text(r"^plain softmax of \(80, 90, 100\) in float32 = \[0 NaN NaN\]$"),
        Text(r"^fp16: +exp\(11\) = 59872, exp\(12\) = \+Inf$"),
        Num(r"^max \|safe float32 - float64\| = " + NUM, 0, 1e-7),
        Num(r"^two-pass: max = 5, sum = " + NUM, 1.20343, 1.20345),
        Num(r"^max relative error of m and l over all steps = " + NUM, 0, 1e-5),
        Num(r"^gain 30: largest score +" + NUM, 88.72, 1000),
        Num(r"\|diff\| = " + NUM, 0, 1e-4, count=2),
        Charts(1),
    ],
    "04_tiling_forward": SETUP + [
        Text(r"^unguarded: exp\(-Inf - \(-Inf\)\) = NaN$"),
        Text(r"^Nq = 300, Nk = 100, causal: 200 rows see no key \(LSE -Inf, output exactly 0\)"),
        Text(r"^independent thread blocks: FA1 16 \(16 of 40 SMs busy\), FA2 512 "),
        Text(r"^tiles: 6 computed, 4 masked, 6 skipped of 16$"),
        Num(r"max \|flash - naive\| = " + NUM, 0, 1e-5, count=6),
        Num(r"^N = 4096, Br = Bc = 128: 528 of 1024 tiles visited \(" + NUM, 51, 52),
        Charts(1),
    ],
    "05_backward": SETUP + [
        Num(r"^max \|exp\(S - L\) - softmax\(S\)\| = " + NUM, 0, 1e-5),
        Num(r"^max over rows \|sum_k P_ik dP_ik - do_i \. o_i\| = " + NUM, 0, 1e-5),
        Num(r"max \|flash - naive\| = " + NUM, 0, 1e-5, count=12),
        Num(r"^largest difference relative to the gradient's size = " + NUM, 0, 1e-5),
        Num(r"^finite-difference check: worst error " + NUM, 0, 2e-3),
        Charts(1),
    ],
    # 06 and 07 pass with or without a GPU: they print which path ran.
    "06_cuda_from_go": SETUP + [
        Text(r"^(GPU found: |No usable GPU: )"),
        Text(r"^(No NVIDIA GPU on this machine: |GPU \d+: )"),
        Text(r"(CPU path: tiles Br = \d+, Bc = \d+|^  D  causal  symbol)"),
        Num(r"used " + NUM + r"% of it", 0, 100, count=2),
        Text(r"^backward on (cpu-flash|gpu) "),
        Num(r"^  d[QKV]: max error vs float64 .*, relative " + NUM, 0, 1e-2, count=3),
        Text(r"^(CPU tiles|tiles of \S+): Br = \d+, Bc = \d+ -> \d+ x \d+ steps"),
        Text(r"^rung 5: shipped \(kernels/fwd\.cuh\)"),
        Text(r"^(Kernel ladder: not timed, no GPU here|shipped / scalar: \d+x$)"),
        Text(r"^flashattn\.RungSource\(4\): ladder/rung4_ldmatrix\.cuh, \d+ lines"),
        Text(r"^ +\d+ \|     return row \* D \+ \(\(c \^ key\(row\)\) << 3\);$"),
        Text("(" + NVRTC_FOUND + "|" + NVRTC_MISSING + ")"),
        When(NVRTC_FOUND, then=[
            Text(r"^  fa2_ladder4_d64: tile Br = \d+, Bc = \d+, \d+ warps; shared memory [1-9]\d* B static"),
            Text(r"^NVRTC points at ladder/rung4_ldmatrix\.cuh line (\d+), the line edited \(\1\): "),
        ], otherwise=[Text(r"^No compile error to show: NVRTC not found")]),
        Text(r"^(Edited rung 4: not (run, no GPU here|loaded, NVRTC not found)|(your edit|unedited) \(NVRTC\) / shipped: )"),
        Charts(1),
    ],
    "07_benchmarks": SETUP + [
        Text(r"^(GPU found: |No usable GPU: )"),
        Num(r"max \|flash - naive\| = " + NUM, 0, 1e-5, count=4),
        Num(r"median of +" + NUM + r"\)", 5, float("inf"), count=8),
        Num(r"^CPU time: flash takes " + NUM + r"x naive's time over all N", 0, 1.5),
        Num(r"^CPU memory, N 1024 -> 2048: naive x" + NUM, 3.5, 4.1),
        Num(r"^CPU memory, N 1024 -> 2048: naive x[\d.]+, flash x" + NUM, 1, 2.5),
        Text(r"^(No usable NVIDIA GPU here .*GPU benchmarks skipped|GPU \d+: )"),
        Text(r"^(PyTorch SDPA comparison skipped: |Speedups below are over PyTorch SDPA )"),
        Num(r"^split-KV: \d+ splits merged by their LSEs, max error vs float64 " + NUM, 0, 1e-5),
        Text(r"^paged: \d+ blocks of \d+ entries in a shuffled order .*: the same output as the contiguous cache$"),
        Num(r"^window: the last \d+ of \d+ entries, max \|windowed - those entries alone\| = " + NUM, 0, 1e-5),
        Num(r"^one decode step reads \d+ MB of K and V: " + NUM + r" FLOP per byte read$", 4, 4),
        Num(r"^  B 1, +\d+ entries: .* = +" + NUM + r"% of 3\.35$", 1, 100, count=6),
        Charts(2),
    ],
}

# The exercises of each notebook, in order: the label each prints and the
# start of the hint it gives blank, as committed; and, for an exercise that
# some machines cannot check, the pattern of the line that says so, with
# which a solved run prints "LABEL: cannot check" instead of "correct".
EXERCISES = {
    "01_qkv": [
        ("exercise 1", r"myWQ must be W_Q with one row changed"),
        ("exercise 2", r"set predMean and predVar"),
    ],
    "02_naive_memory": [("exercise", r"set prediction, the largest N")],
    "03_online_softmax": [
        ("exercise 1", r"set largestX and largestN"),
        ("exercise 2", r"with your rescale the online l is "),
    ],
    "04_tiling_forward": [
        ("exercise 1", r"row 0's m is -Inf after its first key block, whose largest score in that row is 2: compute mNew = max\(m\[r\], rowmax\(S\[r\]\)\)"),
        ("exercise 2", r"set computed, masked and skipped"),
        ("exercise 3", r"set rows and blocks"),
    ],
    "05_backward": [
        ("exercise 1", r"ds is 0"),
        ("exercise 2", r"dV is 0: did you add P\^T dO to it\?"),
    ],
    "06_cuda_from_go": [
        ("exercise 1", r"set predict1 and predict2"),
        ("exercise 2", r"the source still swizzles \(it is rung 4 as shipped\)", NVRTC_MISSING),
    ],
    "07_benchmarks": [("exercise", r"set prediction, the bytes")],
}

# What only an answered exercise prints (GOFLASH_NB_SOLVED=1).
SOLVED = {
    "01_qkv": [Num(r"^P\[river\]\[bank\] = " + NUM + r" \(predicted ", 0.9094, 0.9095)],
    "02_naive_memory": [Num(r"^float32, B=1 H=32 D=128: the largest N that fits is " + NUM, 7778, 7778)],
    "03_online_softmax": [Num(r"^Bc = 64: online m = [\d.]+, l = " + NUM, 0, float("inf"))],
    "04_tiling_forward": [
        Num(r"max \|O - float64\| = " + NUM, 0, 1e-4, count=5),
        Num(r"max \|O - CPUNaive\| = " + NUM, 0, 1e-4, count=5),
    ],
    "05_backward": [
        Num(r"^softmax backward vs finite differences over \d+ scores: max error " + NUM, 0, 1e-8),
        Num(r"max \|dQ, dK, dV - Backward\| = " + NUM, 0, 1e-3, count=5),
    ],
    "06_cuda_from_go": [
        Text(r"^rung 1 reads 64x the bytes of rung 2 \(= Br = 64\)$"),
        When(NVRTC_FOUND, then=[Text(NVRTC_FOUND + r".*\): rung 4 \(edited: ladder/rung4_ldmatrix\.cuh\) for compute_75")]),
    ],
    "07_benchmarks": [Num(r"^you predicted [\d.e+]+ bytes, the call allocated " + NUM, 1.8e7, 2.3e7)],
}

SOLVED_RUN = os.environ.get("GOFLASH_NB_SOLVED") == "1"
for name, exercises in EXERCISES.items():
    for label, hint, *unchecked in exercises:
        if SOLVED_RUN:
            answered = Text(r"^" + label + r": correct$")
            if unchecked:
                answered = When(unchecked[0], then=[Text(r"^" + label + r": cannot check ")], otherwise=[answered])
            EXPECT[name].append(answered)
        else:
            EXPECT[name].append(Text(r"^" + label + r": not yet: " + hint))
    if SOLVED_RUN:
        EXPECT[name] += SOLVED[name]
    else:
        # Blank, nothing may say it is right.
        EXPECT[name].append(NoText(r"\bcorrect\b"))
if os.environ.get("GOFLASH_REQUIRE_NVRTC") == "1":
    EXPECT["06_cuda_from_go"].append(Text(NVRTC_FOUND))

# notebooks/run.sh with GOFLASH_NB_FAKE_SDPA=t4: notebook 07's PyTorch part got
# a T4's answer (flash unsupported), and must have fallen back to
# memory-efficient, said so, and drawn its charts.
if os.environ.get("GOFLASH_FAKE_SDPA") == "t4":
    EXPECT["07_benchmarks"] += [
        Text(r"^PyTorch 0\.0-fake on benchtest fake GPU"),
        Text(r"^sdpa-flash: 0 of \d+ ran; unsupported: No available kernel\. Aborting execution\. \(Flash attention only supports gpu architectures"),
        Text(r"^sdpa-efficient: (\d+) of \1 ran$"),
        Text(r"^Speedups below are over PyTorch SDPA memory-efficient \(flash unsupported: "),
        Charts(7),
    ]

# Text on stdout or stderr that means a cell failed although the kernel went on.
FAILED = re.compile(r"exit status \d+|^panic: |^goroutine \d+ \[|^ERROR|^FAIL\b", re.M)
CHART = re.compile(r"echarts", re.I)


def text_of(v):
    return "".join(v) if isinstance(v, list) else (v or "")


def check(path):
    name = os.path.basename(path).removesuffix(".ipynb")
    nb = nbformat.read(path, as_version=4)
    problems = []
    stdout = []
    charts = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        where = f"cell {i} ({cell.source.strip().splitlines()[0][:50]!r})"
        if cell.get("execution_count") is None:
            problems.append(f"{where}: not executed")
        for o in cell.get("outputs", []):
            t = o.get("output_type")
            if t == "error":
                problems.append(f"{where}: error {o.get('ename', '')}: {o.get('evalue', '')[:300]}")
            elif t == "stream":
                txt = text_of(o.get("text"))
                m = FAILED.search(txt)
                if m:
                    problems.append(f"{where}: {o.get('name')} shows {m.group(0)!r}: {txt.strip()[-300:]}")
                if o.get("name") == "stdout":
                    stdout.append(txt)
            elif t in ("display_data", "execute_result"):
                data = o.get("data", {})
                html = text_of(data.get("text/html"))
                if html and CHART.search(html):
                    charts += max(1, html.count('class="goflash-chart"'))
                if "text/plain" in data:
                    stdout.append(text_of(data["text/plain"]))
    out = "".join(stdout)
    expect = EXPECT.get(name)
    if expect is None:
        problems.append(f"no expectations for {name} in check.py")
        expect = []
    for e in expect:
        p = e.check(out, charts)
        if p:
            problems.append(p)
    return name, problems, charts


def drawn_charts(path, browser):
    """Export the executed notebook to HTML and count the charts a headless
    browser draws (ECharts marks each drawn container with
    _echarts_instance_). Returns (drawn, problems)."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([os.environ.get("JUPYTER", "jupyter"), "nbconvert", "--to", "html", path,
                            "--output-dir", tmp, "--output", "page"], capture_output=True, text=True)
        if r.returncode != 0:
            return 0, [f"HTML export failed: {r.stderr.strip()[-300:]}"]
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + tmp + "/profile",
                            "--virtual-time-budget=5000", "--dump-dom", "file://" + tmp + "/page.html"],
                           capture_output=True, text=True, timeout=180)
        dom = r.stdout
    problems = [f"in the browser: {m}" for m in re.findall(r">(chart failed: [^<]{0,200}|echarts is not loaded[^<]{0,40})", dom)]
    return len(re.findall(r"_echarts_instance_=", dom)), problems


GO_BLOCK = re.compile(r"^```go\n(.*?)^```$", re.M | re.S)


def exercises_of(nb):
    """The exercise cells and solution cells of nb by name, and problems with
    their form. Returns ({name: (index, cell)}, {name: (index, cell)}, problems)."""
    ex, sol, problems = {}, {}, []
    for i, c in enumerate(nb.cells):
        for tag in c.get("metadata", {}).get("tags", []):
            kind, _, name = tag.partition(":")
            if kind not in ("exercise", "solution"):
                continue
            found = ex if kind == "exercise" else sol
            if name in found:
                problems.append(f"cell {i}: a second {tag}")
            found[name] = (i, c)
    for name, (i, c) in ex.items():
        if c.cell_type != "code":
            problems.append(f"cell {i}: exercise:{name} is not a code cell")
        if "TODO" not in c.source:
            problems.append(f"cell {i}: exercise:{name} has no TODO (commit exercises blank)")
        if name not in sol:
            problems.append(f"cell {i}: exercise:{name} has no solution:{name} cell")
            continue
        j, s = sol[name]
        if j <= i:
            problems.append(f"cell {j}: solution:{name} comes before its exercise")
        if s.cell_type != "markdown":
            problems.append(f"cell {j}: solution:{name} is not a markdown cell (a code cell would run, and answer, on Run all)")
        if not s.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
            problems.append(f"cell {j}: solution:{name} is not collapsed (metadata jupyter.source_hidden)")
        if "<details>" not in s.source:
            problems.append(f"cell {j}: solution:{name} is not inside <details> (front ends that ignore source_hidden show it)")
        blocks = GO_BLOCK.findall(s.source)
        if len(blocks) != 1:
            problems.append(f"cell {j}: solution:{name} has {len(blocks)} ```go blocks, want 1 (the exercise cell answered)")
        elif "TODO" in blocks[0]:
            problems.append(f"cell {j}: solution:{name}'s code still has a TODO")
    for name, (j, _) in sol.items():
        if name not in ex:
            problems.append(f"cell {j}: solution:{name} has no exercise:{name} cell")
    return ex, sol, problems


def solve(src, dst):
    """Write src with every exercise cell replaced by its solution's code."""
    nb = nbformat.read(src, as_version=4)
    ex, sol, problems = exercises_of(nb)
    if problems:
        for p in problems:
            print(f"{src}: {p}", file=sys.stderr)
        return 1
    for name, (i, c) in ex.items():
        c.source = GO_BLOCK.findall(sol[name][1].source)[0].rstrip("\n")
    nbformat.write(nb, dst)
    return 0


def check_clean(path):
    nb = nbformat.read(path, as_version=4)
    problems = []
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as e:
        problems.append(f"not valid nbformat: {str(e)[:200]}")
    if nb.metadata.get("kernelspec", {}).get("name") != "gonb":
        problems.append("kernelspec is not gonb")
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or "bash setup.sh" not in code[0].source:
        problems.append("the first code cell is not the setup cell (bash setup.sh)")
    for i, c in enumerate(code):
        if c.get("outputs") or c.get("execution_count") is not None:
            problems.append(f"code cell {i} has outputs or an execution count (commit notebooks clean)")
    ex, _, ep = exercises_of(nb)
    problems += ep
    name = os.path.basename(path).removesuffix(".ipynb")
    want = [label for label, *_ in EXERCISES.get(name, [])]
    if len(ex) != len(want):
        problems.append(f"{len(ex)} exercise cells, check.py's EXERCISES lists {len(want)}")
    return problems


def main(args):
    if args and args[0] == "--clean":
        bad = 0
        for p in args[1:]:
            problems = check_clean(p)
            print(("FAIL " if problems else "ok   ") + p)
            for pr in problems:
                print(f"     - {pr}")
            bad += bool(problems)
        return 1 if bad or not args[1:] else 0
    if args and args[0] == "--solve":
        if len(args) != 3:
            print(__doc__)
            return 2
        return solve(args[1], args[2])
    browser = None
    if len(args) >= 2 and args[0] == "--browser":
        browser, args = args[1], args[2:]
    paths = args
    if not paths:
        print(__doc__)
        return 2
    bad = 0
    for p in paths:
        if not os.path.exists(p):
            print(f"FAIL {p}: not found (did it run?)")
            bad += 1
            continue
        name, problems, charts = check(p)
        if browser:
            drawn, bp = drawn_charts(p, browser)
            problems += bp
            if drawn < charts:
                problems.append(f"the browser drew {drawn} of {charts} charts")
        if problems:
            bad += 1
            print(f"FAIL {name}")
            for pr in problems:
                print(f"     - {pr}")
        else:
            print(f"ok   {name} ({charts} charts)")
    print(f"{len(paths) - bad} of {len(paths)} notebooks passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
