# zsh -f zsh_complete.zsh ROOT OUT LINE...: types each LINE into an interactive zsh on a pty (no
# startup files) whose $fpath is zsh's default one under ROOT, then the real one (for compinit's
# own functions); presses a key bound to complete-word and writes OUT/N (N = 1, 2, ...):
#   BUFFER:<the line after completing>
#   FROM:<the file _vramlab autoloads from>
#   then every match offered, one per line.
zmodload zsh/zpty || exit 1
root=$1 out=$2
shift 2
zpty vl zsh -f -i
zpty -w vl "fpath=(${(q)root}\${^fpath} \$fpath); autoload -U compinit; compinit -u -D"
# compadd is wrapped to record what each call adds (unless it only collects, -O/-A/-D).
zpty -w vl 'typeset -ga _vl_hits'
zpty -w vl 'compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a hits; builtin compadd -A hits "$@"; _vl_hits+=($hits); builtin compadd "$@"; }'
zpty -w vl '_vl_capture() { local -a found; _vl_hits=(); zle complete-word; found=(${^fpath}/_vramlab(N)); print -rl -- "BUFFER:$BUFFER" "FROM:$found[1]" $_vl_hits > $_vl_out; BUFFER=; }'
zpty -w vl 'zle -N _vl_capture; bindkey "^T" _vl_capture'
integer i=0
for line in "$@"; do
  i+=1
  zpty -w vl "_vl_out=${(q)out}/$i"
  zpty -w -n vl "$line"$'\x14'
  for t in {1..200}; do
    [[ -s $out/$i ]] && break
    sleep 0.1
  done
done
zpty -d vl
