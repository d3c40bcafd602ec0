#!/usr/bin/env bash
# test_config_doc - every setting in the code is documented in docs/config.md: the table
# between the settings markers must equal what the code's settings table renders.
set -uo pipefail
cd "$(dirname "$0")/../.."
echo "1..1"
want=$(bin/paycb-migrate --config-doc)
have=$(sed -n '/<!-- settings:begin -->/,/<!-- settings:end -->/p' docs/config.md | sed '1d;$d')
if [ "$want" = "$have" ]; then
	echo "ok 1 - docs/config.md documents every setting exactly as the code defines it"
else
	echo "not ok 1 - docs/config.md differs from the settings table (run make docs)"
	diff <(echo "$want") <(echo "$have") | head -20 | sed 's/^/# /'
	exit 1
fi
