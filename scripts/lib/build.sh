# shellcheck shell=bash
# Shared by scripts/demo, scripts/test, scripts/varemap, scripts/report and
# scripts/fresh-check (sourced, not run). Needs: set -euo pipefail, the
# repository root as the current directory, and vr_script (the caller's name).
#
# vr_step WHAT CMD...     runs CMD with its output kept in a file; silent when
#                         it succeeds; when it fails, prints the failing
#                         command's last lines, then one line naming the step,
#                         and exits with its status.
# vr_shown WHAT CMD...    the same with the output shown as it comes.
# vr_configure BUILD [OPTION...]
#                         configures BUILD (meson setup), or re-configures it
#                         (meson setup --reconfigure) when what configure would
#                         find changed since (packages setup-deps installed,
#                         the compiler, nvcc), when the options differ, or when
#                         it was configured by hand (no stamp). Records both in
#                         BUILD/varemap-configure.stamp.
# vr_configured BUILD [OPTION...]
#                         true when BUILD needs no re-configure and its options
#                         include these.
# vr_need_cuda DIR        stops with a message when DIR lacks nvcc or cuda.h.

vr_tail_lines=${VR_TAIL_LINES:-40}
vr_script=${vr_script:-$(basename "$0")}

vr_fail_report() { # log rc what cmd...
  local log=$1 rc=$2 what=$3
  shift 3
  if [ -s "$log" ]; then
    echo "---- output of: $* (last lines) ----" >&2
    # A compiler error sits at ninja's first FAILED: block, not always at the
    # very end (other jobs finish after it).
    if grep -q '^FAILED: ' "$log"; then
      sed -n '/^FAILED: /,$p' "$log" | head -n 200 >&2
    else
      tail -n "$vr_tail_lines" "$log" >&2
    fi
    echo "---- full output: $log ----" >&2
  fi
  echo "$vr_script: step '$what' failed (exit $rc): $*" >&2
}

vr_step() {
  local what=$1
  shift
  local log rc=0
  log=$(mktemp "${TMPDIR:-/tmp}/varemap-step.XXXXXX")
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    rm -f "$log"
    return 0
  fi
  vr_fail_report "$log" "$rc" "$what" "$@"
  exit "$rc"
}

vr_shown() {
  local what=$1
  shift
  local rc=0
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "$vr_script: step '$what' failed (exit $rc): $*" >&2
    exit "$rc"
  fi
}

vr_need_cuda() {
  if [ ! -x "$1/bin/nvcc" ] || [ ! -f "$1/include/cuda.h" ]; then
    echo "$vr_script: the CUDA toolkit (nvcc and cuda.h) is needed at $1 (set CUDA_ROOT)" >&2
    exit 1
  fi
}

# What `meson setup` would find that setup-deps or the machine may change.
vr_deps_key() {
  local cuda=$1
  printf 'criterion=%s libzstd=%s meson=%s cc=%s nvcc=%s' \
    "$(pkg-config --modversion criterion 2>/dev/null || echo none)" \
    "$(pkg-config --modversion libzstd 2>/dev/null || echo none)" \
    "$(meson --version 2>/dev/null || echo none)" \
    "$(cc -dumpfullversion 2>/dev/null || echo none)" \
    "$("$cuda/bin/nvcc" --version 2>/dev/null | tail -n 1 || echo none)"
}

# True when BUILD is configured, nothing configure would find has changed,
# and its options include every OPTION given.
vr_configured() {
  local build=$1
  shift
  local cuda=${CUDA_ROOT:-/usr/local/cuda}
  local stamp=$build/varemap-configure.stamp
  [ -f "$build/build.ninja" ] && [ -f "$stamp" ] || return 1
  # Re-configured by hand since (meson rewrites its coredata then).
  [ "$stamp" -nt "$build/meson-private/coredata.dat" ] || return 1
  [ "$(sed -n 's/^deps: //p' "$stamp")" = "$(vr_deps_key "$cuda")" ] || return 1
  local have o
  have=$(sed -n 's/^options: //p' "$stamp")
  for o in "$@"; do
    case " $have " in *" $o "*) ;; *) return 1 ;; esac
  done
}

vr_configure() {
  local build=$1
  shift
  local cuda=${CUDA_ROOT:-/usr/local/cuda}
  local stamp=$build/varemap-configure.stamp
  local deps
  deps=$(vr_deps_key "$cuda")
  if vr_configured "$build" "$@" && [ "$(sed -n 's/^options: //p' "$stamp")" = "$*" ]; then
    return 0
  fi
  if [ -f "$build/meson-private/coredata.dat" ]; then
    echo "$vr_script: re-configuring $build/ ($*)" >&2
    # A build dir of another meson version cannot be re-configured, only
    # wiped; any other failure will fail again and be shown then.
    local log rc=0
    log=$(mktemp "${TMPDIR:-/tmp}/varemap-step.XXXXXX")
    meson setup --reconfigure "$build" "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
      tail -n "$vr_tail_lines" "$log" >&2
      echo "$vr_script: re-configuring $build/ failed (above); configuring it afresh" >&2
      vr_step "configure $build/" meson setup --wipe "$build" "$@"
    fi
    rm -f "$log"
  else
    echo "$vr_script: configuring $build/ ($*)" >&2
    vr_step "configure $build/" meson setup "$build" "$@"
  fi
  printf 'options: %s\ndeps: %s\n' "$*" "$deps" >"$stamp"
}

vr_jobs() {
  if [ -n "${JOBS:-}" ]; then
    echo "-j$JOBS"
  fi
}
