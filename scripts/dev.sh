#!/usr/bin/env bash
# Runs the service locally: set-up, a dev token in .dev.vars (created once), then `wrangler dev`
# with local DO/R2 state persisted in .wrangler/state. Environment:
#   PORT (8787)            the HTTP port, on 127.0.0.1
#   INSPECTOR_PORT (9230)  wrangler's devtools port; moved off 9229 so a `node --inspect`
#                          process (or a second wrangler) does not clash with it
#   SA_BUILD_PROFILE       release (default) or dev (faster rebuilds, see scripts/build.sh)
# Under wrangler dev the [build] step does nothing while build/ is newer than the sources (see
# scripts/build.sh); edits under src/ or migrations/ rebuild (wrangler watches them) and reload.
# Extra arguments go to wrangler dev.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SA_ROOT"
bash scripts/setup.sh

# .dev.vars is wrangler's local secrets file (git-ignored); never overwrite a token already set.
if [ ! -f .dev.vars ] || ! grep -q '^API_TOKEN=' .dev.vars; then
  [ -s .dev.vars ] && [ -n "$(tail -c1 .dev.vars)" ] && echo >>.dev.vars # keep lines separate
  echo "API_TOKEN=dev-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" >>.dev.vars
  chmod 600 .dev.vars
  sa_log "dev: wrote a new API_TOKEN to .dev.vars"
fi
# TOKEN_SECRET signs scoped tokens (POST /agents/{agent}/tokens): the console gets one of
# those, never the admin token.
if ! grep -q '^TOKEN_SECRET=' .dev.vars; then
  [ -n "$(tail -c1 .dev.vars)" ] && echo >>.dev.vars
  echo "TOKEN_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >>.dev.vars
  sa_log "dev: wrote a new TOKEN_SECRET to .dev.vars"
fi
token="$(grep '^API_TOKEN=' .dev.vars | head -1 | cut -d= -f2-)"
port="${PORT:-8787}"
cat <<MSG

  API token (from .dev.vars): $token
  try:  curl -s -H "Authorization: Bearer $token" -H 'content-type: application/json' \\
          -d '{"name":"first"}' http://127.0.0.1:$port/agents/me/sessions
        curl -s -H "Authorization: Bearer $token" http://127.0.0.1:$port/agents/me/sessions
  a scoped token for the console (never give a browser the admin token):
        curl -s -H "Authorization: Bearer $token" -H 'content-type: application/json' \
          -d '{"scope":"write","ttlSeconds":86400}' http://127.0.0.1:$port/agents/me/tokens
        then open http://127.0.0.1:$port/#agent=me&token=<the token it printed>

MSG
exec npx wrangler dev --persist-to .wrangler/state --ip 127.0.0.1 --port "$port" \
  --inspector-port "${INSPECTOR_PORT:-9230}" "$@"
