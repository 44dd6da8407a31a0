# per-consumer end: a causal consumer stops at the last block its own rows see and
# only hands the later stages back (their loads are the other consumers')
old = '''  if (n_end > 0) {
    // Blocks before n_mask'''
new = '''  int n_own = n_end;  // the blocks this consumer's rows see
  if (kCausal) {
    const int last = rowc + 63 + shift;
    n_own = last < 0 ? 0 : min(n_end, last / T::kBc + 1);
  }
  if (n_own > 0) {
    // Blocks before n_mask'''
assert old in s
s = s.replace(old, new)
old = '''    for (; n < min(n_mask, n_end); ++n) step(n, Unmasked{});
    for (; n < n_end; ++n) step(n, Masked{});
    const int nl = n_end - 1;
    rescale();
    mbar_wait(fullV + nl % T::kStages, (nl / T::kStages) & 1);
    pv_gemm(nl);
    wgmma_wait<0>();
    fence_regs(o);
  }
'''
new = '''    for (; n < min(n_mask, n_own); ++n) step(n, Unmasked{});
    for (; n < n_own; ++n) step(n, Masked{});
    const int nl = n_own - 1;
    rescale();
    mbar_wait(fullV + nl % T::kStages, (nl / T::kStages) & 1);
    pv_gemm(nl);
    wgmma_wait<0>();
    fence_regs(o);
    if (n_own < n_end) mbar_arrive(emptyV + nl % T::kStages);
  }
  for (int n = n_own; n < n_end; ++n) {  // blocks past this consumer's rows: released unread
    const int st = n % T::kStages;
    const uint32_t ph = (n / T::kStages) & 1;
    mbar_wait(fullK + st, ph);
    mbar_arrive(emptyK + st);
    mbar_wait(fullV + st, ph);
    if (n + 1 < n_end) mbar_arrive(emptyV + st);
  }
'''
assert old in s
s = s.replace(old, new)
