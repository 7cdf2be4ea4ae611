#!/bin/sh
# Lint gate (ctest label lint): clang-format, clang-tidy and cppcheck over the tree, so style and
# the bug classes they catch fail the build's tests instead of a review.
#
#   lint.sh SRC_DIR BIN_DIR           check the tree; exit 0 clean, 1 violations, 2 setup error
#   lint.sh --fixture DIR BIN_DIR     show every checker can fail: each DIR/*.c names, on its
#                                     first line, the checker that must reject it and a string
#                                     that checker must print ("lint-fixture: TOOL: STRING");
#                                     exit 0 when every checker rejected its fixture, else 1
#
# Tree mode checks: clang-format (--dry-run -Werror, root .clang-format) over *.c/*.h under
# src/ include/ tests/ bench/, except tests/lint/fixtures and tests/fuzz/corpus; clang-tidy
# (root .clang-tidy) over src/**/*.c with BIN_DIR/compile_commands.json; cppcheck over src/.
# Tools can be overridden with CLANG_FORMAT, CLANG_TIDY, CPPCHECK; LINT_JOBS (default 2) runs
# clang-tidy files in parallel.
set -u

CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy-14}
CPPCHECK=${CPPCHECK:-cppcheck}
JOBS=${LINT_JOBS:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

die() {
    echo "lint: $*" >&2
    exit 2
}

for tool in "$CLANG_FORMAT" "$CLANG_TIDY" "$CPPCHECK"; do
    command -v "$tool" >/dev/null || die "$tool not found (see scripts/apt-packages.txt)"
done

FORMAT_ARGS="--dry-run -Werror"
# The gcc flags of the dev build (e.g. -Wno-format-truncation) are unknown to clang. The static
# analyzer runs in shallow mode (less inlining across calls): 5-20x faster per file, and it
# drops the deep-mode reports that assume an error_set()-style helper in another file may
# return 0 (measured on src/ at the time of writing: same real findings, none of those).
TIDY_ARGS="--quiet --extra-arg=-Wno-unknown-warning-option
    --extra-arg=-Xclang --extra-arg=-analyzer-config --extra-arg=-Xclang --extra-arg=mode=shallow"
# missingIncludeSystem: system headers are not given to cppcheck on purpose; it models libc and
# POSIX through --library instead of parsing glibc's macros (slow and noisy).
# readdirCalled: cppcheck recommends readdir_r, which glibc deprecated (2.24) and POSIX.1-2008
# TC2 discourages; readdir is safe on a stream that one thread owns.
# uninitvar: cppcheck 2.10 reports arrays filled element by element in a loop as uninitialized
# (three false reports in sched/ alone); gcc -Wmaybe-uninitialized and the clang analyzer's
# core checks cover that bug class without them.
# -D_POSIX_C_SOURCE: check the one configuration the build compiles instead of every #ifdef
# combination. A false positive in one place is suppressed there, with its reason:
# /* cppcheck-suppress ID ; why */ on the line above (--inline-suppr).
CPPCHECK_ARGS="--enable=warning,performance,portability --error-exitcode=1 --inline-suppr
    --std=c11 --library=posix -D_POSIX_C_SOURCE=200809L --suppress=missingIncludeSystem
    --suppress=readdirCalled --suppress=uninitvar --quiet -j $JOBS"

# clang-format over the file names on stdin (one a line).
run_format() {
    # shellcheck disable=SC2086
    xargs -d '\n' "$CLANG_FORMAT" $FORMAT_ARGS
}

# clang-tidy over the file names on stdin, JOBS files at a time; "$@" follows the file name.
run_tidy() {
    # shellcheck disable=SC2086
    xargs -d '\n' -I '{}' -P "$JOBS" "$CLANG_TIDY" $TIDY_ARGS '{}' "$@"
}

# cppcheck DIR...
run_cppcheck() {
    # shellcheck disable=SC2086
    "$CPPCHECK" $CPPCHECK_ARGS -I "$ROOT/include" -I "$ROOT/src" "$@"
}

check_tree() {
    src=$1 bin=$2
    [ -f "$bin/compile_commands.json" ] ||
        die "$bin/compile_commands.json missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)"
    cd "$src" || die "cannot enter $src"
    failed=""

    format_files=$(find src include tests bench \( -path tests/lint/fixtures -o \
        -path tests/fuzz/corpus \) -prune -o -name '*.[ch]' -print | sort)
    printf '%s\n' "$format_files" | run_format || failed="$failed clang-format"

    tidy_files=$(find src -name '*.c' | sort)
    printf '%s\n' "$tidy_files" | run_tidy -p "$bin" || failed="$failed clang-tidy"

    run_cppcheck src || failed="$failed cppcheck"

    if [ -n "$failed" ]; then
        echo "lint: violations found by:$failed (see above; clang-format-14 -i FILE fixes format)"
        exit 1
    fi
    echo "lint: clean (clang-format $(printf '%s\n' "$format_files" | wc -l) files," \
        "clang-tidy $(printf '%s\n' "$tidy_files" | wc -l) files, cppcheck src/)"
}

# Runs the checker a fixture names on that fixture alone; returns 0 when it rejected the file
# and printed the expected string.
reject_fixture() {
    file=$1 tool=$2 expect=$3
    case $tool in
    clang-format) out=$(echo "$file" | run_format 2>&1) ;;
    clang-tidy)
        out=$(echo "$file" | run_tidy -- -std=c11 -D_POSIX_C_SOURCE=200809L \
            -I"$ROOT/include" -I"$ROOT/src" 2>&1)
        ;;
    cppcheck) out=$(run_cppcheck "$file" 2>&1) ;;
    *)
        echo "lint: $file: unknown checker '$tool'"
        return 1
        ;;
    esac
    rc=$?
    if [ $rc -ne 0 ] && printf '%s' "$out" | grep -qF -- "$expect"; then
        echo "lint: $tool rejects $(basename "$file") as expected ($expect)"
        return 0
    fi
    printf '%s\n' "$out"
    echo "lint: $tool did not reject $(basename "$file") with '$expect' (exit $rc)"
    return 1
}

check_fixtures() {
    dir=$1
    failed=0 seen=""
    for file in "$dir"/*.c; do
        [ -f "$file" ] || die "no fixtures in $dir"
        spec=$(head -n 1 "$file" | sed -n 's/.*lint-fixture: \([a-z-]*\): \(.*[^ ]\) *\*\/.*/\1 \2/p')
        [ -n "$spec" ] || die "$file: first line lacks 'lint-fixture: TOOL: STRING'"
        tool=${spec%% *}
        reject_fixture "$file" "$tool" "${spec#* }" || failed=1
        seen="$seen $tool"
    done
    for tool in clang-format clang-tidy cppcheck; do
        case " $seen " in
        *" $tool "*) ;;
        *)
            echo "lint: no fixture in $dir shows that $tool can fail"
            failed=1
            ;;
        esac
    done
    exit $failed
}

case ${1:-} in
--fixture)
    [ $# -eq 3 ] || die "usage: lint.sh --fixture DIR BIN_DIR"
    check_fixtures "$2"
    ;;
*)
    [ $# -eq 2 ] || die "usage: lint.sh SRC_DIR BIN_DIR | lint.sh --fixture DIR BIN_DIR"
    check_tree "$1" "$2"
    ;;
esac
