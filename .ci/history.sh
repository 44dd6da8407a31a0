#!/usr/bin/env bash
# Product text says what the software does, not when or in which experiment it
# was done: no session, call or issue numbers, run dates, "when this was
# written", commit hashes or result folders in README, docs, tutorial,
# notebooks, kernels or Go code. A generated table may cite its published
# run (perf/...), commit included; test data may hold dates.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
pat='\b(session|call)s? [0-9]+\b|\bissues? #?[0-9]+\b|when this (chapter|section|page|file) was written|bench/results|kernels/dev/RESULTS|\bcommit [0-9a-f]{7,40}\b|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b'
hits=$(git grep -nIiE "$pat" -- README.md docs tutorial notebooks kernels flashattn internal cmd viz bench colab kaggle perf/publish.sh \
	':!*_test.go' ':!*/testdata/*' ':!docs/img/data/*' ':!viz/assets/*' ':!*.ipynb' | grep -vE 'perf/[a-z0-9-]+')
# Notebooks: their cells' text (JSON-escaped, so matched on the file).
nb=$(git grep -nIiE "$pat" -- 'notebooks/*.ipynb' | grep -vE 'perf/[a-z0-9-]+')
if [ -n "$hits$nb" ]; then
	echo "product text narrates history (say what the software does, in the present tense):"
	printf '%s\n%s\n' "$hits" "$nb" | sed '/^$/d' | cut -c1-200
	exit 1
fi
echo "no history in product text"
