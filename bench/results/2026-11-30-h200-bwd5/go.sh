#!/usr/bin/env bash
# unpack the xz'd harness under /tmp and run it from the repo root (paths relative to /tmp/bwd5 via B)
mkdir -p /tmp/bwd5/.build/bwd5 && tar -C /tmp/bwd5/.build/bwd5 -xJf .build/bwd5/pack.tar.xz
sed -i 's#^B=.build/bwd5#B=/tmp/bwd5/.build/bwd5#' /tmp/bwd5/.build/bwd5/run.sh
bash /tmp/bwd5/.build/bwd5/run.sh
