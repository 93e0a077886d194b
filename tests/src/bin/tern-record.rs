//! `tern-relay record` under another name, so that this package's tests can run the pty recorder
//! between mosh-server and the shell (`tern-record --history-dir DIR --session ID -- COMMAND...`).

fn main() -> std::process::ExitCode {
    tern_relay::history::record::main(std::env::args_os().skip(1))
}
