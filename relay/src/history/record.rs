//! `tern-relay record`: the pty recorder between mosh-server and the shell (for the session's
//! history), so that every line a program prints on the main screen is kept, however fast it
//! comes.
//!
//! ```text
//!  mosh-server ── its pty ── tern-relay record ── a pty of its own ── the shell
//!                               │ output also into the core's Emulator: rows that scroll off the
//!                               ▼ top of the main screen → HistoryLines → history file (0600)
//! ```
//!
//! It must be invisible: the outer terminal is put in raw mode (every byte passes as it is, both
//! ways; nothing is intercepted), the shell gets the same environment (TERM included) and a pty of
//! the outer one's size, resized when that one is (SIGWINCH), and is the session leader with that
//! pty as its controlling terminal (`setsid --ctty`), so job control works as without it. The
//! recorder exits with the shell's status.
//!
//! Images: SIXEL, iTerm2 and kitty images the programs print (which mosh-server would drop) are
//! lifted out of the output before it goes on (`tern::images::Lifter`): mosh-server and the
//! history get, in their place, the cursor moves a terminal drawing them would make, and the
//! images go to the session's image store ([`super::images`], docs/IMAGES.md) with their place
//! in the history. `--no-images` lets every byte through as it came.
//!
//! Usage: `tern-relay record --history-dir DIR --session ID --history-lines N
//! [--history-bytes B] [--images-quota B] [--image-max-bytes B] [--no-images] [--cast-bytes B]
//! -- COMMAND...` (`--cast-bytes`: also record the output as an asciicast file, [`super::cast`])
//!
//! Its memory is bounded whatever the shell prints: a line longer than
//! `tern::terminal::MAX_HISTORY_LINE_BYTES` keeps its start and ends with a mark saying how many
//! bytes were cut (output with no newline, `head -c 4G /dev/zero | tr '\0' a`, would otherwise
//! grow it until the OOM killer ended it and the session with it), and each history file is
//! bounded in bytes (`--history-bytes`, default [`DEFAULT_MAX_BYTES`]) as well as in lines.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{
    OptionalActions, Winsize, isatty, tcgetattr, tcgetwinsize, tcsetattr, tcsetwinsize,
};
use tern::images::{
    DEFAULT_MAX_IMAGE_BYTES, Dropped, Geometry, LiftedImage, Lifter, LifterConfig, NotifyLimit,
    Piece, Signal, anchor, link_start, link_text, marker,
};
use tern::relay_proto::PageSignal;
use tern::terminal::Pos;
use tern::terminal::{Emulator, HistoryLines, Size};

use super::images::{DEFAULT_QUOTA, ImageStore};
use super::{DEFAULT_MAX_BYTES, HistoryWriter};

/// What `record` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordArgs {
    pub history_dir: PathBuf,
    pub session: String,
    pub max_lines: usize,
    /// Bytes per history file.
    pub max_bytes: u64,
    /// Lift images out of the output (`--no-images` turns it off).
    pub images: bool,
    /// Bytes of images the session keeps (oldest dropped first).
    pub images_quota: u64,
    /// Most encoded bytes of one image.
    pub image_max_bytes: usize,
    /// `--cast-bytes B`: record the output as an asciicast file of at most B bytes
    /// ([`super::cast`]; the relay's `--record-sessions`).
    pub cast_bytes: Option<u64>,
    pub command: Vec<OsString>,
}

impl RecordArgs {
    /// Reads the arguments after `record`.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<RecordArgs, String> {
        let mut args = args.into_iter();
        let (mut dir, mut session, mut max_lines) = (None, None, 100_000usize);
        let mut max_bytes = DEFAULT_MAX_BYTES;
        let mut login = false;
        let (mut images, mut images_quota) = (true, DEFAULT_QUOTA);
        let mut image_max_bytes = DEFAULT_MAX_IMAGE_BYTES;
        let mut cast_bytes = None;
        while let Some(a) = args.next() {
            match a.to_str() {
                Some("--") => break,
                Some("--login") => login = true,
                Some("--history-dir") => dir = args.next().map(PathBuf::from),
                Some("--session") => session = args.next().and_then(|s| s.into_string().ok()),
                Some("--history-lines") => {
                    max_lines = args
                        .next()
                        .and_then(|n| n.to_str()?.parse().ok())
                        .ok_or("--history-lines wants a number")?;
                }
                Some("--history-bytes") => {
                    max_bytes = args
                        .next()
                        .and_then(|n| n.to_str()?.parse().ok())
                        .ok_or("--history-bytes wants a number")?;
                }
                Some("--no-images") => images = false,
                Some("--cast-bytes") => {
                    cast_bytes = Some(
                        args.next()
                            .and_then(|n| n.to_str()?.parse().ok())
                            .ok_or("--cast-bytes wants a number")?,
                    );
                }
                Some("--images-quota") => {
                    images_quota = args
                        .next()
                        .and_then(|n| n.to_str()?.parse().ok())
                        .ok_or("--images-quota wants a number")?;
                }
                Some("--image-max-bytes") => {
                    image_max_bytes = args
                        .next()
                        .and_then(|n| n.to_str()?.parse().ok())
                        .ok_or("--image-max-bytes wants a number")?;
                }
                _ => return Err(format!("unknown argument {a:?}")),
            }
        }
        let mut command: Vec<OsString> = args.collect();
        if login && command.is_empty() {
            // As mosh-server does without a command: the user's shell, as a login shell.
            command = vec![login_shell(), "-l".into()];
        }
        match (dir, session, command.is_empty()) {
            (Some(history_dir), Some(session), false) if crate::ids::valid_id(&session) => {
                Ok(RecordArgs {
                    history_dir,
                    session,
                    max_lines,
                    max_bytes,
                    images,
                    images_quota,
                    image_max_bytes,
                    cast_bytes,
                    command,
                })
            }
            _ => Err("usage: tern-relay record --history-dir DIR --session HEX-ID \
                      [--history-lines N] [--history-bytes B] [--images-quota B] \
                      [--image-max-bytes B] [--no-images] [--cast-bytes B] (--login | -- COMMAND...)"
                .into()),
        }
    }
}

/// `tern-relay record ARGS` (ARGS after `record`): runs the recorder, exits as its command did.
pub fn main(args: impl IntoIterator<Item = OsString>) -> std::process::ExitCode {
    match RecordArgs::parse(args) {
        Ok(a) => match run(&a) {
            Ok(code) => std::process::ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                eprintln!("tern-relay record: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("tern-relay record: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// The user's shell: `$SHELL` (mosh-server passes the relay's environment on), else the passwd
/// entry's, else `/bin/sh`.
fn login_shell() -> OsString {
    if let Some(shell) = std::env::var_os("SHELL").filter(|s| !s.is_empty()) {
        return shell;
    }
    let uid = rustix::process::getuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2] == uid && !f[6].is_empty())
        .map_or_else(|| "/bin/sh".into(), |f| f[6].into())
}

/// Runs the command under the recorder; returns its exit code.
pub fn run(args: &RecordArgs) -> io::Result<i32> {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let slave_path = ptsname(&master, Vec::new())?;
    let slave: OwnedFd = File::options()
        .read(true)
        .write(true)
        .open(std::ffi::OsStr::from_bytes(slave_path.as_bytes()))?
        .into();
    let stdin = io::stdin();
    let outer_is_tty = isatty(stdin.as_fd());
    let size = if outer_is_tty { tcgetwinsize(stdin.as_fd()).ok() } else { None };
    let size = size.unwrap_or(Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 });
    tcsetwinsize(&slave, size)?;

    // Raw outer terminal: the inner pty does the line discipline, once.
    let saved = if outer_is_tty {
        let t = tcgetattr(stdin.as_fd())?;
        // The shell's pty gets the outer one's settings (iutf8, which mosh-server sets, the
        // control characters), as the shell would have them without the recorder.
        tcsetattr(&slave, OptionalActions::Now, &t)?;
        let mut raw = t.clone();
        raw.make_raw();
        tcsetattr(stdin.as_fd(), OptionalActions::Now, &raw)?;
        Some(t)
    } else {
        None
    };
    let result = serve(args, master, slave, size);
    if let Some(t) = saved {
        let _ = tcsetattr(io::stdin().as_fd(), OptionalActions::Now, &t);
    }
    result
}

fn size_of(w: Winsize) -> Size {
    Size { cols: w.ws_col.max(1), rows: w.ws_row.max(1) }
}

fn geometry_of(w: Winsize) -> Geometry {
    Geometry::from_winsize(w.ws_col, w.ws_row, w.ws_xpixel, w.ws_ypixel)
}

/// A winsize in one word, for the resize thread to hand the output loop.
fn pack(w: Winsize) -> u64 {
    u64::from(w.ws_row)
        | u64::from(w.ws_col) << 16
        | u64::from(w.ws_xpixel) << 32
        | u64::from(w.ws_ypixel) << 48
}

fn unpack(v: u64) -> Winsize {
    Winsize {
        ws_row: v as u16,
        ws_col: (v >> 16) as u16,
        ws_xpixel: (v >> 32) as u16,
        ws_ypixel: (v >> 48) as u16,
    }
}

fn serve(args: &RecordArgs, master: OwnedFd, slave: OwnedFd, size: Winsize) -> io::Result<i32> {
    let mut shell = Command::new("setsid");
    if args.images {
        // `tern show` prints only where a recorder lifts its picture.
        shell.env(IMAGES_ENV, args.image_max_bytes.to_string());
    } else {
        shell.env_remove(IMAGES_ENV);
    }
    let mut child = shell
        .arg("--ctty")
        .arg("--wait")
        .args(&args.command)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave))
        .spawn()?;
    // The command holds the shell's side of the pty: closed here, so that its end (EIO on the
    // master) ends the output loop.
    drop(shell);
    let mut emulator = Emulator::new(size_of(size));
    emulator.keep_scrolled_off(true);
    let emulator = Arc::new(Mutex::new(emulator));
    let mut writer =
        HistoryWriter::open(&args.history_dir, &args.session, args.max_lines, args.max_bytes)?;
    let mut lines = HistoryLines::new();
    let mut images = args.images.then(|| Images {
        lifter: Lifter::new(LifterConfig {
            max_image_bytes: args.image_max_bytes,
            geometry: geometry_of(size),
        }),
        // No store (a full disk, a bad directory): images are still taken out, never kept.
        store: ImageStore::open(&args.history_dir, &args.session, args.images_quota).ok(),
        out: Vec::new(),
        events: Vec::new(),
        signals: Vec::new(),
        stored: Vec::new(),
        open_link: None,
        to_relay: SignalSender::start(&args.session),
    });
    let winsize = Arc::new(AtomicU64::new(pack(size)));
    // No recording file (a full disk, a bad directory): the session goes on unrecorded.
    let cast = args.cast_bytes.and_then(|cap| {
        super::cast::Recording::create(
            &args.history_dir,
            &args.session,
            cap,
            size.ws_col,
            size.ws_row,
        )
        .ok()
    });

    // Resizes: the outer pty's size to the inner one (its shell gets SIGWINCH) and the emulator,
    // on each SIGWINCH and before each key goes on.
    let sizes = Arc::new(SizeFollower {
        master: master.try_clone()?,
        emulator: Arc::clone(&emulator),
        winsize: Arc::clone(&winsize),
        last: Mutex::new(size),
    });
    // Keys: the outer terminal to the shell's pty, byte for byte. mosh-server resizes its pty
    // before it writes the keys that followed a Resize; the SIGWINCH thread may be scheduled
    // later than this one, so the size is brought over here first: a command in those keys
    // (`tput cols`) sees the new size, as without the recorder.
    let mut to_shell = File::from(master.try_clone()?);
    let keys_sizes = Arc::clone(&sizes);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut stdin = io::stdin().lock();
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 || keys_sizes.sync().is_err() || to_shell.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    std::thread::spawn(move || follow_resizes(&sizes));

    // Output: to the outer terminal as it is (images lifted out), and through the emulator into
    // the history.
    let mut from_shell = File::from(master);
    let mut stdout = Output { out: io::stdout().lock(), cast, winsize: Arc::clone(&winsize) };
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_size = pack(size);
    loop {
        // Bytes that may start an image wait for the next read, but not forever: a program whose
        // last output was a lone ESC (or an undecided introducer) gets it through after a quiet
        // while.
        if let Some(im) = images.as_mut().filter(|im| im.lifter.is_undecided())
            && !output_within(&from_shell, UNDECIDED_QUIET)
        {
            im.release();
            {
                let mut e = emulator.lock().unwrap_or_else(|p| p.into_inner());
                im.record(&mut e, &mut writer, &mut lines);
            }
            stdout.write_all(&im.out)?;
            stdout.flush()?;
            continue;
        }
        let n = match from_shell.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            // EIO: the shell's side closed (it exited).
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Lifting off, or a read that cannot hold (or go on) an image sequence, as a key's echo
        // nearly always is: through as it came, with no copy.
        let plain = images.as_ref().is_none_or(|im| {
            im.lifter.is_idle() && !buf[..n].iter().any(|&b| b == 0x1b || b == 0xc2)
        });
        let Some(im) = images.as_mut().filter(|_| !plain) else {
            stdout.write_all(&buf[..n])?;
            stdout.flush()?;
            let rows = {
                let mut e = emulator.lock().unwrap_or_else(|p| p.into_inner());
                e.feed(&buf[..n]);
                e.take_scrolled_off()
            };
            if !rows.is_empty() {
                // A full disk loses history, never the session.
                let _ = writer.append(&lines.push_rows(&rows));
            }
            continue;
        };
        let now = winsize.load(Ordering::Relaxed);
        if now != last_size {
            last_size = now;
            im.lifter.set_geometry(geometry_of(unpack(now)));
        }
        im.lift(&buf[..n], false);
        {
            let mut e = emulator.lock().unwrap_or_else(|p| p.into_inner());
            im.record(&mut e, &mut writer, &mut lines);
        }
        im.send_signals();
        stdout.write_all(&im.out)?;
        stdout.flush()?;
    }
    if let Some(im) = images.as_mut() {
        im.lift(&[], true);
        let mut e = emulator.lock().unwrap_or_else(|p| p.into_inner());
        im.record(&mut e, &mut writer, &mut lines);
        let _ = stdout.write_all(&im.out).and_then(|()| stdout.flush());
    }
    if let Some(to) = images.and_then(|im| im.to_relay) {
        to.finish(std::time::Duration::from_secs(2));
    }
    let status = child.wait()?;
    Ok(status.code().unwrap_or(1))
}

/// The recorder's stdout (mosh-server's pty): every byte written to it also goes to the session's
/// recording, if any (`--cast-bytes`), at the terminal's size then; dropped, it ends the recording.
struct Output {
    out: io::StdoutLock<'static>,
    cast: Option<super::cast::Recording>,
    winsize: Arc<AtomicU64>,
}

impl Output {
    fn size(&self) -> (u16, u16) {
        let w = unpack(self.winsize.load(Ordering::Relaxed));
        (w.ws_col, w.ws_row)
    }
}

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.out.write(bytes)?;
        let (cols, rows) = self.size();
        if let Some(c) = self.cast.as_mut() {
            c.output(&bytes[..n], cols, rows);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let (cols, rows) = self.size();
        if let Some(c) = self.cast.as_mut() {
            c.finish(cols, rows);
        }
    }
}

/// Set by the recorder for its shell when it lifts images: the most encoded bytes of one image
/// (`tern show`, relay/src/send/show.rs, prints pictures only where it is set).
pub const IMAGES_ENV: &str = "TERN_IMAGES";

/// How long the recorder waits for more output before it lets undecided bytes through as text
/// (`Lifter::release_undecided`): programs write an escape sequence in one go, so a split one's
/// rest comes within microseconds; a lone ESC left at the end is shown after this.
const UNDECIDED_QUIET: std::time::Duration = std::time::Duration::from_millis(30);

/// Whether the shell's side has output to read within `wait` (an error counts as yes: the read
/// that follows reports it).
fn output_within(from_shell: &File, wait: std::time::Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(from_shell, PollFlags::IN)];
    let timeout = Timespec { tv_sec: 0, tv_nsec: wait.as_nanos() as _ };
    loop {
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return true,
        }
    }
}

/// What the lifter found in one read, after the text before it in `out`.
enum Event {
    Image(LiftedImage),
    Dropped(Dropped),
    /// OSC 8: a hyperlink to this URL begins here (`None`: the one open ends).
    Link(Option<String>),
}

/// The recorder's image lifting: the lifter, the store, and one read's output.
struct Images {
    lifter: Lifter,
    store: Option<ImageStore>,
    /// The read's bytes for mosh-server: its text ([`Images::lift`]), then with each image's
    /// marker and layout bytes in its place ([`Images::record`]).
    out: Vec<u8>,
    /// Where in the text each image came, and what it was.
    events: Vec<(usize, Event)>,
    /// Clipboard writes, notifications and links of the read, for the relay.
    signals: Vec<PageSignal>,
    /// The pictures of the read stored, for the relay (pages waiting for the next one).
    stored: Vec<u64>,
    /// The hyperlink open (OSC 8): its URL and where on the screen its text began.
    open_link: Option<(String, Pos)>,
    /// To the relay, which hands them to the session's page.
    to_relay: Option<SignalSender>,
}

impl Images {
    /// Lifts the images out of one read (`end`: the output ended): its text into `out`, each
    /// image (or drop) into `events` with where in `out` it came. [`Images::record`] then puts
    /// the marker and layout bytes in.
    fn lift(&mut self, read: &[u8], end: bool) {
        self.out.clear();
        self.events.clear();
        let (out, events, signals) = (&mut self.out, &mut self.events, &mut self.signals);
        let mut take = |piece: Piece<'_>| match piece {
            Piece::Signal(Signal::Link { url }) => events.push((out.len(), Event::Link(url))),
            Piece::Signal(Signal::Clipboard { text, .. }) => {
                signals.push(PageSignal::Clipboard { text })
            }
            Piece::Signal(Signal::Notify { title, body }) => {
                signals.push(PageSignal::Notify { title, body })
            }
            Piece::Text(t) => out.extend_from_slice(t),
            Piece::Image(image) => {
                events.push((out.len(), Event::Image(image)));
            }
            Piece::Dropped(d) => events.push((out.len(), Event::Dropped(d))),
        };
        if end {
            self.lifter.finish(&mut take);
        } else {
            self.lifter.feed(read, &mut take);
        }
    }

    /// Hands the read's clipboard writes and notifications to the relay (notifications paced:
    /// [`NotifyLimit`]).
    fn send_signals(&mut self) {
        for s in self.signals.drain(..) {
            if let Some(to) = self.to_relay.as_mut() {
                to.send(s);
            }
        }
        // Before the read (with the pictures' markers) goes to mosh-server: the relay starts
        // sending a picture while its marker is on its way.
        for id in self.stored.drain(..) {
            if let Some(to) = self.to_relay.as_mut() {
                to.stored(id);
            }
        }
    }

    /// Lets the lifter's undecided bytes through into `out` (after a quiet while).
    fn release(&mut self) {
        self.out.clear();
        self.events.clear();
        let out = &mut self.out;
        self.lifter.release_undecided(&mut |piece| {
            if let Piece::Text(t) = piece {
                out.extend_from_slice(t);
            }
        });
    }

    /// Feeds the read's text to the emulator, into the history, and at each image stores it at
    /// the cursor, then puts in `out` the image's marker (docs/IMAGES.md: where the page finds it
    /// in mosh-server's screen) and the cursor moves it makes, fed to the emulator too. `out` is
    /// then what goes to mosh-server.
    fn record(&mut self, e: &mut Emulator, writer: &mut HistoryWriter, lines: &mut HistoryLines) {
        // A full disk loses history and images, never the session.
        let mut scrolled = |e: &mut Emulator| {
            let rows = e.take_scrolled_off();
            if !rows.is_empty() {
                let _ = writer.append(&lines.push_rows(&rows));
            }
            writer.next_line()
        };
        if self.events.is_empty() {
            e.feed(&self.out);
            scrolled(e);
            return;
        }
        let mut with_layout = Vec::with_capacity(self.out.len() + 64 * self.events.len());
        let mut from = 0;
        for (at, event) in &self.events {
            let text = &self.out[from..*at];
            e.feed(text);
            with_layout.extend_from_slice(text);
            from = *at;
            if let Event::Link(url) = event {
                // The link's text is what the screen shows between its start and its end.
                let fb = e.framebuffer();
                if let Some((url, start)) = self.open_link.take()
                    && let Some((text, col)) = link_text(fb, start)
                {
                    self.signals.push(PageSignal::Link { url, text, col });
                }
                self.open_link = url.clone().zip(link_start(fb));
                continue;
            }
            let completed = scrolled(e);
            let at = anchor(e, completed);
            let id = match (self.store.as_mut(), event) {
                (Some(store), Event::Image(image)) => store.store(image, &at).ok().flatten(),
                (Some(store), Event::Dropped(d)) => {
                    let _ = store.dropped(d, &at);
                    None
                }
                // Taken before (a link has no place in the store).
                (_, Event::Link(_)) | (None, _) => None,
            };
            if let Event::Image(image) = event {
                self.stored.extend(id);
                let fb = e.framebuffer();
                let mut moves = match id {
                    Some(id) => marker::marker_bytes(id, fb.pen(), fb.cursor().col, fb.size().cols),
                    None => Vec::new(),
                };
                moves.extend_from_slice(&image.layout_bytes());
                e.feed(&moves);
                with_layout.extend_from_slice(&moves);
            }
        }
        let rest = &self.out[from..];
        e.feed(rest);
        with_layout.extend_from_slice(rest);
        scrolled(e);
        self.out = with_layout;
    }
}

/// The recorder's end of the relay's socket (`TERN_SOCKET`, send/socket.rs) for what programs
/// print that mosh-server drops: a thread writes each to the relay, so the output never waits for
/// it; at most [`SignalSender::QUEUE`] wait (more are dropped), and notifications are paced.
struct SignalSender {
    tx: std::sync::mpsc::SyncSender<Vec<u8>>,
    session: String,
    limit: NotifyLimit,
    started: std::time::Instant,
    /// Closed by the thread when it has written everything (the recorder's end waits for it).
    done: std::sync::mpsc::Receiver<()>,
}

impl SignalSender {
    const QUEUE: usize = 8;

    /// `None` without the relay's socket in the environment (a recorder run by hand).
    fn start(session: &str) -> Option<SignalSender> {
        let socket = PathBuf::from(std::env::var_os(crate::command::SOCKET_ENV)?);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(Self::QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _done = done_tx;
            for line in rx {
                // One request per connection; a relay that is away loses the signal.
                if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&socket) {
                    let _ = s.write_all(&line);
                }
            }
        });
        let session = session.to_owned();
        Some(SignalSender {
            tx,
            session,
            limit: NotifyLimit::default(),
            started: std::time::Instant::now(),
            done,
        })
    }

    /// The output ended: what is queued goes to the relay first (waiting at most `wait`: a relay
    /// that does not read must not keep the recorder, and so the session, from ending).
    fn finish(self, wait: std::time::Duration) {
        drop(self.tx);
        let _ = self.done.recv_timeout(wait);
    }

    fn send(&mut self, signal: PageSignal) {
        use crate::command::{Request, line};
        let session = self.session.clone();
        let request = match signal {
            PageSignal::Clipboard { text } => Request::Clipboard { session, text },
            PageSignal::Notify { title, body } => {
                if !self.limit.allow(self.started.elapsed().as_millis() as u64) {
                    return;
                }
                Request::Notify { session, title, body }
            }
            PageSignal::Link { url, text, col } => Request::Link { session, url, text, col },
        };
        let _ = self.tx.try_send(line(&request));
    }

    fn stored(&mut self, id: u64) {
        use crate::command::{Request, line};
        let request = Request::ImageStored { session: self.session.clone(), id };
        let _ = self.tx.try_send(line(&request));
    }
}

/// The outer terminal's size, copied to the inner pty (its shell gets SIGWINCH) and the emulator
/// whenever it changes. Both the SIGWINCH thread and the keys thread call [`sync`](Self::sync):
/// whichever comes first after mosh-server's resize applies it, once.
struct SizeFollower {
    master: OwnedFd,
    emulator: Arc<Mutex<Emulator>>,
    /// Read by the output loop (the image lifter's cells and the recording's size).
    winsize: Arc<AtomicU64>,
    /// The size the inner pty has; held while it is changed, so two threads never apply one
    /// change twice or out of order.
    last: Mutex<Winsize>,
}

impl SizeFollower {
    fn sync(&self) -> io::Result<()> {
        let now = tcgetwinsize(io::stdin().as_fd())?;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if pack(now) == pack(*last) {
            return Ok(());
        }
        *last = now;
        // The image lifter's cells (and their pixels) follow, and the recording's size: before
        // the shell's SIGWINCH, so that what it redraws is recorded after the resize.
        self.winsize.store(pack(now), Ordering::Relaxed);
        tcsetwinsize(&self.master, now)?;
        self.emulator.lock().unwrap_or_else(|p| p.into_inner()).resize(size_of(now));
        Ok(())
    }
}

/// Follows the outer terminal's resizes (mosh-server resizes it on each Resize; this process
/// gets SIGWINCH then).
fn follow_resizes(sizes: &SizeFollower) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    rt.block_on(async {
        let Ok(mut winch) = signal(SignalKind::window_change()) else { return };
        // Looks once before the first SIGWINCH: a resize while the recorder was starting (after
        // it read the size, before it listened) sent its signal to no one.
        loop {
            if sizes.sync().is_err() || winch.recv().await.is_none() {
                return;
            }
        }
    });
}
