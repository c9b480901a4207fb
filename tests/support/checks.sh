# Sourced by the shell tests that run a list of independent checks: `check NAME COMMAND...` runs
# COMMAND, prints "ok" or "FAIL" with its output, and counts failures in $failures, so one run
# reports every failing check rather than the first; `checks_done` ends the script with the verdict.
failures=0
check() {
  local name=$1; shift
  if out=$("$@" 2>&1); then
    echo "ok   $name"
  else
    echo "FAIL $name"; echo "$out" | sed 's/^/     /'
    failures=$((failures + 1))
  fi
}
checks_done() {  # checks_done WHAT: exits 1 if any check failed
  if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
  echo "all $1 checks passed"
}
