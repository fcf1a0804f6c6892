#!/usr/bin/env bash
# The [build] command of wrangler.toml (also run by scripts/test.sh): builds build/index.js +
# build/index_bg.wasm with worker-build, using the tools scripts/setup.sh installed.
#   SA_BUILD_PROFILE=release (default)  cargo profile `release` (opt-level s, LTO) + wasm-opt
#   SA_BUILD_PROFILE=dev                cargo profile `wasm-dev` (no LTO, 16 codegen units),
#                                       no wasm-opt: rebuilds in seconds; bigger, slower wasm
#   SA_SKIP_BUILD_IF_FRESH=1            do nothing when build/ was built with that profile and
#                                       is newer than every input. The default under
#                                       `wrangler dev` (WRANGLER_COMMAND=dev), which runs the
#                                       [build] command twice at start-up (wrangler 4.86).
# Extra arguments go to worker-build (and, after its own options, to `cargo build`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SA_ROOT"

profile="${SA_BUILD_PROFILE:-release}"
case "$profile" in
  release) flags=(--release) ;;
  # A custom cargo profile (worker-build passes --profile to cargo and reads
  # target/wasm32-unknown-unknown/wasm-dev/); --no-opt skips the ~4 s wasm-opt pass.
  dev) flags=(--profile wasm-dev --no-opt) ;;
  *) echo "build: SA_BUILD_PROFILE must be 'release' or 'dev', not '$profile'" >&2; exit 2 ;;
esac
# Written after a successful build with the build's *start* time as mtime, so a source edited
# during a build still counts as newer. Holds the profile name. build/ is not committed.
stamp=build/.sa-build-stamp

# Everything the wasm depends on: `find -newer` lists any input changed since the last build.
inputs=()
for p in src crates migrations Cargo.toml Cargo.lock build.rs .cargo; do [ -e "$p" ] && inputs+=("$p"); done
# wrangler sets WRANGLER_COMMAND for its [build] step; deploy always builds unless told not to.
skip="${SA_SKIP_BUILD_IF_FRESH:-}"
if [ -z "$skip" ]; then
  if [ "${WRANGLER_COMMAND:-}" = dev ]; then skip=1; else skip=0; fi
fi
# The console (static assets, build/console/): esbuild, well under a second; always rebuilt.
node scripts/build-console.mjs
if [ "$skip" = 1 ] && [ -f build/index_bg.wasm ] && [ -f build/index.js ] && [ -f "$stamp" ] &&
  [ "$(cat "$stamp")" = "$profile" ] && [ -z "$(find "${inputs[@]}" -newer "$stamp" -print -quit)" ]; then
  sa_log "build: build/ ($(cat "$stamp")) is newer than the sources: not rebuilding"
  exit 0
fi

missing=()
for bin in "$SA_WORKER_BUILD_BIN" "$WASM_BINDGEN_BIN" "$WASM_OPT_BIN" "$ESBUILD_BIN"; do
  [ -x "$bin" ] || missing+=("$bin")
done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'build: missing %s\n' "${missing[@]}" >&2
  echo "build: run 'bash scripts/setup.sh' first (it installs them; a few minutes the first time)" >&2
  exit 1
fi

# Trap: the wasm-bindgen CLI must equal the wasm-bindgen crate in Cargo.lock exactly, or the
# build fails late with a cryptic schema-version error.
if [ -f Cargo.lock ]; then
  locked="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
  if [ -n "$locked" ] && [ "$locked" != "$SA_WASM_BINDGEN_VERSION" ]; then
    echo "build: Cargo.lock has wasm-bindgen $locked but the tools are for $SA_WASM_BINDGEN_VERSION:" >&2
    echo "build: pin wasm-bindgen = \"=$SA_WASM_BINDGEN_VERSION\" in Cargo.toml (or bump scripts/env.sh)" >&2
    exit 1
  fi
fi
if [ "$profile" = dev ] && ! grep -q '^\[profile\.wasm-dev\]' Cargo.toml; then
  cat >&2 <<'MSG'
build: SA_BUILD_PROFILE=dev needs this section in Cargo.toml:
[profile.wasm-dev]
inherits = "release"
lto = false
codegen-units = 16
incremental = true
MSG
  exit 1
fi

start=$SECONDS
start_epoch="$(date +%s.%N)"
sa_log "build: worker-build ${flags[*]} $*"
rm -f "$stamp"
if ! worker-build "${flags[@]}" "$@"; then
  # A failed worker-build leaves its staging dir build/.tmp behind, and the next build would
  # wait ~5 s for it to go stale: remove it (concurrent builds wait for ours, so it is ours).
  rm -rf build/.tmp
  sa_log "build: worker-build failed after $((SECONDS - start)) s"
  exit 1
fi
echo "$profile" >"$stamp"
touch -d "@$start_epoch" "$stamp"
sa_log "build: $profile build done in $((SECONDS - start)) s: build/index_bg.wasm $(wc -c <build/index_bg.wasm) bytes ($(gzip -c build/index_bg.wasm | wc -c) gzipped)"
