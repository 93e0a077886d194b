# The eight workloads of the "Terminal model" issue, as functions for capture.sh.
# Each types into the mosh session with type_line/keys and waits with wait_for/settle.
# shellcheck shell=bash disable=SC2016

# Soft-wrapped long lines (deferred wrap, wrap continuation in the diff).
workload_wrap() {
    type_line 'printf "%s" {1..120}; echo; printf "x%.0s" {1..160}; echo END'
    wait_for 'END'
}

# Scrolling output (the scroll shortcut).
workload_seq() {
    type_line 'seq 1 3000'
    wait_for '3000'
}

# 256-colour and true-colour text (SGR forms, palette 8-15 from 90-97).
workload_colours() {
    type_line 'for i in $(seq 0 255); do printf "\033[38;5;%dm%02x" $i $i; done; printf "\033[0m\n"'
    type_line 'printf "\033[91;104mbright\033[0m \033[38;2;255;100;0mtrue\033[48;2;0;0;255mcolour\033[1;3;4;7m attrs\033[0m\n"'
    wait_for 'attrs'
}

# CJK, emoji and combining marks (widths from glibc, fallback cells).
workload_unicode() {
    type_line 'printf "CJK 日本語テキスト|\nemoji 😀👍🏽|\ncombining e\314\201 a\314\210 \314\201x|\n"; printf "%s" {1..37}; printf "日本\n"'
    wait_for 'combining'
}

# A title change (OSC 0) and an icon/title pair (OSC 1 and 2).
workload_title() {
    type_line 'printf "\033]0;tern-harness-title\007"; echo titled'
    wait_for 'titled'
}

# vi opened, edited and quit (alternate screen requests, scroll regions, insert/delete line).
workload_vi() {
    type_line 'vi -u NONE -N /tmp/tern-harness-vi.txt'
    sleep 1
    keys i
    T send-keys -t "$session" -l 'hello from the harness'
    keys Enter
    T send-keys -t "$session" -l 'second line'
    keys Escape
    sleep 0.5
    keys ':' 'w' 'q' '!' Enter
    sleep 1
    type_line 'cat /tmp/tern-harness-vi.txt; rm -f /tmp/tern-harness-vi.txt; echo VI-DONE'
    wait_for 'VI-DONE'
}

# Backspace after a full last row (MOSH-PROTOCOL.md 8.4); meant for 80x24. The sleep keeps
# the prompt away, so the capture shows where the client put the cursor (0-based column 76 in
# mosh-client, where the server believes 77).
workload_bs() {
    type_line "clear; printf '\\033[24;1H%080d\\033[24;78H'; sleep 6"
    sleep 2
}

# A resize in the middle: output, grow the window, more output.
workload_resize() {
    type_line 'seq 1 40'
    wait_for '40'
    T resize-window -t "$session" -x 100 -y 30
    sleep 1.5
    type_line 'printf "%s" {1..60}; echo; echo AFTER-RESIZE'
    wait_for 'AFTER-RESIZE'
}

all_workloads="wrap seq colours unicode title vi bs resize"
