#!/usr/bin/env bash
# csrc/thread_pool.c alone under ThreadSanitizer, then AddressSanitizer + UBSan: the pool's
# spin, sleep and adaptive-spin paths (.ci/pool_stress.c). Seconds, not the full
# .ci/sanitizers.sh build; run it after any change to the pool.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
for sanitizer in thread address,undefined; do
    gcc -std=c99 -g -O1 -Wall -Wextra -fsanitize="$sanitizer" -fno-sanitize-recover=all -Icsrc \
        csrc/thread_pool.c .ci/pool_stress.c -o "$OUT/pool_stress" -lpthread
    TSAN_OPTIONS=halt_on_error=1 "$OUT/pool_stress"
done
