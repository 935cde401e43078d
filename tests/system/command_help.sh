#!/usr/bin/env bash
# `trainer CMD --help` and `-h` print CMD's own usage on stdout and exit 0, for every command
# `trainer --help` lists; an unknown argument still fails, naming the command's --help.
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
"$trainer" --help > "$dir/top" || fail "trainer --help exited $?"
commands=$(sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' "$dir/top" | sort -u)
[ "$(echo $commands)" = "calibrate export generate hf-config plan prepare-data report train" ] || fail "commands listed: $commands"
for command in $commands; do
  for flag in --help -h; do
    "$trainer" "$command" "$flag" > "$dir/out" 2> "$dir/err" || fail "$command $flag exited $?"
    head -1 "$dir/out" | grep -q "^usage: trainer $command " ||
      fail "$command $flag printed: $(head -1 "$dir/out")"
    [ ! -s "$dir/err" ] || fail "$command $flag wrote to stderr: $(cat "$dir/err")"
  done
  if "$trainer" "$command" --no-such-flag > /dev/null 2> "$dir/err"; then
    fail "$command accepted --no-such-flag"
  fi
  grep -q -- "--help" "$dir/err" || fail "$command's error does not point to --help: $(cat "$dir/err")"
  echo "$command: usage on --help and -h, unknown flag refused"
done
echo PASS
