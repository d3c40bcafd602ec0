#!/usr/bin/env bash
# test_decision_doc - docs/processor.md carries the processor's decision table exactly as the
# code defines it: the table between the decision markers must equal what the rule table in
# processor/processor_decide.c renders (bin/tests/unit/test_decide --table).
set -uo pipefail
cd "$(dirname "$0")/../.."
echo "1..1"
want=$(bin/tests/unit/test_decide --table)
have=$(sed -n '/<!-- decision:begin -->/,/<!-- decision:end -->/p' docs/processor.md | sed '1d;$d')
if [ -n "$want" ] && [ "$want" = "$have" ]; then
	echo "ok 1 - docs/processor.md's decision table is the code's rule table"
else
	echo "not ok 1 - docs/processor.md's decision table differs from the code (run make docs)"
	diff <(echo "$want") <(echo "$have") | head -20 | sed 's/^/# /'
	exit 1
fi
