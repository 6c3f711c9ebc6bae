#!/usr/bin/env bash
# Each src/ folder may include only itself and folders before it in
# util → format → model → ops → kv → runtime → sample → server → cli.
set -euo pipefail
src="${1:-$(dirname "$0")/../src}"
order=(util format model ops kv runtime sample server cli)
rank() { for i in "${!order[@]}"; do [[ "${order[$i]}" == "$1" ]] && { echo "$i"; return; }; done; echo -1; }
bad=0
for dir in "${order[@]}"; do
  r=$(rank "$dir")
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    ri=$(rank "$inc")
    if (( ri < 0 || ri > r )); then
      echo "layering violation: $file includes $inc/ (allowed: ${order[*]:0:$((r + 1))})"
      bad=1
    fi
  done < <(grep -HE '^#include "[a-z_]+/' "$src/$dir"/*.h "$src/$dir"/*.cpp 2>/dev/null || true)
done
if (( bad )); then exit 1; fi
echo "layering ok"
