old = '''  static constexpr int kBars = 1 + 4 * kStages;'''
assert old in s
s = s.replace(old, '''  static constexpr int kBars = 2 + 4 * kStages;''')
