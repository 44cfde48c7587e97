#!/usr/bin/env bash
# Interactive `kipp chat` in a real terminal: a detached tmux session (private server socket,
# fixed size, TERM set) driven with send-keys and read with capture-pane. Checks the prompt,
# streamed answers, libedit history, Ctrl-C at the prompt (clears the line), Ctrl-C during a
# long answer (stops it, the prompt comes back, the process lives on), /stats, /reset, and
# Ctrl-D (the process exits with status 0). Every wait has a timeout; tmux is killed on exit.
# A missing tmux is a failure, never a skip.
# Usage: chat_tmux.sh KIPP MODEL WORK_DIR
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 KIPP MODEL WORK_DIR" >&2
  exit 2
fi
kipp="$1"
model="$2"
work="$3"
if ! command -v tmux >/dev/null 2>&1; then
  echo "chat_tmux: FAIL: tmux is not installed (scripts/setup.sh installs it)"
  exit 1
fi
mkdir -p "$work"
export TERM=xterm
socket="$work/chat_tmux.$$.sock"
session="kippchat$$"
exit_file="$work/chat_tmux.$$.exit"

t() { timeout 10 tmux -S "$socket" "$@"; }
cleanup() {
  t kill-session -t "$session" >/dev/null 2>&1 || true
  t kill-server >/dev/null 2>&1 || true
  rm -f "$socket" "$exit_file"
}
trap cleanup EXIT

pane() { t capture-pane -p -J -t "$session" -S -500 2>/dev/null || true; }
# The last non-empty line of the pane (trailing blanks removed).
last_line() { pane | sed -e 's/[[:space:]]*$//' -e '/^$/d' | tail -n 1; }
fail() {
  echo "chat_tmux: FAIL: $*"
  echo "----- pane -----"
  pane
  echo "----------------"
  exit 1
}
# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s.
wait_until() {
  local seconds="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.2
  done
}
pane_has() { pane | grep -Eq -- "$1"; }
at_empty_prompt() { [ "$(last_line)" = ">>>" ]; }
prompt_count() { pane | grep -c '^>>>' || true; }
more_prompts_than() { [ "$(prompt_count)" -gt "$1" ]; }
exited() { [ -s "$exit_file" ]; }
keys() { t send-keys -t "$session" "$@"; }
type_line() { t send-keys -t "$session" -l -- "$1"; }

# start MAX_TOKENS: kipp chat in a fresh session; its exit status lands in $exit_file.
start() {
  rm -f "$exit_file"
  t -f /dev/null new-session -d -s "$session" -x 120 -y 50 \
    "TERM=xterm '$kipp' chat -m '$model' --no-verify --temp 0 --max-tokens $1; echo \$? > '$exit_file'"
  wait_until 60 "the banner" pane_has "/help lists the commands"
  wait_until 30 "the first prompt" at_empty_prompt
}
# quit: Ctrl-D at the prompt; the process must exit with status 0.
quit() {
  keys C-d
  wait_until 30 "kipp to exit after Ctrl-D" exited
  [ "$(cat "$exit_file")" = "0" ] || fail "kipp exited with status $(cat "$exit_file") after Ctrl-D"
  t kill-session -t "$session" >/dev/null 2>&1 || true
}

# --- Part 1: short answers (8 tokens) -----------------------------------------------------
start 8
before=$(prompt_count)
type_line "Hello there"
keys Enter
wait_until 60 "the answer and the next prompt" more_prompts_than "$before"
wait_until 10 "an empty prompt after the answer" at_empty_prompt
# The answer is the text between the typed line and the next prompt.
answer=$(pane | sed -e 's/[[:space:]]*$//' | awk '/^>>> Hello there$/ { on = 1; next } on && /^>>>/ { exit } on && NF { print }')
[ -n "$answer" ] || fail "no answer text between the user line and the next prompt"
echo "chat_tmux: answer streamed: $(echo "$answer" | head -n 1)"

# History (libedit): Up recalls the last line; Ctrl-C at the prompt clears it.
keys Up
wait_until 10 "history to recall the last line" sh -c '[ "$(tmux -S "$0" capture-pane -p -J -t "$1" | sed -e "s/[[:space:]]*\$//" -e "/^\$/d" | tail -n 1)" = ">>> Hello there" ]' "$socket" "$session"
keys C-c
wait_until 10 "a fresh prompt after Ctrl-C" at_empty_prompt
type_line "this line is dropped"
wait_until 10 "the typed line" pane_has '^>>> this line is dropped'
keys C-c
wait_until 10 "a fresh prompt after Ctrl-C" at_empty_prompt
exited && fail "Ctrl-C at the prompt ended kipp"
echo "chat_tmux: Ctrl-C at the prompt cleared the line"

# /stats: one turn (user + assistant) in the context; the dropped line never became a turn.
type_line "/stats"
keys Enter
wait_until 10 "/stats output" pane_has '^context: [1-9][0-9]* of [0-9]+ tokens \(2 messages\)'
wait_until 10 "/stats last turn" pane_has '^last turn: 10 prompt tokens evaluated \(0 reused from the cache\)'
wait_until 10 "the prompt after /stats" at_empty_prompt
type_line "/reset"
keys Enter
wait_until 10 "/reset" pane_has '^conversation cleared'
type_line "/stats"
keys Enter
wait_until 10 "/stats after /reset" pane_has '^context: 0 of [0-9]+ tokens \(0 messages\)'
wait_until 10 "the prompt after /stats" at_empty_prompt
echo "chat_tmux: /stats and /reset work"
quit
echo "chat_tmux: Ctrl-D quit with status 0"

# --- Part 2: Ctrl-C during a long answer (up to 2000 tokens) ------------------------------
start 2000
before=$(prompt_count)
type_line "Hello there"
keys Enter
# Streaming: answer text shows while the answer is still running (no prompt yet).
streaming() {
  local text
  text=$(pane | sed -e 's/[[:space:]]*$//' | awk '/^>>> Hello there$/ { on = 1; next } on && NF { print }')
  [ -n "$text" ]
}
wait_until 60 "streamed text of the long answer" streaming
more_prompts_than "$before" && fail "the long answer finished before Ctrl-C (expected it to still be streaming)"
keys C-c
wait_until 30 "the answer to stop after Ctrl-C" pane_has '^\[interrupted\]'
wait_until 10 "the prompt after the interrupted answer" at_empty_prompt
exited && fail "Ctrl-C during the answer ended kipp"
echo "chat_tmux: Ctrl-C stopped the answer and the prompt came back"
# The partial answer is kept: the conversation has both messages and the turn was cancelled.
type_line "/stats"
keys Enter
wait_until 10 "/stats after the interrupted answer" pane_has '^context: [1-9][0-9]* of [0-9]+ tokens \(2 messages\)'
wait_until 10 "/stats finish reason" pane_has '^last turn: .* generated \(cancelled\)'
wait_until 10 "the prompt after /stats" at_empty_prompt
quit
echo "chat_tmux: all checks passed"
