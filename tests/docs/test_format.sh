#!/usr/bin/env bash
# test_format - every C source and header follows the checked-in .clang-format, so no change
# mixes a reformatting with its real content. `make format` fixes what this reports.
set -uo pipefail
cd "$(dirname "$0")/../.."
echo "1..1"
if ! command -v clang-format >/dev/null 2>&1; then
	echo "not ok 1 - clang-format is not installed (deploy/local/deps.sh installs it)"
	exit 1
fi
bad=()
while IFS= read -r f; do
	clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(find common chan ingest processor retrier reconciler tools tests -name '*.[ch]' | sort)
if [ ${#bad[@]} -eq 0 ]; then
	echo "ok 1 - every C file follows .clang-format"
else
	echo "not ok 1 - ${#bad[@]} C files differ from .clang-format (run make format)"
	printf '# %s\n' "${bad[@]}" | head -20
	exit 1
fi
