#!/usr/bin/env bash
# The benchmark command (`npm run bench`): set-up, a release build, then bench/bench.mjs against
# the Worker in local workerd (Miniflare). Prints figures; asserts nothing. Options are
# environment variables documented at the top of bench/bench.mjs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SA_ROOT"
bash scripts/setup.sh
SA_BUILD_PROFILE=release SA_SKIP_BUILD_IF_FRESH=1 bash scripts/build.sh
exec node bench/bench.mjs "$@"
