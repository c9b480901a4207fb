#!/bin/bash
# The completion scripts as `cmake --install` lays them out, found and run by the real shells the
# way a user's shell finds them: bash through bash-completion's loader (XDG_DATA_DIRS), zsh
# through its own default $fpath. Each prefix is installed with DESTDIR into a temporary root, so
# the paths are those of a real install under /usr/local (cmake's default) and /usr (the .deb).
# Needs zsh (with zsh/zpty) and bash-completion: ctest labels needs-zsh, needs-bash-completion.
set -euo pipefail
build=$(dirname "$VRAMLAB_BIN_DIR")
source "${VRAMLAB_SOURCE_DIR:?}/tests/support/checks.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash_completion=/usr/share/bash-completion/bash_completion
[[ -r $bash_completion ]] || { echo "bash-completion is not installed ($bash_completion)"; exit 1; }
command -v zsh > /dev/null || { echo "zsh is not installed"; exit 1; }

# bash_complete ROOT LINE: the candidates bash offers for LINE (cursor at its end), one per line,
# with vramlab's completion loaded on demand by bash-completion from ROOT's data directories.
bash_complete() {
  local root=$1 line=$2
  env -i PATH=/usr/bin:/bin HOME="$tmp/home" \
    XDG_DATA_DIRS="$root/usr/local/share:$root/usr/share" bash --norc --noprofile -c '
    source "$1" && __load_completion vramlab || { echo "no completion for vramlab found"; exit 1; }
    COMP_LINE=$2; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    $(complete -p vramlab | sed -n "s/.*-F \([^ ]*\).*/\1/p") vramlab "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
    printf "%s\n" "${COMPREPLY[@]}"' bash "$bash_completion" "$line"
}

# zsh_complete ROOT OUT LINE...: zsh's completions of each LINE, into OUT/1, OUT/2, ...
# (zsh_complete.zsh says what each holds).
zsh_complete() {
  mkdir -p "$2"
  timeout 60 env -i PATH=/usr/bin:/bin HOME="$tmp/home" TERM=dumb \
    zsh -f "$VRAMLAB_SOURCE_DIR/tests/install/zsh_complete.zsh" "$@"
}

has_line() { grep -qxF -- "$2" "$1" || { echo "no line \"$2\" in:"; cat "$1"; return 1; }; }
lacks_line() { ! grep -qxF -- "$2" "$1" || { echo "unexpected line \"$2\" in:"; cat "$1"; return 1; }; }

for prefix in /usr/local /usr; do
  root="$tmp/root${prefix//\//-}"
  DESTDIR="$root" cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; exit 1; }
  zsh_dir=$([[ $prefix == /usr ]] && echo vendor-completions || echo site-functions)
  check "$prefix: _vramlab in share/zsh/$zsh_dir" test -s "$root$prefix/share/zsh/$zsh_dir/_vramlab"

  bash_complete "$root" "vramlab submit --preset q" > "$tmp/bash-preset" 2>&1 || true
  check "$prefix: bash completes --preset q to the qwen presets" \
    bash -c "grep -qx qwen2.5-7b '$tmp/bash-preset' && grep -qx qwen3-8b '$tmp/bash-preset' &&
             ! grep -vq '^qwen' '$tmp/bash-preset' || { cat '$tmp/bash-preset'; exit 1; }"
  bash_complete "$root" "vramlab subm" > "$tmp/bash-command" 2>&1 || true
  check "$prefix: bash completes a command name" has_line "$tmp/bash-command" submit

  zsh_out="$tmp/zsh${prefix//\//-}"
  zsh_complete "$root" "$zsh_out" "vramlab submit --preset q" "vramlab subm" "vramlab submit --dtype " \
    > "$tmp/zsh.log" 2>&1 || true
  for n in 1 2 3; do [[ -s $zsh_out/$n ]] || { echo "zsh wrote no result $n:"; cat "$tmp/zsh.log"; touch "$zsh_out/$n"; }; done
  check "$prefix: zsh loads _vramlab from the installed file" \
    has_line "$zsh_out/2" "FROM:$root$prefix/share/zsh/$zsh_dir/_vramlab"
  check "$prefix: zsh offers the qwen presets for --preset q" \
    bash -c "grep -qx qwen2.5-7b '$zsh_out/1' && grep -qx qwen3-8b '$zsh_out/1' || { cat '$zsh_out/1'; exit 1; }"
  check "$prefix: zsh offers no other preset for --preset q" lacks_line "$zsh_out/1" tiny
  check "$prefix: zsh completes a command name" has_line "$zsh_out/2" "BUFFER:vramlab submit "
  check "$prefix: zsh completes an enum flag's values" \
    bash -c "grep -qx bf16 '$zsh_out/3' && grep -qx fp32 '$zsh_out/3' || { cat '$zsh_out/3'; exit 1; }"
done

checks_done "completion install"
