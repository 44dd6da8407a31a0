old_step = s[s.index('  auto step = [&](int n, auto masked) {'):s.index('  if (n_end > 0) {')]
new_step = old_step.replace('''    s_gemm(n);
    rescale();
''','''    s_gemm(n);
''').replace('''    mbar_arrive(emptyV + sp);
    pack_p();''','''    mbar_arrive(emptyV + sp);
    rescale();
    pack_p();''')
assert new_step != old_step
s = s.replace(old_step, new_step)
s = s.replace('''    if (0 < n_mask) softmax(0, Unmasked{});
    else softmax(0, Masked{});
    pack_p();''','''    if (0 < n_mask) softmax(0, Unmasked{});
    else softmax(0, Masked{});
    rescale();
    pack_p();''')
s = s.replace('''    const int nl = n_end - 1;
    rescale();''','''    const int nl = n_end - 1;''')
