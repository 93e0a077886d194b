#!/usr/bin/env python3
"""The chaos test's shell (tests/browser/chaos/chaos.mjs): the program the session runs instead of a
login shell. It puts its terminal in raw mode and appends every byte it reads from it to
DIR/typed-PID.log, unchanged and at once, so the test can compare what arrived with what its
typist typed. It echoes what it read (the screen keeps changing, as in a real session) and runs
`tern send PATH` when asked through its FIFO DIR/control-PID (`send ID PATH` lines), recording the
exit status in DIR/send-ID.rc. Its files are its own (PID: its process id, which it prints on the
screen): the relay's warm spare runs this same program ahead of any page, and a second reader of
one FIFO would take the test's commands away from the session's shell.

    python3 chaos-shell.py DIR
"""
import os
import select
import subprocess
import sys
import termios
import tty


def main():
    out = sys.argv[1]
    tty_fd = sys.stdin.fileno()
    tty.setraw(tty_fd, termios.TCSANOW)
    pid = os.getpid()
    log = os.open(os.path.join(out, f"typed-{pid}.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    control_path = os.path.join(out, f"control-{pid}")
    os.mkfifo(control_path, 0o600)
    # Read-write, so the FIFO never reports end-of-file when a writer goes away.
    control = os.open(control_path, os.O_RDWR | os.O_NONBLOCK)
    screen = sys.stdout.fileno()
    os.write(screen, b"chaos-shell ready pid=%d\r\n" % pid)
    total = 0
    pending = b""
    sends = {}
    while True:
        ready, _, _ = select.select([tty_fd, control], [], [], 0.2)
        if tty_fd in ready:
            data = os.read(tty_fd, 4096)
            if not data:
                return
            os.write(log, data)
            total += len(data)
            os.write(screen, data.replace(b"\r", b"\r\n"))
        if control in ready:
            pending += os.read(control, 4096)
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                kind, ident, path = line.decode().split(" ", 2)
                if kind == "send":
                    result = open(os.path.join(out, f"send-{ident}.out"), "w")
                    try:
                        sends[ident] = subprocess.Popen(
                            ["tern", "send", path], stdin=subprocess.DEVNULL, stdout=result, stderr=result
                        )
                    except OSError as e:
                        # Said in the send's files (the test prints them), not a dead shell: a
                        # shell that died here would look like a lost session.
                        result.write(f"chaos-shell: cannot run tern: {e}\n")
                        result.close()
                        with open(os.path.join(out, f"send-{ident}.rc"), "w") as f:
                            f.write("127")
        for ident, proc in list(sends.items()):
            if proc.poll() is not None:
                with open(os.path.join(out, f"send-{ident}.rc"), "w") as f:
                    f.write(str(proc.returncode))
                del sends[ident]
                os.write(screen, b"\r\n[tern send %s: exit %d, %d bytes read so far]\r\n" % (ident.encode(), proc.returncode, total))


if __name__ == "__main__":
    main()
