#!/usr/bin/env bash
# Rebuild three.min.js: the parts of three.js the replay viewer uses, from the npm registry, bundled
# into one minified script that defines the global THREE (no network is needed when a page is viewed).
# Run from this folder after changing which THREE.* names viewer.js uses; needs node and npm.
set -euo pipefail
VERSION=0.187.0
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
names=$(grep -o "THREE\.[A-Za-z0-9]*" viewer.js | sed 's/THREE\.//' | sort -u | paste -sd, -)
(cd "$work" && npm init -y >/dev/null && npm install --silent "three@$VERSION" esbuild@0.28.2 >/dev/null)
echo "export { $names } from 'three';" > "$work/entry.js"
{
  echo "/* three.js $VERSION (https://threejs.org, MIT License: see three.LICENSE), the names used by"
  echo "   nitro's replay viewer, bundled with esbuild by bundle_three.sh. */"
  "$work/node_modules/.bin/esbuild" "$work/entry.js" --bundle --minify --format=iife --global-name=THREE \
    --legal-comments=none --log-level=warning
} > three.min.js
cp "$work/node_modules/three/LICENSE" three.LICENSE
echo "$VERSION" > three.VERSION
echo "three.min.js: $(wc -c < three.min.js) bytes ($names)"
