#!/usr/bin/env bash
# Sanitizer runs of the native core, in a copy of the tree so the
# shared in-place .so files are never touched.
#
#   tools/run_sanitizers.sh            # ASan+UBSan build, test slice under ASan
#   tools/run_sanitizers.sh valgrind   # debug build, fault-injection leak check under valgrind memcheck
#   tools/run_sanitizers.sh all        # both
#   tools/run_sanitizers.sh asan tests/test_chat.py ...   # a different pytest selection
#   tools/run_sanitizers.sh asan -k "not huge_cache"       # extra pytest options (default files)
#
# ASan stage: builds with QWEN4EXP_SANITIZE=1 (-fsanitize=address,undefined,
# -fno-sanitize-recover=undefined), runs the slice with
# LD_PRELOAD=$(gcc -print-file-name=libasan.so) and ASAN_OPTIONS=detect_leaks=0
# (CPython itself leaks at exit), halting on the first report. The slice:
# segments, tokenizer API, parity (not slow), NFC, hostile input (fuzz corpus
# and regression replay, hypothesis drivers, soak) and fault injection.
#
# Valgrind stage: builds with QWEN4EXP_DEBUG=1, runs every injected
# allocation failure of the representative calls plus successful calls under
# memcheck, and fails if any block is definitely/indirectly lost from a stack
# that passes through qwen4exp's extensions, or on any invalid read/write.
#
# Exit status 0 means clean. Work dir: $QWEN4EXP_SAN_DIR (default /tmp/q4san).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${QWEN4EXP_SAN_DIR:-/tmp/q4san}"
MODE="${1:-asan}"
shift || true
PY="${PYTHON:-python}"
# the real interpreter, not a shim script (valgrind must run python itself)
PY="$("$PY" -c 'import sys; print(sys.executable)')"

copy_tree() {  # $1: destination; tracked + untracked (not ignored) files of the work tree
    rm -rf "$1"
    mkdir -p "$1"
    (cd "$REPO" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}

run_asan() {
    local tree="$WORK/asan"
    echo "== ASan+UBSan: building in $tree"
    copy_tree "$tree"
    if ! (cd "$tree" && QWEN4EXP_SANITIZE=1 "$PY" setup.py -q build_ext --inplace >"$WORK/asan-build.log" 2>&1); then
        echo "build failed: $WORK/asan-build.log"; tail -20 "$WORK/asan-build.log"; return 2
    fi
    local libasan
    libasan="$(gcc -print-file-name=libasan.so)"
    local tests=() opts=() arg
    for arg in "$@"; do
        case "$arg" in -*) opts+=("$arg") ;; *) if [ ${#opts[@]} -gt 0 ] && [ "${opts[-1]}" = "-k" ]; then opts+=("$arg"); else tests+=("$arg"); fi ;; esac
    done
    if [ ${#tests[@]} -eq 0 ]; then
        tests=(tests/test_segments.py tests/test_tokenizer_api.py tests/test_hostile.py
               tests/test_fault_injection.py tests/test_encode_parity.py)
        [ -f "$tree/tests/test_normalize.py" ] && tests+=(tests/test_normalize.py)
    fi
    echo "== ASan+UBSan: pytest ${tests[*]} (not slow)"
    local start=$SECONDS rc
    (cd "$tree" && \
        LD_PRELOAD="$libasan" \
        ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=1:verify_asan_link_order=0:strict_string_checks=1:detect_stack_use_after_return=1" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        PYTHONPATH="$tree/src" QWEN4EXP_SANITIZED=1 \
        "$PY" -m pytest -q -p no:cacheprovider -n 0 -m "not slow" "${opts[@]}" "${tests[@]}" >"$WORK/asan-tests.log" 2>&1)
    rc=$?
    tail -5 "$WORK/asan-tests.log"
    if grep -qE "ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer" "$WORK/asan-tests.log"; then
        echo "ASan/UBSan: REPORTS FOUND (see $WORK/asan-tests.log)"
        grep -m5 -A30 -E "ERROR: AddressSanitizer|runtime error:" "$WORK/asan-tests.log"
        return 1
    fi
    if [ $rc -ne 0 ]; then
        echo "ASan/UBSan: tests failed (rc=$rc), no sanitizer report; see $WORK/asan-tests.log"
        return $rc
    fi
    echo "ASan/UBSan: CLEAN ($((SECONDS - start)) s)"
}

run_valgrind() {
    command -v valgrind >/dev/null || { echo "valgrind not installed"; return 2; }
    local tree="$WORK/valgrind"
    echo "== valgrind memcheck: building (debug) in $tree"
    copy_tree "$tree"
    if ! (cd "$tree" && QWEN4EXP_DEBUG=1 "$PY" setup.py -q build_ext --inplace >"$WORK/valgrind-build.log" 2>&1); then
        echo "build failed: $WORK/valgrind-build.log"; return 2
    fi
    cat >"$WORK/leak_driver.py" <<'EOF'
"""Every injected allocation failure of the representative calls, then exit."""
import sys
sys.path.insert(0, sys.argv[1] + "/tests")
import test_fault_injection as fi  # noqa: E402  (the calls of tests/test_fault_injection.py)
from qwen4exp import Tokenizer, TokenBuffer  # noqa: E402
from qwen4exp._native import _alloc  # noqa: E402

failed = 0
tok = Tokenizer()
for name, fn in sorted(fi.CALLS.items()):
    want = fn(tok)
    n_warm = fi._allocations(lambda: fn(tok))
    n_cold = fi._allocations(lambda: fn(Tokenizer())) - fi._allocations(Tokenizer)
    for k in range(1, n_warm + 1):
        status, _, _ = fi._armed(k, lambda: fn(tok))
        failed += status == "oom"
    for k in range(1, n_cold + 1):
        t = Tokenizer()
        status, _, _ = fi._armed(k, lambda: fn(t))
        failed += status == "oom"
        assert fn(t) == want
        del t
for k in range(1, fi._allocations(Tokenizer) + 1):
    try:
        _alloc.fail_allocation(k)
        Tokenizer()
    except MemoryError:
        failed += 1
    finally:
        _alloc.fail_allocation(0)
buf = TokenBuffer()
for k in range(1, 8):
    fi._armed(k, lambda: tok.encode_segments_into(fi.STREAM.data, fi.STREAM.segments, buf))
print(f"injected allocation failures survived: {failed}")
EOF
    echo "== valgrind memcheck: fault-injection driver"
    local start=$SECONDS
    (cd "$tree" && PYTHONMALLOC=malloc PYTHONPATH="$tree/src" QWEN4EXP_FAULT_INJECTION=1 valgrind --tool=memcheck --leak-check=full \
        --show-leak-kinds=definite,indirect --num-callers=40 --error-limit=no \
        "$PY" "$WORK/leak_driver.py" "$tree" >"$WORK/valgrind.log" 2>&1)
    tail -3 "$WORK/valgrind.log"
    grep "injected allocation failures survived" "$WORK/valgrind.log"
    # Loss records / errors whose stack passes through our extensions.
    "$PY" - "$WORK/valgrind.log" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
blocks = re.split(r"\n==\d+== \n", text)
ours = [b for b in blocks if "qwen4exp" in b and re.search(
    r"(definitely|indirectly) lost|Invalid (read|write|free)|uninitialised|Mismatched free", b)]
for b in ours[:10]:
    print(b)
print(f"valgrind: {len(ours)} report(s) through qwen4exp extensions")
sys.exit(1 if ours else 0)
EOF
    local rc=$?
    if [ $rc -eq 0 ]; then echo "valgrind: CLEAN ($((SECONDS - start)) s)"; else echo "valgrind: REPORTS FOUND"; fi
    return $rc
}

mkdir -p "$WORK"
status=0
case "$MODE" in
    asan) run_asan "$@" || status=$? ;;
    valgrind) run_valgrind || status=$? ;;
    all) run_asan "$@" || status=$?; run_valgrind || status=$? ;;
    *) echo "usage: $0 [asan|valgrind|all] [pytest args]"; exit 2 ;;
esac
exit $status
