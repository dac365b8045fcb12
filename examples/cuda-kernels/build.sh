#!/usr/bin/env bash
# Compiles every kernel under kernels/ for one GPU arch, compile-only (no GPU needed).
#   usage: build.sh ARCH [NVCC_FLAG...]      e.g. build.sh sm_80
#                                                 build.sh sm_75 -DQGEMM_GUARD_BELOW_SM80
# ARCH and the flags reach nvcc as separate arguments, never pasted into a command string.
# NVCC picks the compiler (default: nvcc on PATH); BUILD_DIR the output root (default ./build).
# Every kernel is tried; the exit status is 1 if any failed.
set -uo pipefail
arch="${1:?usage: build.sh ARCH [NVCC_FLAG...]}"
shift
here="$(cd "$(dirname "$0")" && pwd)"
out="${BUILD_DIR:-$here/build}/$arch"
mkdir -p "$out"
status=0
for src in "$here"/kernels/*.cu; do
  name="$(basename "$src" .cu)"
  if "${NVCC:-nvcc}" -c "-arch=$arch" "$@" "$src" -o "$out/$name.o"; then
    echo "ok: $name for $arch"
  else
    echo "FAILED: $name for $arch" >&2
    status=1
  fi
done
exit "$status"
