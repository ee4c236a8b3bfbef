#!/usr/bin/env bash
# Every C source and header is clang-format clean (kernel style, .clang-format).
set -u
cd "$(dirname "$0")/.." || exit 1
bad=0
while IFS= read -r f; do
	if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not clang-formatted: $f (clang-format -i $f)"
		bad=1
	fi
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
exit $bad
