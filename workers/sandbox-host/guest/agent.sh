# Sandbox guest agent (busybox ash), started by /init with the virtio-serial port as $1.
#
# The host sends one request at a time and waits for its answer, so reading an exact byte count
# with `head -c` can never swallow the next request. Every message is a header line whose last
# fields are byte counts, followed by exactly that many raw bytes (binary-safe, no escaping).
#
# Requests
#   P <id>                                                     ping
#   X <id> <timeout_ms> <limit> <stream 0|1> <cmd_len> <stdin_len>\n<cmd><stdin>
#   W <id> <mode|-> <path_len> <data_len>\n<path><data>
#   R <id> <limit> <path_len>\n<path>
# Answers
#   H ready                                                    once, when the agent starts
#   P <id> ok
#   O <id> <1|2> <len>\n<bytes>        stdout (1) / stderr (2) chunk, only when stream=1
#   X <id> <exit_code> <timed_out 0|1> <stdout_len> <stderr_len>\n<stdout><stderr>
#   W <id> <rc> <err_len>\n<err>
#   R <id> <rc> <len>\n<bytes>         rc 0: file bytes; 1: error text; 2: file larger than limit
#
# Output: each stream is captured through a FIFO by a reader that keeps the first limit+1 bytes
# and discards the rest, so a command may print without bound and never sees a write error or
# SIGPIPE; limit+1 lets the host tell "exactly limit" from "truncated".
PORT=$1
T=/run/agent; mkdir -p $T
exec 3<>"$PORT"
size() { stat -c %s "$1"; }
take() { if [ "$1" -gt 0 ]; then head -c "$1" <&3 > "$2"; else : > "$2"; fi; }

# send_new FILE STREAM_NO OFFSET LIMIT: send the bytes of FILE past OFFSET (up to LIMIT) as an
# O frame; prints the new offset.
send_new() {
  n=$(size "$1"); [ "$n" -gt "$4" ] && n=$4
  if [ "$n" -gt "$3" ]; then
    echo "O $id $2 $((n - $3))" >&3
    tail -c +"$(($3 + 1))" "$1" | head -c "$((n - $3))" >&3
  fi
  echo "$n"
}

run_exec() { # timeout_ms limit stream cmd_len stdin_len
  if [ "$5" -gt 0 ]; then
    take $(($4 + $5)) $T/blob
    head -c "$4" $T/blob > $T/cmd; tail -c +"$(($4 + 1))" $T/blob > $T/in; IN=$T/in
  else
    take "$4" $T/cmd; IN=/dev/null
  fi
  rm -f $T/timedout $T/fo $T/fe
  : > $T/out; : > $T/err
  mkfifo $T/fo $T/fe
  # dd, not head: head writes through stdio and would hold output back from streaming.
  { dd bs=65536 count="$(($2 + 1))" iflag=count_bytes status=none > $T/out; cat > /dev/null; } < $T/fo &
  r1=$!
  { dd bs=65536 count="$(($2 + 1))" iflag=count_bytes status=none > $T/err; cat > /dev/null; } < $T/fe &
  r2=$!
  # The command leads its own session and process group, so the whole group can be killed. It
  # gets a normal OOM score (the agent's -1000 is inherited otherwise).
  setsid sh -c 'echo 0 > /proc/self/oom_score_adj; exec sh "$1" < "$2" > "$3" 2> "$4"' \
    cmd $T/cmd "$IN" $T/fo $T/fe &
  pid=$!
  # Watchdog in its own session: at the deadline it marks the timeout and kills the command's
  # group and the readers. (busybox `wait -n` ignores jobs that exit non-zero, so it cannot race.)
  setsid sh -c 'sleep "$1"; : > "$3"; kill -KILL -"$2" "$4" "$5" 2>/dev/null' \
    wd "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))" "$pid" $T/timedout "$r1" "$r2" &
  wd=$!
  if [ "$3" = 1 ]; then
    so=0; se=0
    while :; do
      # A finished command stays a zombie until waited for: its state letter is Z.
      st=Z; read -r _ _ st _ < /proc/$pid/stat 2>/dev/null
      so=$(send_new $T/out 1 $so "$2"); se=$(send_new $T/err 2 $se "$2")
      [ "$st" = Z ] && break
      usleep 50000
    done
  fi
  wait "$pid"; rc=$?
  # Processes the command left in its group die with it; the readers then see end of file.
  kill -KILL -"$pid" 2>/dev/null
  wait "$r1" "$r2" 2>/dev/null
  kill -KILL -"$wd" 2>/dev/null || kill -KILL "$wd" 2>/dev/null
  wait "$wd" 2>/dev/null
  to=0; [ -e $T/timedout ] && to=1
  echo "X $id $rc $to $(size $T/out) $(size $T/err)" >&3
  cat $T/out $T/err >&3
}

run_write() { # mode path_len data_len
  take $(($2 + $3)) $T/blob
  head -c "$2" $T/blob > $T/path; p=$(cat $T/path)
  { mkdir -p "$(dirname "$p")" && tail -c +"$(($2 + 1))" $T/blob > "$p" && \
    { [ "$1" = - ] || chmod "$1" "$p"; }; } 2> $T/err
  rc=$?
  echo "W $id $rc $(size $T/err)" >&3; cat $T/err >&3
}

run_read() { # limit path_len
  take "$2" $T/path; p=$(cat $T/path)
  if [ -d "$p" ]; then
    echo "$p: is a directory" > $T/err; echo "R $id 1 $(size $T/err)" >&3; cat $T/err >&3
  elif head -c "$(($1 + 1))" "$p" > $T/data 2> $T/err; then
    n=$(size $T/data)
    if [ "$n" -gt "$1" ]; then
      s=$(size "$p"); echo "R $id 2 ${#s}" >&3; printf %s "$s" >&3
    else
      echo "R $id 0 $n" >&3; cat $T/data >&3
    fi
  else
    echo "R $id 1 $(size $T/err)" >&3; cat $T/err >&3
  fi
}

echo "H ready" >&3
cd /root
fails=0
while true; do
  if ! read -r op id a b c d e <&3; then
    # The port reads end-of-file while no host is connected. The host connects before the guest
    # boots, so a lasting EOF means the host process died: power off rather than linger.
    fails=$((fails + 1)); [ $fails -gt 100 ] && poweroff -f
    usleep 20000; continue
  fi
  fails=0
  case "$op" in
    P) echo "P $id ok" >&3 ;;
    X) run_exec "$a" "$b" "$c" "$d" "$e" ;;
    W) run_write "$a" "$b" "$c" ;;
    R) run_read "$a" "$b" ;;
    *) echo "E $id bad-request" >&3 ;;
  esac
done
