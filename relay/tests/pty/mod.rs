//! `tern-relay record` on a pty of the test's own, run as mosh-server runs it: the session leader
//! of the pty's other side, with it as its controlling terminal (`setsid --ctty`). Shared by the
//! recorder's tests (`mod pty;`).

// Each test crate uses its part.
#![allow(dead_code)]

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::process::{Child, Command, Stdio};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// A winsize of `cols` × `rows` cells and no pixel size (as mosh-server sets it).
pub fn cells(cols: u16, rows: u16) -> Winsize {
    Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 }
}

/// A pty pair of `size`: (the side mosh-server would hold, the recorder's).
fn pair(size: Winsize) -> (OwnedFd, OwnedFd) {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave: OwnedFd = File::options()
        .read(true)
        .write(true)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
        .unwrap()
        .into();
    tcsetwinsize(&master, size).unwrap();
    (master, slave)
}

/// Starts `tern-relay record` followed by what `args` adds (its options, `--`, the command, an
/// environment, a directory) on a new pty of `size`: the recorder, and the pty's side that
/// mosh-server would hold (read its output there; resize the pty with it).
pub fn start_recorder(size: Winsize, args: impl FnOnce(&mut Command)) -> (Child, File) {
    let (master, slave) = pair(size);
    let mut command = Command::new("setsid");
    command.arg("--ctty").arg(env!("CARGO_BIN_EXE_tern-relay")).arg("record");
    args(&mut command);
    let child = command
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("tern-relay record starts");
    (child, File::from(master))
}
