# bench/train_lib.sh - what the training benchmarks (train_accuracy.sh,
# train_model_parallel.sh) share, sourced by them: the command line
# ([BUILD_DIR] [--epochs N]) and one `gradwire train` run with its JSON
# report. The sourcing script sets PROG (its name, for messages), HELP_LINES
# (the lines of its header comment that --help prints) and EPOCHS (its
# default) first.

# train_args "$@": sets BUILD, EPOCHS, LAUNCH and OUT (a scratch directory
# removed on exit), or exits 2 with the reason.
train_args() {
    BUILD=build
    while [ $# -gt 0 ]; do
        case "$1" in
        --epochs)
            EPOCHS="${2:-}"
            shift 2 || shift
            ;;
        -h | --help)
            sed -n "$HELP_LINES" "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        -*)
            echo "$PROG: unknown option $1" >&2
            exit 2
            ;;
        *)
            BUILD="$1"
            shift
            ;;
        esac
    done
    case "$EPOCHS" in
    '' | *[!0-9]* | 0)
        echo "$PROG: --epochs wants a positive number, not '$EPOCHS'" >&2
        exit 2
        ;;
    esac
    LAUNCH="$BUILD/gradwire"
    [ -x "$LAUNCH" ] || {
        echo "$PROG: no $LAUNCH: build first (./scripts/build.sh)" >&2
        exit 2
    }
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
}

# train_run NAME RANKS [train options]: trains, leaving $OUT/NAME.json (and
# .log); on failure prints the log's tail and exits 1.
train_run() {
    local name="$1" n="$2"
    shift 2
    "$LAUNCH" launch -n "$n" -- "$LAUNCH" train --epochs "$EPOCHS" --batch 128 --quiet \
        --no-progress --json "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1 || {
        echo "$PROG: run '$name' failed:" >&2
        tail -n 20 "$OUT/$name.log" >&2
        exit 1
    }
}
