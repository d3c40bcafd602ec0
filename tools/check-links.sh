#!/usr/bin/env bash
# tools/check-links.sh - proves that every test's TEST_LIBS_ line in the Makefile is exact
# (`make check-links` runs it; not part of make test, it takes about a minute).
#
# The Makefile already links each test with only the archives its line names, so a line that
# lacks something fails `make`. This checks the other way: for every test and every archive
# on its line, the test linked without that archive must fail. A line naming an archive the
# test does not use is reported, and the script exits 1.
#
# usage: (lines "bin obj archive..." on stdin) tools/check-links.sh 'CC LDFLAGS' 'LDLIBS'
set -uo pipefail
cc=$1 libs=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
tests=0 links=0 bad=0
while read -r bin obj archives; do
	tests=$((tests + 1))
	# shellcheck disable=SC2086 # the compiler line and the libraries are word lists
	if ! $cc -o "$tmp/t" "$obj" $archives $libs 2>"$tmp/err"; then
		echo "FAIL $bin does not link with its own line:"
		sed 's/^/    /' "$tmp/err" | head -5
		bad=$((bad + 1))
		continue
	fi
	for drop in $archives; do
		rest=$(for a in $archives; do [ "$a" = "$drop" ] || printf '%s ' "$a"; done)
		links=$((links + 1))
		# shellcheck disable=SC2086
		if $cc -o "$tmp/t" "$obj" $rest $libs 2>/dev/null; then
			name=${drop##*/lib}
			echo "FAIL $bin links without ${name%.a}: TEST_LIBS_${bin##*/} names it needlessly"
			bad=$((bad + 1))
		fi
	done
done
echo "check-links: $tests tests, $links links without one archive, $bad wrong, $(($(date +%s) - start)) s"
[ "$bad" -eq 0 ] && [ "$tests" -gt 0 ]
